"""Inspector: exactly what the model received at one call, message by message."""
from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from taskos.drawer.base import Panel
from taskos.drawer.events import Ev, call_payload

SHOWN_CHARS = 6000  # longer messages are cut on screen; the JSON export has them whole


def message_rows(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Display rows for a call's messages: role, zone, tokens and (cut) content."""
    rows = []
    for index, message in enumerate(messages, start=1):
        content = message.get("content")
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False, indent=1)
        tool_calls = message.get("tool_calls") or []
        rows.append({
            "index": index, "role": message.get("role", ""), "zone": message.get("zone", ""),
            "tokens": int(message.get("tokens") or 0), "content": content[:SHOWN_CHARS],
            "cut": max(0, len(content) - SHOWN_CHARS),
            "tool_calls": [json.dumps(call, ensure_ascii=False) for call in tool_calls],
            "name": message.get("name") or message.get("tool_call_id") or "",
        })
    return rows


def call_detail(session, number: int | None) -> dict[str, Any] | None:
    """The inspector's view of call `number`: header figures, per-zone totals, messages."""
    if number is None:
        return None
    payload = call_payload(session, number)
    if payload is None:
        return None
    rows = message_rows(payload.get("messages") or [])
    per_zone: dict[str, int] = defaultdict(int)
    for row in rows:
        per_zone[row["zone"] or "—"] += row["tokens"]
    return {"call": number, "kind": payload.get("kind", "agent"), "turn": payload["turn"],
            "input_tokens": payload.get("input_tokens", 0),
            "output_tokens": payload.get("output_tokens", 0),
            "cached_tokens": payload.get("cached_tokens"),
            "finish_reason": payload.get("finish_reason", ""),
            "latency_ms": payload.get("latency_ms"), "model": payload.get("model", ""),
            "over_window": bool(payload.get("over_window")),
            "zones": sorted(per_zone.items(), key=lambda item: -item[1]), "messages": rows}


class InspectorPanel(Panel):
    name = "inspector"
    title = "Inspector"
    template = "drawer/panels/inspector.html"
    event_types = ("MODEL_CALL",)

    def get_context(self, session, events: list[Ev], pinned: int | None = None) -> dict[str, Any]:
        calls = [{"call": ev.payload.get("call"), "kind": ev.payload.get("kind", "agent"),
                  "tokens": ev.payload.get("input_tokens", 0), "turn": ev.turn} for ev in events]
        latest = calls[-1]["call"] if calls else None
        return {"calls": calls[::-1], "latest": latest, "pinned": pinned,
                "detail": call_detail(session, pinned if pinned is not None else latest)}

    def badge(self, context: dict[str, Any]) -> str:
        return f"call {context['latest']}" if context["latest"] is not None else ""
