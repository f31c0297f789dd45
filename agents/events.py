"""The events the engine emits: one dataclass per event type, its payload as fields.

Only the engine creates events; the web side stores them (type, payload, turn, seq, at)
and reads them back with `event_from`, which gives the same typed event with defaults
for anything an older row lacks. Every event has the envelope fields `session_id`,
`turn`, `seq` (given by whoever stores it) and `at`; `payload` is the dict of the
type's own fields, as stored and as streamed.

A field marked `optional` is left out of the payload while it is None: it is only said
when it applies (the `refused` of a MODEL_CALL, the `child` of a delegate's TOOL_RESULT).
Zones are named by ZONES, in the order a request lays them out (feature C17).
"""
from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Protocol

# In layout order (feature C17): the stable part, then what changes every turn.
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
    APPROVAL_REQUESTED = "APPROVAL_REQUESTED"
    APPROVAL_DECIDED = "APPROVAL_DECIDED"
    SESSION_FINISHED = "SESSION_FINISHED"


def utcnow_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat()


def optional(default: Any = None) -> Any:
    """A payload field said only when it applies: left out of the payload while None."""
    return field(default=default, metadata={"optional": True})


def _listed() -> Any:
    return field(default_factory=list)


def _mapped() -> Any:
    return field(default_factory=dict)


ENVELOPE = ("session_id", "turn", "seq", "at")


@dataclass(kw_only=True, eq=False)
class Event:
    """What every event has: where and when it happened. Subclasses add the payload."""

    TYPE: ClassVar[EventType]
    # Payload keys that are envelope fields too (TURN_STARTED's "turn").
    ENVELOPE_IN_PAYLOAD: ClassVar[tuple[str, ...]] = ()
    _payload_fields: ClassVar[tuple[tuple[str, bool], ...]] = ()
    _payload_names: ClassVar[frozenset[str]] = frozenset()

    session_id: str = ""
    turn: int = 0
    seq: int = 0  # given by whoever stores the event
    at: str = field(default_factory=utcnow_iso)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "TYPE" in cls.__dict__:
            EVENT_CLASSES[cls.TYPE] = cls

    @property
    def type(self) -> EventType:
        return self.TYPE

    @property
    def payload(self) -> dict[str, Any]:
        """The type's own fields, in order; optional ones only while they are set."""
        out = {name: getattr(self, name) for name in self.ENVELOPE_IN_PAYLOAD}
        for name, is_optional in self._fields():
            value = getattr(self, name)
            if value is not None or not is_optional:
                out[name] = value
        return out

    @classmethod
    def _fields(cls) -> tuple[tuple[str, bool], ...]:
        if "_payload_fields" not in cls.__dict__:  # worked out once per class
            cls._payload_fields = tuple(
                (f.name, bool(f.metadata.get("optional"))) for f in dataclasses.fields(cls)
                if f.name not in ENVELOPE)
            cls._payload_names = frozenset(name for name, _ in cls._payload_fields)
        return cls._payload_fields

    @classmethod
    def payload_keys(cls) -> tuple[str, ...]:
        """The keys of this type's payload, in order: its fields less the envelope."""
        return tuple(name for name, _ in cls._fields())

    @classmethod
    def _names(cls) -> frozenset[str]:
        cls._fields()
        return cls._payload_names

    def with_payload(self, payload: dict[str, Any]) -> Event:
        """This event with its payload fields set from `payload` (the envelope kept)."""
        names = self._names()
        return dataclasses.replace(self, **{k: v for k, v in payload.items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        return {"type": str(self.type), "payload": self.payload, "turn": self.turn,
                "session_id": self.session_id, "seq": self.seq, "at": self.at}


EVENT_CLASSES: dict[str, type[Event]] = {}


@dataclass(kw_only=True, eq=False)
class SessionStarted(Event):
    TYPE = EventType.SESSION_STARTED
    goal: str = ""
    profile: str = ""
    model: str = ""
    window: int = 0
    simulated: bool = False
    resumed: bool = False
    warnings: list[str] = _listed()


@dataclass(kw_only=True, eq=False)
class TurnStarted(Event):
    TYPE = EventType.TURN_STARTED
    ENVELOPE_IN_PAYLOAD = ("turn",)


@dataclass(kw_only=True, eq=False)
class UserMessage(Event):
    TYPE = EventType.USER_MESSAGE
    text: str = ""
    source: str = "user"  # goal | scenario | user | engine (the engine's own nudges)
    ref: str | None = None


@dataclass(kw_only=True, eq=False)
class BudgetEvent(Event):
    """The request about to be sent, zone by zone, against the lines that trigger."""

    TYPE = EventType.BUDGET
    window: int = 0
    zones: dict[str, int] = _mapped()  # ZONES; "reserve" is the output reserve
    budgets: dict[str, int] = _mapped()
    input_tokens: int = 0
    trigger_line: int = 0
    warning_line: int = 0
    limit: int = 0
    free: int = 0
    count_source: str = ""  # exact | calibrated | estimate (feature C2); "": not said
    count_reason: str | None = optional()  # why the counts are no longer exact
    correction: float = 1.0  # the window divisor the calibration asks for
    window_warning: str | None = optional()  # a window that is a guess (feature C18)


@dataclass(kw_only=True, eq=False)
class ModelCall(Event):
    """One call to the model, as sent and as answered, with what it cost (feature W9)."""

    TYPE = EventType.MODEL_CALL
    call: int = 0  # the session's call number
    kind: str = "agent"  # agent | summary | probe
    input_tokens: int = 0  # the provider's count, else the engine's
    engine_tokens: int = 0
    zones: dict[str, int] = _mapped()
    output_tokens: int = 0
    cached_tokens: int = 0
    # Read from and written to a breakpoint cache, where the provider reports them.
    cache_read_tokens: int | None = optional()
    cache_write_tokens: int | None = optional()
    finish_reason: str = ""
    latency_ms: float = 0.0
    cost: float = 0.0
    over_window: bool = False
    limit: int = 0
    refused: bool | None = optional()  # the provider refused it as too long
    error: str | None = optional()
    overflow: str | None = optional()  # "output": the model's own answer filled the window
    # An agent request's: the calls that condensed the person's words its block carries
    # (agents.words.condensing), so a condensing answer no request used is counted.
    words_calls: list[int] | None = optional()
    estimated_tokens: int | None = optional()  # the engine's figure before the call
    count_source: str | None = optional()
    count_kind: str | None = optional()
    served_tokens: int | None = optional()  # the server's report, checked exactly
    count_mismatch: str | None = optional()
    model: str = ""
    # content, tool_calls, finish_reason: what a replay plays (None in very old records)
    reply: dict[str, Any] | None = None
    request: dict[str, Any] = _mapped()  # the rest of the request body, as sent
    messages: list[dict[str, Any]] = _listed()  # annotated with zone, tokens and ref


@dataclass(kw_only=True, eq=False)
class AssistantMessage(Event):
    TYPE = EventType.ASSISTANT_MESSAGE
    content: str = ""
    tool_calls: list[dict[str, Any]] = _listed()  # [{"id", "name", "arguments"}]
    ref: str | None = optional()
    rejected: str | None = optional()  # why it was not taken as the final answer
    incomplete: bool | None = optional()  # still cut by the output limit


@dataclass(kw_only=True, eq=False)
class ToolCall(Event):
    TYPE = EventType.TOOL_CALL
    call_id: str = ""
    name: str = ""
    args: Any = ""


@dataclass(kw_only=True, eq=False)
class ToolResult(Event):
    TYPE = EventType.TOOL_RESULT
    call_id: str = ""
    name: str = ""
    original_chars: int = 0
    kept_chars: int = 0
    original_tokens: int | None = None
    kept_tokens: int = 0
    truncated: bool = False
    ref: str | None = None  # the raw result in the archive
    error: str | None = None
    preview: str = ""
    conclusions: list[str] = _listed()
    pending: str | None = optional()  # a delegate call: the child session it waits for
    child: str | None = optional()  # a delegate call's answer: from this child session
    child_status: str | None = optional()
    child_input_tokens: int | None = optional()
    child_cost: float | None = optional()
    reused: bool | None = optional()  # a replay reused the recorded child's answer
    reused_ref: str | None = optional()


@dataclass(kw_only=True, eq=False)
class CompactionStarted(Event):
    TYPE = EventType.COMPACTION_STARTED
    trigger: str = ""


@dataclass(kw_only=True, eq=False)
class Compaction(Event):
    """What a compaction did, zone by zone, and the engine's own check of it."""

    TYPE = EventType.COMPACTION
    trigger: str = ""  # rolling | anchor | budget | manual | overflow
    # summary: folded into the summary (or truncated, `fallback`); clear: old tool results
    # replaced by their digests without a model call (feature C20), `tokens_saved` fewer.
    kind: str = "summary"
    tokens_saved: int = 0
    digests: list[str] = _listed()  # a clear's one-line digests, in the order of `refs`
    before: dict[str, int] = _mapped()
    after: dict[str, int] = _mapped()
    refresh: bool = False  # an anchor rebuild that moved nothing: not counted
    summary_before: str = ""
    summary_after: str = ""
    archived_turns: list[int] = _listed()  # [first, last]
    refs: list[str] = _listed()
    fallback: bool = False  # truncated instead of summarised (feature C7)
    fallback_reason: str = ""
    summary_calls: int = 0
    summary_calls_discarded: int = 0  # of them, cut or invalid replies asked again
    raised_output: int = 0
    summary_forms: list[str] = _listed()
    audit: dict[str, Any] = _mapped()  # ok, missing_anchors, snapshot_present, ...
    instructions: str = ""
    noop: bool = False
    probe: dict[str, Any] | None = optional()  # the probe questions' grades (feature E3)


@dataclass(kw_only=True, eq=False)
class Audit(Event):
    """The audit of the first agent request after a compaction, against the archive (E3)."""

    TYPE = EventType.AUDIT
    compaction_seq: int = 0
    compaction_turn: int = 0
    call: int | None = None
    ok: bool = True
    statements_checked: int = 0
    missing_statements: list[str] = _listed()
    unsupported_figures: list[str] = _listed()
    unsupported_count: int = 0
    unsupported_names: list[str] = _listed()  # names no archived message holds
    # Goal-and-constraints items of the summary that only a tool result stated (C19)
    tool_text_in_constraints: list[str] = _listed()
    # The person's words check of the same request (agents/compaction/words_check.py)
    words_missing: list[str] = _listed()  # sentences of the person's the request lacked
    words_missing_count: int = 0  # all of them (the list above stops at MAX_FLAGGED)
    # Distinct sentences missing from this request or an earlier one: the report's
    # person_words_kept reads it, since the lists are cut short.
    words_lost_total: int = 0
    superseded_listed: list[str] = _listed()
    quoted_promoted: list[str] = _listed()


@dataclass(kw_only=True, eq=False)
class HintBlock(Event):
    TYPE = EventType.HINT_BLOCK
    kind: str = ""  # time | tasks | context | tool_error | tool_repeat
    text: str = ""


@dataclass(kw_only=True, eq=False)
class AnchorChanged(Event):
    TYPE = EventType.ANCHOR_CHANGED
    id: int | None = None
    tier: int = 1
    old: str | None = None
    new: str | None = None
    source: str = ""  # user | tool | admin | pin
    action: str = ""  # added | changed | removed
    old_id: int | None = optional()  # the replaced anchor, kept inactive in the store


@dataclass(kw_only=True, eq=False)
class TasksChanged(Event):
    TYPE = EventType.TASKS_CHANGED
    tasks: list[dict[str, Any]] = _listed()
    source: str = ""  # agent | admin


@dataclass(kw_only=True, eq=False)
class NotesChanged(Event):
    TYPE = EventType.NOTES_CHANGED
    notes: dict[str, Any] = _mapped()


@dataclass(kw_only=True, eq=False)
class Offload(Event):
    TYPE = EventType.OFFLOAD
    ref: str = ""
    kind: str = ""  # tool_result | context | message
    chars: int = 0
    tool: str | None = optional()
    messages: int | None = optional()


@dataclass(kw_only=True, eq=False)
class ErrorEvent(Event):
    """An error with its cause and what to do (feature W8); a retry says when it retries."""

    TYPE = EventType.ERROR
    code: str = ""
    message: str = ""
    cause: str = ""
    action: str = ""
    fatal: bool = False
    attempt: int | None = optional()
    retry_in_s: float | None = optional()
    next_attempt_at: str | None = optional()
    retry_after: float | None = optional()
    budget_spent_s: float | None = optional()
    budget_s: float | None = optional()


@dataclass(kw_only=True, eq=False)
class SessionWaiting(Event):
    """Delegate calls are open: the session waits for its sub-agents (feature T6)."""

    TYPE = EventType.SESSION_WAITING
    children: list[str] = _listed()
    turns: int = 0
    approvals: list[str] | None = optional()  # ask-first calls (T11) awaiting a person


@dataclass(kw_only=True, eq=False)
class ApprovalRequested(Event):
    """An ask-first tool call (feature T11) waits for a person's decision; `preview` says
    what it would change (a write's diff), when the engine can tell."""

    TYPE = EventType.APPROVAL_REQUESTED
    call_id: str = ""
    name: str = ""
    args: Any = ""
    preview: str = ""


@dataclass(kw_only=True, eq=False)
class ApprovalDecided(Event):
    """A person's decision on an ask-first call, as the resumed run received it: approved
    (the tool runs) or denied (the reason is the tool's result)."""

    TYPE = EventType.APPROVAL_DECIDED
    call_id: str = ""
    name: str = ""
    decision: str = ""  # approved | denied
    reason: str = ""
    decided_by: str = ""
    ref: str | None = None  # the decision's row in the archive


@dataclass(kw_only=True, eq=False)
class SessionFinished(Event):
    TYPE = EventType.SESSION_FINISHED
    status: str = ""  # finished | failed | cancelled
    final_answer: str = ""
    turns: int = 0
    error: str = ""


def event_from(type: str, payload: dict[str, Any] | None = None, **envelope: Any) -> Event:
    """The typed event of a stored (type, payload): unknown keys are left out, missing ones
    take their defaults. ValueError for a type the engine does not emit."""
    cls = EVENT_CLASSES.get(type)
    if cls is None:
        raise ValueError(f"unknown event type {type!r}")
    data = payload or {}
    for name in cls.ENVELOPE_IN_PAYLOAD:
        envelope.setdefault(name, data.get(name, 0))
    names = cls._names()
    return cls(**envelope, **{k: v for k, v in data.items() if k in names})


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
