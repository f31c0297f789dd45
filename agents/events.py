"""Events the engine emits; the web side stores and streams them, only the engine creates them.

Payload shapes (keys every consumer may rely on):

- SESSION_STARTED   {"goal", "profile", "window", "simulated": bool, "resumed": bool}
- TURN_STARTED      {"turn"}
- USER_MESSAGE      {"text", "source": "scenario"|"user"}
- BUDGET            {"window", "zones": {zone: tokens}, "budgets": {zone: tokens},
                     "input_tokens", "trigger_line", "warning_line", "free"}
                    zones are ZONES below; "reserve" in zones is the output reserve.
- MODEL_CALL        {"call", "kind": "agent"|"summary", "input_tokens", "zones",
                     "output_tokens", "cached_tokens", "finish_reason", "latency_ms",
                     "cost", "over_window": bool, "limit", "model",
                     "reply": {"content", "tool_calls", "finish_reason"},
                     "messages": [{"role", "zone", "tokens", "content", ...}]}
- ASSISTANT_MESSAGE {"content", "tool_calls": [{"id", "name", "arguments"}], "ref"}
- TOOL_CALL         {"call_id", "name", "args"}
- TOOL_RESULT       {"call_id", "name", "original_chars", "kept_chars", "original_tokens",
                     "kept_tokens", "truncated": bool, "ref": str|None, "error": str|None,
                     "preview", "conclusions": [str]}
- COMPACTION_STARTED {"trigger"}
- COMPACTION        {"trigger": "rolling"|"anchor"|"budget"|"manual"|"overflow",
                     "before": {zone: tokens}, "after": {zone: tokens},
                     "summary_before", "summary_after", "archived_turns": [first, last],
                     "refs": [ref...], "fallback": bool, "fallback_reason", "audit": {
                         "ok", "missing_anchors", "snapshot_present", "missing_tasks",
                         "unsupported_numbers"}, "instructions"}
- AUDIT             {"compaction_seq", "compaction_turn", "call", "ok": bool,
                     "statements_checked", "missing_statements": [str],
                     "unsupported_figures": [str], "unsupported_count"}: the E3 audit of
                     the first agent request sent after a compaction (agents/compaction/source_audit.py)
- HINT_BLOCK        {"kind": "time"|"tasks"|"context"|"tool_error"|"tool_repeat", "text"}
- ANCHOR_CHANGED    {"id", "tier", "old", "new", "source": "user"|"tool"|"admin"|"pin",
                     "action": "added"|"changed"|"removed", "old_id"?: the replaced
                     anchor, kept inactive in the Store (a replacement the person asked for)}
- TASKS_CHANGED     {"tasks": [task dict...], "source": "agent"|"admin"}
- NOTES_CHANGED     {"notes": {...}}
- OFFLOAD           {"ref", "kind": "tool_result"|"context"|"message", "chars"}
- ERROR             {"code", "message", "cause", "action", "fatal": bool}
- SESSION_WAITING   {"children": [child session ids], "turns"}: delegate calls are open (T6)
- SESSION_FINISHED  {"status", "final_answer", "turns", "total_input_tokens",
                     "peak_input_tokens", "compactions"}
"""
from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Protocol

# In layout order (SPEC C17): the stable part, then what changes every turn.
ZONES = ("system", "snapshot", "words", "summary", "history", "since", "hints", "reserve")


class EventType(StrEnum):
    SESSION_STARTED = "SESSION_STARTED"
    TURN_STARTED = "TURN_STARTED"
    USER_MESSAGE = "USER_MESSAGE"
    BUDGET = "BUDGET"
    MODEL_CALL = "MODEL_CALL"
    ASSISTANT_MESSAGE = "ASSISTANT_MESSAGE"
    TOOL_CALL = "TOOL_CALL"
    TOOL_RESULT = "TOOL_RESULT"
    COMPACTION_STARTED = "COMPACTION_STARTED"
    COMPACTION = "COMPACTION"
    AUDIT = "AUDIT"
    HINT_BLOCK = "HINT_BLOCK"
    ANCHOR_CHANGED = "ANCHOR_CHANGED"
    TASKS_CHANGED = "TASKS_CHANGED"
    NOTES_CHANGED = "NOTES_CHANGED"
    OFFLOAD = "OFFLOAD"
    ERROR = "ERROR"
    SESSION_WAITING = "SESSION_WAITING"
    SESSION_FINISHED = "SESSION_FINISHED"


def utcnow_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat()


@dataclass
class Event:
    """One thing that happened in a session; `seq` is assigned by whoever stores it."""

    type: str
    payload: dict[str, Any]
    turn: int = 0
    session_id: str = ""
    seq: int = 0
    at: str = field(default_factory=utcnow_iso)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class EventSink(Protocol):
    def emit(self, event: Event) -> None:
        """Persist and/or forward one event."""


class ListSink:
    """Keeps events in memory; used by tests, runtask and the benchmark."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        event.seq = len(self.events) + 1
        self.events.append(event)

    def of_type(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.type == kind]
