"""The Store protocol: everything the engine persists goes through it.

The Django app implements it over the ORM (taskos/store/django_store.py); `agents.store.memory`
implements it in memory for engine tests, runtask and the benchmark.
Refs returned by `archive` look like "arc:<session_id>:<archive id>" and are what the
model, the drawer and the recall tool use to read a raw message back.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from agents.statuses import FINAL_STATUSES


@dataclass
class AnchorRecord:
    """A fact that must stay in context: tier 1 hard constraint, 2 conclusion, 3 detail."""

    tier: int
    text: str
    key: str = ""  # conflict key: a later anchor with the same key replaces this one
    source: str = "user"  # user | tool | admin
    active: bool = True
    turn: int = 0
    id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TaskRecord:
    """One entry of the agent's task list (feature T2)."""

    id: str
    subject: str
    description: str = ""
    state: str = "pending"  # pending | in_progress | completed
    owner: str = ""
    blocks: list[str] = field(default_factory=list)
    blocked_by: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ArchiveHit:
    ref: str
    turn: int
    role: str
    excerpt: str
    tool_name: str = ""


@dataclass
class ApprovalRecord:
    """An ask-first tool call (feature T11) and what a person decided about it."""

    call_id: str
    tool: str
    arguments: str  # the call's arguments as the model wrote them (JSON text)
    preview: str = ""  # what it would change (a write's diff), when the engine can tell
    turn: int = 0
    status: str = "pending"  # pending | approved | denied
    reason: str = ""  # a denial's reason, as the model reads it
    decided_by: str = ""  # who decided (a person's name, or "timeout")

    @property
    def decided(self) -> bool:
        return self.status != "pending"


@dataclass
class ChildRecord:
    """A sub-agent session as its parent sees it (feature T6)."""

    id: str
    goal: str
    status: str  # queued | running | waiting, or one of agents.statuses.FINAL_STATUSES
    final_answer: str = ""
    error: str = ""
    answer_ref: str = ""  # archive ref of the child's final answer, in the child's archive
    turns: int = 0
    total_input_tokens: int = 0
    peak_input_tokens: int = 0
    cost: float = 0.0  # the child's own cost plus its children's

    @property
    def done(self) -> bool:
        return self.status in FINAL_STATUSES


class Store(Protocol):
    # --- archive (features C5, C11, T4): append-only, never truncated
    def archive(
        self,
        session_id: str,
        turn: int,
        role: str,
        content: str,
        *,
        tool_name: str = "",
        tool_args: dict[str, Any] | None = None,
        tokens: int = 0,
        raw_bytes: bytes | None = None,
    ) -> str:
        """Append one raw message (or raw tool output) and return its ref."""

    def read_ref(self, session_id: str, ref: str) -> str | None:
        """Return the full raw text behind a ref (base64 for binary), or None if unknown.
        A session may read refs of its own archive and of its sub-agents' archives."""

    def search_archive(self, session_id: str, query: str, limit: int = 5) -> list[ArchiveHit]:
        """Keyword search over this session's archive, best first."""

    # --- anchors (feature C8)
    def load_anchors(self, session_id: str) -> list[AnchorRecord]:
        """The session's active anchors as they are now (admin edits included), oldest first.

        Only active ones: the working set stays small however long the session runs."""

    def save_anchor(self, session_id: str, anchor: AnchorRecord) -> AnchorRecord:
        """Insert (id None) or update an anchor; return it with its id."""

    # --- tasks and notes (features T2, T3)
    def load_tasks(self, session_id: str) -> list[TaskRecord]:
        """The task list as it is now, admin edits included."""

    def save_tasks(self, session_id: str, tasks: list[TaskRecord]) -> None:
        """Replace the task list (tasks missing from `tasks` are deleted)."""

    def load_notes(self, session_id: str) -> dict[str, Any]:
        """The structured notepad (feature T3), {} when empty."""

    def save_notes(self, session_id: str, notes: dict[str, Any]) -> None:
        """Replace the notepad."""

    # --- loop state, for resume (features T1, T8)
    def load_state(self, session_id: str) -> dict[str, Any] | None:
        """The engine state saved at the end of the last committed turn, if any."""

    def save_state(self, session_id: str, state: dict[str, Any]) -> None:
        """Persist the engine state at the end of a turn."""

    # --- requests from people while the task runs (features W2, C13)
    def take_user_messages(self, session_id: str, turn: int = 0) -> list[str]:
        """Follow-up messages sent from the dashboard since the last call, oldest first;
        `turn` is the turn taking them, so an uncommitted turn can give them back."""

    def take_new_files(self, session_id: str, turn: int = 0) -> list[tuple[str, int]]:
        """Files a person added to the workspace that the agent has not been told of, as
        (path, bytes); taken at `turn`, so a turn that never commits gives them back
        (feature T9: they are announced by a hint, feature C12)."""

    def discard_uncommitted(self, session_id: str, from_turn: int) -> dict[str, int]:
        """Remove the archive rows of turns >= from_turn and give back the messages they
        took: a worker died before committing them and the turn is about to run again.
        Returns {"archive_rows": n, "messages": m}."""

    def take_compaction_request(self, session_id: str) -> str | None:
        """Instructions of a pending "compact now" request ("" when none given), else None."""

    def cancel_requested(self, session_id: str) -> bool:
        """True when a person asked to cancel the session."""

    # --- sub-agents (feature T6)
    def create_child(self, parent_id: str, request: dict[str, Any]) -> str:
        """Record a queued child session and return its id. `request` holds "goal",
        "scenario", "window", "max_turns", "profile" ("" = the parent's), "anchors" (tier-1
        texts to inherit) and "turn" (the parent's turn that asked; an uncommitted turn's
        children are discarded with it). Nothing runs until the parent is waiting."""

    def list_children(self, parent_id: str) -> list[ChildRecord]:
        """The session's children, oldest first, with their status and results."""

    def delegation_depth(self, session_id: str) -> int:
        """0 for a session started by a person, 1 for its child, and so on."""

    # --- ask before a tool acts (feature T11)
    def request_approval(self, session_id: str, request: ApprovalRecord) -> None:
        """Record a pending ask-first call (once per call id); a person decides it later,
        through whatever serves the drawer, and the session's run reads the decision."""

    def approvals(self, session_id: str, call_ids: list[str]) -> dict[str, ApprovalRecord]:
        """The recorded approvals of these calls, by call id, as decided so far."""
