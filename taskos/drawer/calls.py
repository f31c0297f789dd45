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
from agents import ANNOTATIONS, REPLY_PRIMING, EventType, ModelCall, TokenCounter, canonical_keys
from taskos.drawer.events import load_call
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


def _tools_of(session: Session, request: dict[str, Any]) -> Any:
    tools = request.get("tools")
    if isinstance(tools, dict) and "tools_of_call" in tools:
        # all_objects: the call that first sent them may belong to a turn run again since.
        row = (SessionEvent.all_objects.filter(session=session, type=EventType.MODEL_CALL,
                                               payload__call=tools["tools_of_call"])
               .values_list("payload__request__tools", flat=True).first())
        tools = row
    # Stored as JSON text: a JSONB column would not keep the schemas' key order.
    return json.loads(tools) if isinstance(tools, str) else tools


def body_of(session: Session, call: ModelCall) -> dict[str, Any] | None:
    """The request body of a stored call (whole: `load_call`) as a dict in wire order; None
    if not recorded."""
    request = call.request
    if not request:
        return None
    params = {k: v for k, v in request.items() if k != "key_orders"}
    params["messages"] = sent_messages(call.messages, request.get("key_orders"))
    if "tools" in params:
        params["tools"] = _tools_of(session, request)
    extra = params.pop("extra_body", None) or {}
    ordered = {key: params[key] for key in SDK_ORDER if key in params}
    ordered.update((key, value) for key, value in params.items() if key not in ordered)
    return {**ordered, **extra}


def dump_body(body: dict[str, Any]) -> bytes:
    """JSON exactly as the SDK serialises a body (openai._utils._json.openapi_dumps)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def request_body(session: Session, number: int) -> bytes | None:
    """The bytes the provider received for call `number`; None when there is no such call
    or it was recorded before request parameters were kept."""
    call = load_call(session, number)
    if call is None:
        return None
    body = body_of(session, call)
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
    if tools:
        parts.append({"part": "tools", "label": f"{len(tools)} tool schemas",
                      "tokens": counter.tools(tools)})
    for message in call.messages:
        tokens = message.get("tokens")
        if tokens is None:  # summary requests are stored without per-message counts
            tokens = counter.message(sent_messages([message])[0])
        parts.append({"part": "message", "tokens": int(tokens)})
    parts.append({"part": "priming", "label": "reply priming", "tokens": REPLY_PRIMING})
    counted = sum(p["tokens"] for p in parts)
    total = call.input_tokens
    if total != counted:
        parts.append({"part": "difference", "tokens": total - counted,
                      "label": "provider's count minus the engine's"})
    return parts
