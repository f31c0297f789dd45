"""Inspector: exactly what the model received at one call: parameters, tools, messages."""
from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, OrderedDict, defaultdict
from difflib import SequenceMatcher
from typing import Any, Collection

from django.template.loader import render_to_string
from django.utils.html import escape
from django.utils.safestring import mark_safe

from agents import Event, EventType
from taskos.drawer.base import Panel
from taskos.drawer.calls import body_of, marked_messages, token_parts, tools_lost
from taskos.drawer.events import load_call
from taskos.runs.models import SessionEvent

SHOWN_CHARS = 1500  # longer messages are cut on screen; the exports have them whole
LISTED_CALLS = 40  # newest calls in the picker (re-sent with each call); others by number


def tool_call_text(call: dict[str, Any]) -> str:
    """A tool call as a person reads it: name(arguments), arguments pretty when JSON."""
    function = call.get("function") or {}
    arguments = function.get("arguments", "")
    try:
        arguments = json.dumps(json.loads(arguments), ensure_ascii=False, indent=1)
    except (TypeError, ValueError):
        pass  # cut-off or free-text arguments are shown as they were sent
    return f"{function.get('name', '?')}({arguments})  id={call.get('id', '')}"


def message_rows(messages: list[dict[str, Any]], tokens: list[int],
                 marked: Collection[int] = ()) -> list[dict[str, Any]]:
    """Display rows for a call's messages: role, zone, tokens and (cut) content; `marked`:
    the (0-based) messages whose text ends a prefix the request marked for caching."""
    rows = []
    for index, (message, count) in enumerate(zip(messages, tokens), start=1):
        content = message.get("content")
        if content is None:  # an assistant turn that only called tools
            content = ""
        elif not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False, indent=1)
        tool_calls = [tool_call_text(c) for c in message.get("tool_calls") or []]
        rows.append({
            "role": message.get("role", ""), "zone": message.get("zone", ""),
            "tokens": count, "content": content[:SHOWN_CHARS],
            "cut": max(0, len(content) - SHOWN_CHARS), "tool_calls": tool_calls,
            "preview": content or "; ".join(t.split("(", 1)[0] + "(…)" for t in tool_calls),
            "name": message.get("name") or message.get("tool_call_id") or "",
            "cache_mark": index - 1 in marked,
            # The row carries its text's digest, not the text (fetched when opened): a
            # row whose text changed past its preview at the same tokens ("50k" edited to
            # "65k") is then another row, and the page fetches it again.
            "digest": hashlib.sha1(json.dumps([content[:SHOWN_CHARS], tool_calls],
                                              ensure_ascii=False).encode()).hexdigest()[:12],
        })
    for row, key in zip(rows, message_keys(messages, [row["digest"] for row in rows])):
        row["key"] = key
    return rows


SAFE_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
# Zones where a request's messages accumulate turn by turn (agents/context zones; a
# summary request's folded units).
CONVERSATION_ZONES = frozenset({"history", "folded"})


def message_keys(messages: list[dict[str, Any]], digests: list[str]) -> list[str]:
    """What names each message's row, the same in every request that holds the message
    wherever it stands in it: a live page keeps the rows a new call repeats, removes the
    ones it dropped and inserts the new ones between them, instead of re-sending every
    row after the first that moved (named by place, each row after the turns a summary
    folded was re-sent), and a row a person opened stays on its message.

    A tool's answer and the call that asked for it are named by the call's id, so a result
    cleared later stays its row; a message alone of its role in a zone outside the
    conversation (the snapshot, the changes since it) by that zone, as a new call rewrites
    it in place; any other by its text's digest (in the conversation a zone's first
    message would otherwise change its name when a second one joins it). Duplicates are
    told apart by their rank."""
    by_zone = Counter((m.get("role", ""), m.get("zone", "")) for m in messages)
    keys: list[str] = []
    taken: set[str] = set()
    for message, digest in zip(messages, digests):
        sent_role, zone = message.get("role", ""), message.get("zone", "")
        role = sent_role if SAFE_ID.fullmatch(sent_role) else "message"
        call_id = message.get("tool_call_id") or next(
            (call.get("id") for call in message.get("tool_calls") or [] if call.get("id")), "")
        if call_id:
            call_name = call_id if SAFE_ID.fullmatch(call_id) else hashlib.sha1(
                call_id.encode()).hexdigest()[:12]
            key = f"{role}-{call_name}"
        elif (by_zone[sent_role, zone] == 1 and zone not in CONVERSATION_ZONES
              and SAFE_ID.fullmatch(zone or "-")):
            key = f"{role}-{zone or '-'}"
        else:
            key = f"{role}-{digest}"
        name, rank = key, 1
        while name in taken:
            rank += 1
            name = f"{key}-{rank}"
        taken.add(name)
        keys.append(name)
    return keys


# Details of recent calls by (session, its start, the call's row). A stored row never
# changes, and a live page re-renders the latest call's detail on each update: rebuilding
# its messages and counting their tokens took most of an update's server time (profiled).
# Keyed by the row's seq, not the call's number: a resumed session runs an interrupted
# turn's calls again under the same numbers, and the detail of the discarded copy must
# not stand for the live one (issue 25 item 2).
_DETAILS: OrderedDict[tuple, dict[str, Any]] = OrderedDict()
DETAILS_KEPT = 64


def call_detail(session, number: int | None, seq: int | None) -> dict[str, Any] | None:
    """The inspector's view of call `number`, stored at `seq` (cached: see _DETAILS); None
    when the session has no such live call."""
    if number is None or seq is None:
        return None
    key = (session.pk, session.created_at, seq)
    detail = _DETAILS.get(key)
    if detail is None:
        detail = read_call_detail(session, number)
        if detail is None or detail["seq"] != seq:
            return detail
        _DETAILS[key] = detail
        while len(_DETAILS) > DETAILS_KEPT:
            _DETAILS.popitem(last=False)
    return detail


# The person's words check of a request (agents/compaction/words_check.py): what failed.
WORDS_CHECKS = (("words_missing", "sentences of the person's missing from this request"),
                ("superseded_listed", "superseded text listed as a hard constraint"),
                ("quoted_promoted", "pasted material listed as the person's constraint"),
                ("tool_text_in_constraints", "text no message of the person's holds listed "
                                             "as their constraint"))


def failed_checks(session, number: int) -> list[dict[str, Any]]:
    """The failed checks of the person's words (C19) on call `number`, each with what it
    found: shown in red on the call."""
    rows = SessionEvent.objects.filter(session=session, type=EventType.AUDIT,
                                       payload__call=number, payload__ok=False)
    found = []
    for payload in rows.values_list("payload", flat=True):
        for key, label in WORDS_CHECKS:
            if payload.get(key):
                found.append({"label": label, "items": payload[key]})
    return found


def read_call_detail(session, number: int) -> dict[str, Any] | None:
    """The inspector's view of call `number`: header figures, the request's parameters,
    tool schemas and messages, each with its tokens (they add up to the header)."""
    call = load_call(session, number)
    if call is None:
        return None
    body = body_of(session, call)
    parts = token_parts(session, call, body)
    rows = message_rows(call.messages, [p["tokens"] for p in parts if p["part"] == "message"],
                        marked_messages(session, call, body))
    per_zone: dict[str, int] = defaultdict(int)
    for row in rows:
        per_zone[row["zone"] or "—"] += row["tokens"]
    extra = {p["part"]: p for p in parts if p["part"] != "message"}
    if "tools" in extra:
        per_zone["tools"] += extra["tools"]["tokens"]
    params = {k: v for k, v in (body or {}).items() if k not in ("messages", "tools")}
    return {"call": number, "seq": call.seq, "kind": call.kind, "turn": call.turn,
            "input_tokens": call.input_tokens, "output_tokens": call.output_tokens,
            "cached_tokens": call.cached_tokens, "finish_reason": call.finish_reason,
            "latency_ms": call.latency_ms, "model": call.model,
            "over_window": call.over_window, "recorded": body is not None,
            "failed_checks": failed_checks(session, number),
            "params": json.dumps(params, ensure_ascii=False),
            "tools": [{"name": (t.get("function") or {}).get("name", "?"),
                       "schema": json.dumps(t, ensure_ascii=False, indent=1)}
                      for t in (body or {}).get("tools") or []],
            "tools_lost": tools_lost(body),
            "tools_part": extra.get("tools"), "priming": extra.get("priming"),
            "difference": extra.get("difference"), "parts_total": sum(p["tokens"] for p in parts),
            "zones": sorted(per_zone.items(), key=lambda item: -item[1]), "messages": rows}


class InspectorPanel(Panel):
    name = "inspector"
    title = "Inspector"
    template = "drawer/panels/inspector.html"
    event_types = (EventType.MODEL_CALL,)

    def get_context(self, session, events: list[Event], pinned: int | None = None) -> dict[str, Any]:
        # ModelCalls (the panel reads no other type), without their messages (load_events).
        calls = [{"call": ev.call, "kind": ev.kind, "tokens": ev.input_tokens, "turn": ev.turn,
                  "seq": ev.seq} for ev in events]
        latest = calls[-1]["call"] if calls else None
        shown = pinned if pinned is not None else latest
        # The page lists live calls only (load_events): the row shown is the listed one.
        seq = next((ev.seq for ev in reversed(events) if ev.call == shown), None)
        # Only the body following the latest call carries the ids live updates target.
        return {"calls": calls[::-1][:LISTED_CALLS], "latest": latest, "pinned": pinned,
                "following": pinned is None, "listed": LISTED_CALLS,
                "unlisted": max(0, len(calls) - LISTED_CALLS),
                "detail": call_detail(session, shown, seq)}

    def badge(self, context: dict[str, Any]) -> str:
        return f"call {context['latest']}" if context["latest"] is not None else ""

    def delta(self, session, context: dict[str, Any], events: list[Event],
              new: list[Event]) -> str | None:
        """The page shows the previous latest call: send what differs from it. Its messages
        are mostly the new call's too (a request repeats the conversation and adds a turn):
        those stay on the page, the rest arrive row by row. On long-1000 the whole body was
        30–50 KB per call, parsed and merged in one frame (profiled: up to 33 ms)."""
        detail = context["detail"]
        before = [ev for ev in events if ev.seq < new[0].seq]
        shown = call_detail(session, before[-1].call, before[-1].seq) if before else None
        if detail is None or shown is None:
            return None
        oob = {**context, "session": session, "oob": True}
        # The bar names no call while following: only a new call's line in its list
        # changes, unless what else it shows does (the call number box, the exports).
        if bar_shape(context["unlisted"], detail) == bar_shape(len(before) - LISTED_CALLS, shown):
            seqs = {ev.seq for ev in new}
            listed = [call for call in context["calls"] if call["seq"] in seqs]
            parts = [inserted("afterbegin", render_to_string(
                "drawer/panels/_inspector_calls.html", {"calls": listed}), "inspector-calls",
                tag="optgroup")] if listed else []
        else:
            parts = [render_to_string("drawer/panels/_inspector_bar.html", oob)]
        parts += [render_to_string("drawer/panels/_inspector_head.html", oob),
                 attributes("div", "inspector-detail", {"data-call": detail["call"]}),
                 attributes("ol", "inspector-messages",
                            {"data-parts-total": detail["parts_total"]})]
        tools = (detail["tools_part"], detail["tools"])
        if tools != (shown["tools_part"], shown["tools"]):
            if detail["tools_part"] is None:
                parts.append(gone("inspector-part-tools"))
            elif shown["tools_part"] is None:
                parts.append(inserted("afterbegin", render_to_string(
                    "drawer/panels/_inspector_tools.html", {**oob, "oob": False})))
            else:
                parts.append(render_to_string("drawer/panels/_inspector_tools.html", oob))
        return mark_safe("\n".join(part.strip() for part in parts + message_changes(
            oob, detail, shown)))


def message_changes(oob: dict[str, Any], detail: dict[str, Any],
                    shown: dict[str, Any]) -> list[str]:
    """Fragments that turn the message list of call `shown` on the page into `detail`'s:
    the rows of both (by key, message_keys) in place when they changed, the others
    removed or inserted next to a row that stays, and the tail (reply priming, the
    provider's difference) brought up to date after them."""
    plain = {**oob, "oob": False}
    parts = []
    rows, old_rows = detail["messages"], shown["messages"]
    keys = [row["key"] for row in rows]
    difference = "drawer/panels/_inspector_difference.html"
    tail_kept = (detail["priming"], detail["difference"]) == (shown["priming"],
                                                               shown["difference"])
    priming_kept = detail["priming"] is not None and detail["priming"] == shown["priming"]
    if priming_kept:  # the difference after it changes alone
        if tail_kept:
            pass
        elif detail["difference"] is None:
            parts.append(gone("inspector-part-difference"))
        elif shown["difference"] is None:
            parts.append(inserted("beforeend", render_to_string(difference, plain)))
        else:
            parts.append(render_to_string(difference, oob))
    elif not tail_kept:  # it leaves, and comes back after the rows
        parts += [gone("inspector-part-priming"), gone("inspector-part-difference")]
    # Rows placed where no row of the list stays to place them by (a summary request
    # after an agent's has no message of it): before the tail, if it stays.
    if priming_kept:
        unplaced = ("beforebegin", "inspector-part-priming")
    elif tail_kept and detail["difference"] is not None:
        unplaced = ("beforebegin", "inspector-part-difference")
    else:
        unplaced = ("beforeend", "inspector-messages")
    matcher = SequenceMatcher(None, [row["key"] for row in old_rows], keys, autojunk=False)
    for tag, old_start, old_end, start, end in matcher.get_opcodes():
        if tag == "equal":
            parts += [render_to_string("drawer/panels/_inspector_message.html",
                                       {**oob, "m": row})
                      for row, old in zip(rows[start:end], old_rows[old_start:old_end])
                      if row != old]
            continue
        if old_end - old_start == 1:
            parts.append(gone(row_id(old_rows[old_start])))
        elif old_end > old_start:  # a compaction drops hundreds of rows at once
            parts.append(gone_through(row_id(old_rows[old_start]),
                                      row_id(old_rows[old_end - 1])))
        if end > start:
            added = "".join(render_to_string("drawer/panels/_inspector_message.html",
                                             {**plain, "noted": True, "m": row})
                            for row in rows[start:end])
            if start > 0:  # the row before them stays (equal ranges alternate with these)
                parts.append(inserted("afterend", added, row_id(rows[start - 1])))
            elif end < len(rows):
                parts.append(inserted("beforebegin", added, row_id(rows[end])))
            else:
                parts.append(inserted(unplaced[0], added, unplaced[1]))
    if not priming_kept and not tail_kept:
        tail = render_to_string("drawer/panels/_inspector_tail.html", plain).strip()
        if tail:
            parts.append(inserted("beforeend", tail))
    return parts


def bar_shape(unlisted: int, detail: dict[str, Any]) -> tuple:
    """What the call picker shows of a call, besides its list of calls, while following."""
    return unlisted > 0, detail["recorded"]


def attributes(tag: str, dom_id: str, values: dict[str, Any]) -> str:
    """Attributes the page sets on the element with this id (its others and its children
    kept)."""
    shown = "".join(f' {name}="{escape(value)}"' for name, value in values.items())
    return f'<{tag} id="{dom_id}" hx-swap-oob="attributes"{shown}></{tag}>'


def gone(dom_id: str) -> str:
    """Removes the element with this id from the page (nothing when it is not there)."""
    return f'<li id="{dom_id}" hx-swap-oob="delete"></li>'


def gone_through(first: str, last: str) -> str:
    """Removes the rows from the one with id `first` to the one with id `last`, both
    included (nothing when `last` does not follow `first` on the page): one fragment,
    not one per row (static/js/fragments.js removeThrough)."""
    return f'<li id="{first}" hx-swap-oob="delete-through:#{last}"></li>'


def row_id(row: dict[str, Any]) -> str:
    """The id of a message's row on a page following the run live."""
    return f"inspector-msg-{row['key']}"


def inserted(where: str, rows: str, dom_id: str = "inspector-messages", tag: str = "ol") -> str:
    return f'<{tag} hx-swap-oob="{where}:#{dom_id}">{rows}</{tag}>'
