"""One model call's request as the provider received it, rebuilt from the stored record.

A MODEL_CALL event keeps the messages annotated with their zone and token count, and
under "request" every other parameter ModelClient passed to the SDK (tool schemas stored
once and referenced by later calls as {"tools_of_call": N}). `request_body` puts these
back together in the order the `openai` SDK writes them and serialises them the way it
does, so the export is the very bytes that went over the wire; the test in
tests/django/test_call_export.py holds this against what the simulated provider received.
Everything that knows how a call is stored lives here, so a change of storage (deltas,
refs) changes this module only.
"""
from __future__ import annotations

import json
from typing import Any

# ANNOTATIONS: the engine's keys on a stored message, never part of what was sent.
from agents import (ANNOTATIONS, REPLY_PRIMING, EventType, ModelCall, TokenCounter, canonical_keys,
                    mark_carriers, wire_with_marks)
from taskos.drawer.events import load_call
from taskos.drawer.tool_costs import schema_part
from taskos.runs.models import Session, SessionEvent

# The order in which openai's chat.completions.create lays out the body (the keys TaskOS
# can send); extra_body is merged after them.
SDK_ORDER = ("model", "stream", "service_tier", "messages", "max_completion_tokens",
             "max_tokens", "parallel_tool_calls", "temperature", "tool_choice", "tools")


def sent_messages(messages: list[dict[str, Any]],
                  key_orders: dict[str, list[str]] | None = None) -> list[dict[str, Any]]:
    """The stored (annotated) messages as they were sent, keys in the order sent."""
    sent = []
    for index, message in enumerate(messages):
        plain = {k: v for k, v in message.items() if k not in ANNOTATIONS}
        order = (key_orders or {}).get(str(index)) or canonical_keys(plain)
        sent.append({key: plain[key] for key in order if key in plain})
    return sent


# What the stored request keeps beside the SDK's parameters, to rebuild the messages with.
REBUILD_KEYS = ("key_orders", "cache_marks")


def wired_messages(session: Session, call: ModelCall) -> list[dict[str, Any]]:
    """The call's messages as its request sent them: in the wire form of the session's
    profile (tool results as user messages, system messages merged, where it says so) and
    with the cache breakpoints the call stored ("cache_marks": only marks that went on the
    wire are stored), placed by the rule the client placed them by."""
    request = call.request or {}
    profile = session.profile
    return wire_with_marks(sent_messages(call.messages, request.get("key_orders")),
                           request.get("cache_marks") or (),
                           tool_results_as_user=bool(profile and profile.tool_results_as_user),
                           single_system_message=bool(profile and profile.single_system_message))


def marked_messages(session: Session, call: ModelCall,
                    body: dict[str, Any] | None) -> set[int]:
    """Indices of the call's messages whose text ends a prefix the request marked for
    caching (`body`: its rebuilt request); none when it carried no marks."""
    if body is None or not (call.request or {}).get("cache_marks"):
        return set()
    profile = session.profile
    return mark_carriers(call.messages, body["messages"],
                         bool(profile and profile.single_system_message))


# How many markers a lookup follows before it calls the schemas lost: the engine writes a
# marker only to a call that stored the schemas, so a chain is a damaged record, not a path.
MARKER_HOPS = 8


def marker_of(tools: Any) -> int | None:
    """The call number a stored {"tools_of_call": N} names, None when `tools` is no marker."""
    if isinstance(tools, dict) and isinstance(tools.get("tools_of_call"), int):
        return tools["tools_of_call"]
    return None


def schemas(tools: Any) -> list[dict[str, Any]] | None:
    """Stored tool schemas as the list sent; None for anything else (a marker, damage)."""
    if isinstance(tools, str):  # stored as JSON text: a JSONB column loses key order
        try:
            tools = json.loads(tools)
        except ValueError:
            return None
    if isinstance(tools, list) and all(isinstance(t, dict) for t in tools):
        return tools
    return None


def tools_of(session: Session, seq: int, request: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The tool schemas of the call stored at `seq` (its `request`), a marker resolved to
    the live call it names; None when they cannot be found (told, never raised).

    The marker names a call number, and after a resume a number is on two rows: the
    discarded copy of the interrupted turn's call (which may itself hold a marker) and the
    live one run again. Only live rows stored before the marking call are read (issue 25
    item 2), the newest such row of the number being the one the engine wrote the marker
    against."""
    tools, hops = request.get("tools"), 0
    while (number := marker_of(tools)) is not None and hops < MARKER_HOPS:
        found = (SessionEvent.objects.filter(session=session, type=EventType.MODEL_CALL,
                                             payload__call=number, seq__lt=seq)
                 .order_by("-seq").values_list("seq", "payload__request__tools").first())
        if found is None:
            return None
        seq, tools = found
        hops += 1
    return schemas(tools)


class ToolsLost(LookupError):
    """A call's request named tool schemas that its stored record no longer resolves to."""


def body_of(session: Session, call: ModelCall) -> dict[str, Any] | None:
    """The request body of a stored call (whole: `load_call`) as a dict in wire order; None
    if not recorded. Tool schemas that cannot be resolved (`tools_of`) are None there."""
    request = call.request
    if not request:
        return None
    params = {k: v for k, v in request.items() if k not in REBUILD_KEYS}
    params["messages"] = wired_messages(session, call)
    if "tools" in params:
        params["tools"] = tools_of(session, call.seq, request)
    extra = params.pop("extra_body", None) or {}
    ordered = {key: params[key] for key in SDK_ORDER if key in params}
    ordered.update((key, value) for key, value in params.items() if key not in ordered)
    return {**ordered, **extra}


def tools_lost(body: dict[str, Any] | None) -> bool:
    """The call sent tool schemas that its record cannot give back."""
    return body is not None and "tools" in body and body["tools"] is None


def dump_body(body: dict[str, Any]) -> bytes:
    """JSON exactly as the SDK serialises a body (openai._utils._json.openapi_dumps)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def request_body(session: Session, number: int) -> bytes | None:
    """The bytes the provider received for call `number`; None when there is no such call
    or it was recorded before request parameters were kept. ToolsLost when its tool
    schemas cannot be resolved: a body without them is not what was sent."""
    call = load_call(session, number)
    if call is None:
        return None
    body = body_of(session, call)
    if tools_lost(body):
        raise ToolsLost(f"The tool schemas call {number} sent are not in its stored record.")
    return None if body is None else dump_body(body)


def token_parts(session: Session, call: ModelCall,
                body: dict[str, Any] | None) -> list[dict[str, Any]]:
    """What each part of the request cost, summing to the call's input tokens.

    Tool schemas, every message (the engine's count stored with it) and the reply priming
    are counted the engine's way; the provider's own total can differ, and the difference
    is a part of its own so the column always adds up to the header.
    """
    profile = session.profile
    counter = TokenCounter(profile.model, profile.encoding)
    parts: list[dict[str, Any]] = []
    tools = (body or {}).get("tools")
    if tools:  # a tool source's (T10) told apart from the built-ins' in its label
        parts.append(schema_part(tools, counter.tools))
    for message in call.messages:
        tokens = message.get("tokens")
        if not tokens:  # probe requests (and summary requests stored before their parts
            # were) have no per-message count: the storage keeps 0. No message costs 0.
            tokens = counter.message(sent_messages([message])[0])
        parts.append({"part": "message", "tokens": int(tokens)})
    parts.append({"part": "priming", "label": "reply priming", "tokens": REPLY_PRIMING})
    counted = sum(p["tokens"] for p in parts)
    total = call.input_tokens
    if total != counted:
        parts.append({"part": "difference", "tokens": total - counted,
                      "label": "provider's count minus the engine's"})
    return parts
