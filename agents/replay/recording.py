"""What a recorded session decided, read back from its events and archive (feature E2).

A replay needs, per agent turn: the model's answers (MODEL_CALL "reply"), the user
messages that arrived, the time the turn started (for the time hint), and for every tool
call the archive ref of its raw result plus the conclusions the tool drew. All of it is
in the stored events; the raw tool output is read back through the source's archive.

A session that delegated (T6) also recorded, per delegate call, the sub-agent it started
(the pending TOOL_RESULT) and, a turn later, what that sub-agent answered (the delivered
TOOL_RESULT, whose text is in the parent's archive): a replay reuses those answers.
"""
from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from agents.events import Event, ModelCall, ToolResult, TurnStarted, UserMessage, event_from

REF = re.compile(r"arc:[\w-]+:\d+")


class RecordingError(ValueError):
    """The session cannot be replayed; the message says why."""


@dataclass
class RecordedResult:
    ref: str | None
    error: str | None
    conclusions: list[str] = field(default_factory=list)


@dataclass
class RecordedAnswer:
    """A sub-agent's answer as the recorded parent received it (feature T6)."""

    child: str
    ref: str | None  # the delivered text, in the parent's archive
    error: str | None
    status: str
    input_tokens: int = 0
    cost: float = 0.0
    turn: int = 0  # the parent turn it arrived at


@dataclass
class Recording:
    session_id: str
    replies: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # agent answers
    user_messages: dict[int, list[tuple[str, str]]] = field(default_factory=dict)  # (text, source)
    user_refs: dict[tuple[int, str], str] = field(default_factory=dict)  # (turn, text) -> ref
    results: dict[tuple[int, str], RecordedResult] = field(default_factory=dict)  # (turn, call id)
    turn_started: dict[int, dt.datetime] = field(default_factory=dict)
    delegations: dict[tuple[int, str], str] = field(default_factory=dict)  # call -> child id
    answers: dict[str, RecordedAnswer] = field(default_factory=dict)  # child id -> its answer
    read_raw: Callable[[str], str | None] = lambda ref: None

    @property
    def turns(self) -> int:
        return max(self.replies, default=-1) + 1

    def raw_result(self, turn: int, call_id: str) -> RecordedResult | None:
        return self.results.get((turn, call_id))

    def clock_at(self, turn: int) -> dt.datetime:
        """When the recorded turn started (the time hint of a replay shows that time)."""
        if turn in self.turn_started:
            return self.turn_started[turn]
        earlier = [t for t in self.turn_started if t <= turn]
        if earlier:
            return self.turn_started[max(earlier)]
        return min(self.turn_started.values(), default=dt.datetime(2026, 1, 1,
                                                                      tzinfo=dt.timezone.utc))


def _moment(value: Any) -> dt.datetime | None:
    if isinstance(value, dt.datetime):
        return value
    try:
        moment = dt.datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


def build_recording(session_id: str, events: Iterable[Any],
                    read_raw: Callable[[str], str | None]) -> Recording:
    """A Recording from stored events (objects with type, turn, payload, at), oldest first."""
    rec = Recording(session_id=str(session_id), read_raw=read_raw)
    replies: dict[int, list[dict[str, Any]]] = defaultdict(list)
    saw_calls = False
    for stored in events:
        ev = stored if isinstance(stored, Event) else event_from(
            stored.type, stored.payload, turn=stored.turn, at=stored.at)
        if isinstance(ev, ModelCall) and ev.kind == "agent":
            saw_calls = True
            if ev.reply is not None and not ev.refused:
                replies[ev.turn].append(ev.reply)
        elif isinstance(ev, UserMessage) and ev.source in ("user", "scenario"):
            rec.user_messages.setdefault(ev.turn, []).append((ev.text, ev.source))
            if ev.ref:
                rec.user_refs[(ev.turn, ev.text)] = ev.ref
        elif isinstance(ev, ToolResult) and ev.child:
            rec.answers[str(ev.child)] = RecordedAnswer(
                str(ev.child), ev.ref, ev.error, str(ev.child_status or ""),
                int(ev.child_input_tokens or 0), float(ev.child_cost or 0), ev.turn)
        elif isinstance(ev, ToolResult):
            if ev.pending:
                rec.delegations[(ev.turn, ev.call_id)] = str(ev.pending)
            rec.results[(ev.turn, ev.call_id)] = RecordedResult(
                ev.ref, ev.error, list(ev.conclusions or []))
        elif isinstance(ev, TurnStarted):
            moment = _moment(ev.at)
            if moment is not None and ev.turn not in rec.turn_started:
                rec.turn_started[ev.turn] = moment
    if saw_calls and not replies:
        raise RecordingError(
            f"Session {session_id} was recorded before TaskOS stored the model's answers, so "
            "its decisions cannot be played back. Run it again to get a replayable recording.")
    if not replies:
        raise RecordingError(f"Session {session_id} made no model call: nothing to replay.")
    rec.replies = dict(replies)
    return rec
