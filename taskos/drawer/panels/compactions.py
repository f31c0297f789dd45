"""Compactions: one row per COMPACTION with zones before → after, summary diff and audit.

The audit shown is the E3 audit of the request sent after the compaction (an AUDIT event,
agents/compaction/source_audit.py, checked against the archive); sessions recorded before it existed show
the engine's own check from the COMPACTION payload instead.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from django.db.models import Q
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

from agents import ZONES, Audit, Compaction, CompactionStarted, Event, EventType
from taskos.drawer.base import Panel
from taskos.runs.models import SessionEvent
from taskos.store.stored_events import stored_event

RECENT = 2  # newest compactions listed above the fold, one line each. Only a page rendered
# whole (a finished session's, a first sync) shows one in full, the newest: a live page
# gets each new compaction as its line, with its detail (zones, summary diff, audit, refs)
# fetched when the line is opened (exports.compaction_detail). Sent in full, the detail was
# most of the panel's live bytes: on long-1000, 391 compactions of ~2 KB each and ten
# rewritten summaries of ~20 KB, 650 KB of the panel's 860 KB.
LIVE_EARLIER = 10  # earlier compactions a running session's page holds, one line each:
# the rest are fetched when their folded list is opened (static/js/taskos.js). On long-1000
# the page had held all of them, ~390 rows and 2 400 elements, styled and laid out again
# with every compaction that arrived. A line leaving the recent ones is moved there by the
# page itself (static/js/fragments.js data-keep-into), not sent again.

def sections(text: str) -> list[tuple[str, list[str]]]:
    """A summary split at its markdown headings: [(heading, lines)], "" for the preamble."""
    found: list[tuple[str, list[str]]] = [("", [])]
    for line in (text or "").splitlines():
        if line.startswith("#"):
            found.append((line.strip(), []))
        elif line.strip():
            found[-1][1].append(line)
    return [(head, lines) for head, lines in found if head or lines]


def in_order(lines: list[str], wanted: Counter) -> list[str]:
    """The lines counted in `wanted` (as many times as counted), in their order in `lines`."""
    left, picked = Counter(wanted), []
    for line in lines:
        if left[line] > 0:
            picked.append(line)
            left[line] -= 1
    return picked


def summary_diff(before: str, after: str) -> list[dict[str, str]]:
    """What changed between two summaries, section by section, as
    [{"op": "section"|"add"|"del"|"gap", "text"}].

    Lines are compared as a multiset within their section, so a constraint the new
    summary kept but moved (or a section moved whole) is not shown as removed and added.
    Unchanged sections are left out, a "gap" line saying how many lines they hold.
    """
    old, new = dict(sections(before)), dict(sections(after))
    ops: list[dict[str, str]] = []
    unchanged = 0
    for head in list(new) + [h for h in old if h not in new]:
        gone = Counter(old.get(head, [])) - Counter(new.get(head, []))
        came = Counter(new.get(head, [])) - Counter(old.get(head, []))
        if not gone and not came:
            unchanged += len(new.get(head, []))
            continue
        if head:
            state = " (new section)" if head not in old else (
                " (section removed)" if head not in new else "")
            ops.append({"op": "section", "text": head + state})
        ops.extend({"op": "del", "text": line} for line in in_order(old.get(head, []), gone))
        ops.extend({"op": "add", "text": line} for line in in_order(new.get(head, []), came))
    if ops and unchanged:
        ops.append({"op": "gap", "text": f"… {unchanged} unchanged lines"})
    return ops


def zone_changes(before: dict[str, int], after: dict[str, int]) -> list[dict[str, Any]]:
    """Tokens per zone before → after, in layout order, zones absent from both skipped."""
    rows = []
    for zone in ZONES:
        if zone not in before and zone not in after:
            continue
        old, new = int(before.get(zone, 0)), int(after.get(zone, 0))
        rows.append({"zone": zone, "before": old, "after": new, "delta": new - old})
    return rows


def input_total(zones: dict[str, int]) -> int:
    return sum(v for k, v in zones.items() if k != "reserve")


def brief_row(number: int, ev: Compaction, checked: Audit | None = None) -> dict[str, Any]:
    """One line of a compaction: enough for the older ones of a long session; `checked`
    is the AUDIT of the request sent after it, if there was one."""
    own = ev.audit  # the engine's own check, shown when no AUDIT came
    return {"number": number, "seq": ev.seq, "turn": ev.turn, "trigger": ev.trigger,
            "total_before": input_total(ev.before), "total_after": input_total(ev.after),
            "fallback": ev.fallback, "noop": ev.noop, "refresh": ev.refresh,
            # A clear (feature C20): old tool results left as digests, no model call.
            "cleared": len(ev.refs) if ev.kind == "clear" else None,
            "tokens_saved": ev.tokens_saved,
            "audit_known": checked is not None or bool(own),
            "audit_ok": checked.ok if checked is not None else own.get("ok"),
            "audit_from_archive": checked is not None, **probe_summary(ev)}


def probe_summary(ev: Compaction) -> dict[str, Any]:
    """The probe questions' recovery rate and how the model's summary was read (issue 11)."""
    probe = ev.probe or {}
    forms = ev.summary_forms
    return {"probe_known": bool(probe), "probe_rate": probe.get("rate"),
            "probe_recovered": probe.get("recovered"), "probe_asked": probe.get("asked"),
            "probe_error": probe.get("error") or "",
            "summary_from_text": "text" in forms}


def detailed_row(number: int, ev: Compaction, checked: Audit | None = None) -> dict[str, Any]:
    """Everything about one compaction: zones, summary diff, audit and what left."""
    archived = ev.archived_turns
    own = {} if checked is not None else ev.audit
    return {
        **brief_row(number, ev, checked),
        "zones": zone_changes(ev.before, ev.after),
        "diff": summary_diff(ev.summary_before, ev.summary_after),
        "fallback_reason": ev.fallback_reason,
        "instructions": ev.instructions,
        "archived_first": archived[0] if len(archived) == 2 else None,
        "archived_last": archived[1] if len(archived) == 2 else None,
        "refs": list(ev.refs),
        "missing_anchors": own.get("missing_anchors") or [],
        "missing_tasks": own.get("missing_tasks") or [],
        "unsupported_numbers": own.get("unsupported_numbers") or [],
        "snapshot_present": own.get("snapshot_present"),
        "missing_statements": checked.missing_statements if checked else [],
        "unsupported_figures": checked.unsupported_figures if checked else [],
        "unsupported_more": max(0, checked.unsupported_count - len(checked.unsupported_figures))
        if checked else 0,
        "unsupported_names": checked.unsupported_names if checked else [],
        "audit_call": checked.call if checked else None,
        "probes": list((ev.probe or {}).get("probes") or []),
    }


# What a compaction's one line (`brief_row`) reads of it: the summaries, the most of its
# payload, are read only for the newest, shown in full, and for one whose line is opened.
BRIEF_KEYS = ("trigger", "kind", "tokens_saved", "before", "after", "refresh", "refs",
              "fallback", "summary_forms", "audit", "noop", "probe")


class CompactionsPanel(Panel):
    name = "compactions"
    title = "Compactions"
    template = "drawer/panels/compactions.html"
    event_types = (EventType.COMPACTION_STARTED, EventType.COMPACTION, EventType.AUDIT)
    newest_read = {EventType.COMPACTION: 1}
    older_keys = {EventType.COMPACTION: BRIEF_KEYS}

    def older_read(self, event_type: str) -> Q:
        return Q()  # every earlier one, a line each

    def get_context(self, session, events: list[Event]) -> dict[str, Any]:
        done = [ev for ev in events if isinstance(ev, Compaction)]
        # An audit without a compaction is the person's words check of one request (C19):
        # shown on its call in the inspector, not here.
        audits = {ev.compaction_seq: ev for ev in events
                  if isinstance(ev, Audit) and ev.compaction_seq}
        newest_first = list(enumerate(done, start=1))[::-1]
        # A start with no end is running only while the session is; else it failed midway.
        last = [ev for ev in events if not isinstance(ev, Audit)]
        started = last[-1] if last else None
        running = isinstance(started, CompactionStarted) and session.is_active
        rows = [brief_row(n, ev, audits.get(ev.seq)) for n, ev in newest_first]
        if rows:  # the newest in full
            rows[0] = detailed_row(*newest_first[0], audits.get(newest_first[0][1].seq))
        return {
            "rows": rows[:RECENT],
            "older": rows[RECENT:],
            "recent": RECENT,
            "live_earlier": LIVE_EARLIER,
            # No-ops and anchor refreshes are listed, not counted: nothing was compacted.
            "count": sum(1 for ev in done if not ev.noop),
            "audit_failures": sum(1 for a in audits.values() if a.ok is False),
            "running_trigger": started.trigger if running else None,
        }

    def badge(self, context: dict[str, Any]) -> str:
        if context["running_trigger"] is not None:
            return "running…"
        if context["audit_failures"]:
            return f"{context['count']} · {context['audit_failures']} audit failed"
        return str(context["count"]) if context["count"] else ""

    def delta(self, session, context: dict[str, Any], events: list[Event],
              new: list[Event]) -> str | None:
        """The new compactions' lines on top of the recent ones (the page moves the lines
        that leave those to the top of the earlier ones), the count of the earlier ones
        and the lines an audit arrived for; whole when the page shows no compaction yet or
        the list of earlier compactions is new."""
        rows = context["rows"] + context["older"]  # newest first
        held = sum(1 for ev in events if isinstance(ev, Compaction) and ev.seq < new[0].seq)
        if not held or (context["older"] and held <= RECENT):
            return None
        oob = {**context, "session": session, "oob": True}
        parts = [render_to_string("drawer/panels/_compactions_state.html", oob)]
        fresh = rows[:len(rows) - held]
        if fresh:
            lines = "".join(render_to_string("drawer/panels/_compaction_brief.html",
                                             {"row": row, "session": session}) for row in fresh)
            parts.append(f'<div hx-swap-oob="afterbegin:#compactions-recent">{lines}</div>')
        if context["older"]:
            parts.append(render_to_string("drawer/panels/_compactions_older_count.html", oob))
        audited = {ev.compaction_seq for ev in new if isinstance(ev, Audit)}
        parts += [render_to_string("drawer/panels/_compaction_brief.html",
                                   {"row": row, "session": session, "oob": True})
                  for row in rows[len(fresh):] if row["seq"] in audited]
        return mark_safe("\n".join(parts))


def read_compaction(session, number: int) -> dict[str, Any] | None:
    """Compaction `number` (from 1, as the panel numbers them) in full, with the audit of
    the request sent after it; None when the session has no such compaction."""
    if number < 1:
        return None
    of_session = SessionEvent.objects.filter(session=session)
    found = next(iter(of_session.filter(type=EventType.COMPACTION).order_by("seq")
                      .values("seq", "turn", "payload")[number - 1:number]), None)
    if found is None:
        return None
    ev = stored_event(EventType.COMPACTION, found["payload"], seq=found["seq"],
                      turn=found["turn"])
    audit = (of_session.filter(type=EventType.AUDIT, payload__compaction_seq=ev.seq)
             .order_by("-seq").values("seq", "turn", "payload").first())
    checked = audit and stored_event(EventType.AUDIT, audit["payload"], seq=audit["seq"],
                                     turn=audit["turn"])
    return detailed_row(number, ev, checked or None)
