"""The loop's one state and its one set of dependencies (feature T8).

`LoopState` is everything the loop knows between turns. There is one of it per run: the
loop and each collaborator that needs the turn, the tool state or the answer bookkeeping
are handed this object, not the loop. Its saved part is written at the end of every
committed turn, so a worker that dies loses at most the turn in flight.

`LoopDeps` is what a run is given and never changes while it runs: the session, its
spec, the store, the loop's `emit`, the tools, the workspace and the clock.

`SessionEvents` is the loop's `emit`: every event leaves it with the session id, the
turn and no API key in it, and the state remembers the newest stored seq.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from agents.events import Event, EventSink
from agents.secrets import any_registered, redact_value

if TYPE_CHECKING:
    from agents.context.working import Request
    from agents.loop.spec import SessionSpec
    from agents.store.interface import Store
    from agents.tools.registry import ToolRegistry


@dataclass
class LoopState:
    turn: int = 0
    delivered_through: int = -1  # scenario user messages delivered up to this turn index
    last_seq: int = 0  # seq of the newest event stored; saved with each committed turn
    finished: str | None = None  # the final answer, once a committed turn gave one
    tool_state: dict[str, Any] = field(default_factory=dict)  # the tools' `_ctx.state`
    waiting: dict[str, str] = field(default_factory=dict)  # open delegate call id → child id
    # Ask-first calls waiting for a person (T11): call id → the call (id, name, arguments).
    approvals: dict[str, dict[str, Any]] = field(default_factory=dict)
    handoff: dict[str, Any] = field(default_factory=dict)  # the last compaction's note
    # Within one run, never saved: a resumed run starts its answer bookkeeping afresh.
    empty_answers: int = 0
    rejected_answers: int = 0
    stuck: tuple[str, str] | None = None  # (code, why) the run must stop after this turn
    last_request: Request | None = None  # the request just sent: what the model may echo
    answer_material: str = ""  # the answer turn's own words, which an answer may not repeat


@dataclass(frozen=True)
class LoopDeps:
    session_id: str
    spec: SessionSpec
    store: Store  # redacting: no API key reaches the archive
    emit: Callable[[Event], None]
    tools: ToolRegistry
    workspace: Path
    clock: Callable[[], dt.datetime]


class SessionEvents:
    """The loop's event sink; `observers` see each event after it was stored."""

    def __init__(self, session_id: str, sink: EventSink, state: LoopState) -> None:
        self.session_id, self.sink, self.state = session_id, sink, state
        self.observers: list[Callable[[Event], None]] = []

    def emit(self, event: Event) -> None:
        event.turn = event.turn or self.state.turn
        event.session_id = self.session_id
        if any_registered():  # no API key reaches an event
            payload = event.payload
            redacted = redact_value(payload)
            if redacted is not payload:
                event = event.with_payload(redacted)
        self.sink.emit(event)
        self.state.last_seq = event.seq or self.state.last_seq
        for observe in self.observers:
            observe(event)
