"""The contract between the agent loop and every tool.

A tool is a plain function plus a JSON schema and a boundary declaration (feature C10).
The loop only ever calls `ToolRegistry.run`, which never raises: whatever the tool does
(raise, hang, return 10 MB, bytes, invalid UTF-8, deep JSON) comes back as a bounded
`ToolOutcome`, with the raw output archived through the Store first.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from agents.events import EventSink
from agents.store.interface import Store


@dataclass(frozen=True)
class ToolBoundary:
    """How much of a tool's result may enter the context (feature C10)."""

    max_result_rows: int = 200
    max_result_length: int = 8000  # characters kept in context
    summary_mode: str = "head_tail"  # none | head_tail | stats | llm
    # Retention (feature C20): when an old result may be cleared from the context, leaving
    # a one-line digest and its archive ref. The newest `keep_last` results of the tool
    # stay whole; a result is cleared only once `clear_after_rounds` rounds came after it
    # (and never inside the recent rounds); `never_clear` keeps every result whole.
    keep_last: int = 0
    clear_after_rounds: int = 0
    never_clear: bool = False


@dataclass
class ToolContext:
    """What a tool may touch. Parameters named `_state` etc. receive parts of this."""

    session_id: str
    store: Store
    workspace: Path
    events: EventSink | None = None
    turn: int = 0
    # Mutable agent state shared with the loop (tasks, notes, ...); tools read and write it
    # through their hidden `_state` parameter.
    state: dict[str, Any] = field(default_factory=dict)
    call_id: str = ""  # the model's id of the call being run (a replay finds its result by it)


@dataclass
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments; `_`-prefixed ones are hidden
    func: Callable[..., Any]
    boundary: ToolBoundary = field(default_factory=ToolBoundary)
    timeout_s: float = 20.0
    # Run in the caller's thread instead of a worker thread. For tools that use ctx.store:
    # database connections and transactions belong to one thread, so a tool writing tasks
    # from a worker thread would bypass (or deadlock against) the loop's turn transaction.
    inline: bool = False
    # Ask before it acts (feature T11, agents/loop/approvals.py): `ask_first` makes every
    # call wait for a person (a tool source marked ask-first sets it on all its tools);
    # `destructive` (it deletes or overwrites) makes it wait where a session asks before
    # writes.
    ask_first: bool = False
    destructive: bool = False

    def schema(self) -> dict[str, Any]:
        """The OpenAI function schema the model sees: hidden parameters removed."""
        props = {k: v for k, v in self.parameters.get("properties", {}).items()
                 if not k.startswith("_")}
        required = [k for k in self.parameters.get("required", []) if not k.startswith("_")]
        params = {"type": "object", "properties": props}
        if required:
            params["required"] = required
        return {"type": "function",
                "function": {"name": self.name, "description": self.description,
                             "parameters": params}}


@dataclass
class ToolOutcome:
    """What one tool call produced, as the loop puts it into the context."""

    content: str  # bounded text that goes into the tool message
    error: str | None = None  # clear error message when the call failed
    truncated: bool = False
    ref: str | None = None  # archive ref of the full raw result
    original_chars: int = 0
    kept_chars: int = 0
    conclusions: list[str] = field(default_factory=list)  # key findings → tier-2 anchors
    # Set by a tool that started work elsewhere (a sub-agent): the result arrives later,
    # so the loop ends the turn waiting instead of putting `content` into the context.
    pending: str | None = None


@dataclass
class Pending:
    """Returned by a tool whose result comes later: `waiting_for` names what it waits on."""

    waiting_for: str
    message: str


class ToolError(Exception):
    """Raised by a tool for a mistake the model can fix; the message is shown as is."""


@dataclass
class Table:
    """A tabular tool result: bounded as head rows + tail rows + statistics (feature C10)."""

    columns: list[str]
    rows: list[list[Any]]
    title: str = ""  # one line above the table, kept in context
    note: str = ""  # one line below the table, kept in context


@dataclass
class ToolReply:
    """A tool result plus key conclusions the anchor extractor may keep as tier-2 anchors."""

    value: Any
    conclusions: list[str] = field(default_factory=list)
