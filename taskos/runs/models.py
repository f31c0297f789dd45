"""The domain tables (feature W1): sessions, their tasks, anchors, archive and event log."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

import agents

# Migrations and callers name these as taskos.runs.models.*; the profile and the archive
# table live in modules of their own only to keep each file readable.
from .archive_table import MAX_INDEXED_CHARS, MAX_INDEXED_WORD, ArchivedTurn, search_terms  # noqa: F401
from .model_profile import ASSUMED_WINDOW, ModelProfile, validate_key_env  # noqa: F401


def max_input_chars() -> int:
    """The longest goal or message a person may send (TASKOS_MAX_INPUT_CHARS)."""
    return int(getattr(settings, "TASKOS_MAX_INPUT_CHARS", 100_000))


def input_too_long(text: str, what: str) -> str | None:
    """Why `text` is refused as too long (the engine's wording), or None when it fits."""
    reason = agents.input_too_long(text, what, max_input_chars())
    return reason[:1].upper() + reason[1:] if reason else None


def validate_goal_length(text: str) -> None:
    reason = input_too_long(text, "goal")
    if reason:
        raise ValidationError(reason)


def validate_message_length(text: str) -> None:
    reason = input_too_long(text, "message")
    if reason:
        raise ValidationError(reason)


class Session(models.Model):
    """One agent task from start to final answer."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        WAITING = "waiting"  # for its sub-agents (feature T6); no worker holds it meanwhile
        FINISHED = "finished"
        FAILED = "failed"
        CANCELLED = "cancelled"

    ACTIVE_STATUSES = (Status.QUEUED, Status.RUNNING, Status.WAITING)
    FINAL_STATUSES = (Status.FINISHED, Status.FAILED, Status.CANCELLED)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                              on_delete=models.CASCADE, related_name="task_sessions")
    goal = models.TextField(validators=[validate_goal_length])
    scenario = models.CharField(max_length=500, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED,
                              db_index=True)
    profile = models.ForeignKey(ModelProfile, on_delete=models.PROTECT, related_name="sessions")
    window = models.PositiveIntegerField(help_text="Context size actually used, in tokens.")
    context_settings = models.JSONField(default=dict, blank=True)
    final_answer = models.TextField(blank=True)
    error = models.TextField(blank=True)
    turns = models.PositiveIntegerField(default=0)
    total_input_tokens = models.PositiveBigIntegerField(default=0)
    peak_input_tokens = models.PositiveIntegerField(default=0)
    compactions = models.PositiveIntegerField(default=0)
    cost = models.FloatField(default=0)
    notes = models.JSONField(default=dict, blank=True)
    engine_state = models.JSONField(null=True, blank=True, editable=False)
    cancel_requested = models.BooleanField(default=False)
    # None: no request pending; "": compact without instructions; text: focus instructions.
    compact_request = models.TextField(null=True, blank=True)
    # Edits of this session's anchors and tasks by anyone but the engine (taskos/runs/
    # edits.py): the engine re-reads them only when this moved since it last looked.
    person_edits = models.PositiveIntegerField(default=0, editable=False)
    celery_task_id = models.CharField(max_length=255, blank=True)
    # One executor per session (taskos/worker/lease.py): whoever holds an unexpired lease runs
    # the session; a second delivery of the same task finds it taken and exits.
    lease_owner = models.CharField(max_length=200, blank=True, editable=False)
    lease_expires = models.DateTimeField(null=True, blank=True, editable=False)
    # When a run_session message was last sent; the sweeper re-sends only after a grace.
    enqueued_at = models.DateTimeField(null=True, blank=True, editable=False)
    # A replay (feature E2) plays this session's recorded decisions under its own settings.
    replay_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE,
                                  related_name="replays")
    # A sub-agent (feature T6) is a child session started by its parent's delegate call at
    # `parent_turn`; the parent waits, then receives its final answer.
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE,
                               related_name="children")
    parent_turn = models.PositiveIntegerField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"#{self.pk} {self.goal[:60]}"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE_STATUSES

    @property
    def workspace(self) -> Path:
        """The session's sandbox folder; the creation time keeps it apart from a session
        with the same number in another (or a recreated) database."""
        stamp = self.created_at.astimezone(dt.timezone.utc).strftime("%Y%m%dT%H%M%S%f")
        return Path(settings.TASKOS_WORKSPACES) / f"{self.pk}-{stamp}"

    def cost_with_children(self) -> float:
        """This session's cost plus every sub-agent's below it (depth is small, so a query
        per level is fine)."""
        return self.cost + sum(child.cost_with_children() for child in self.children.all())

    @property
    def tasks_total(self) -> int:
        return len(self.tasks.all())  # .all() so a prefetch_related("tasks") is reused

    @property
    def tasks_done(self) -> int:
        return sum(1 for t in self.tasks.all() if t.state == Task.State.COMPLETED)


class Task(models.Model):
    """One entry of the agent's task list (feature T2); editable in the admin mid-run."""

    class State(models.TextChoices):
        PENDING = "pending"
        IN_PROGRESS = "in_progress"
        COMPLETED = "completed"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="tasks")
    task_id = models.CharField(max_length=20)
    subject = models.CharField(max_length=500)
    description = models.TextField(blank=True)
    state = models.CharField(max_length=12, choices=State.choices, default=State.PENDING)
    owner = models.CharField(max_length=100, blank=True)
    blocks = models.JSONField(default=list, blank=True)
    blocked_by = models.JSONField(default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # Not auto_now_add: the engine's own creation time is kept when it saves the list.
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["session", "id"]
        constraints = [models.UniqueConstraint(fields=["session", "task_id"],
                                               name="runs_task_unique_id_per_session")]

    def __str__(self) -> str:
        return f"{self.task_id}. {self.subject}"


class Anchor(models.Model):
    """A fact that must survive compaction (feature C8)."""

    class Tier(models.IntegerChoices):
        HARD_CONSTRAINT = 1, "Tier 1: hard constraint"
        CONCLUSION = 2, "Tier 2: intermediate conclusion"
        DETAIL = 3, "Tier 3: temporary detail"

    class Source(models.TextChoices):
        USER = "user"
        TOOL = "tool"
        ADMIN = "admin"
        PIN = "pin"  # a sentence of the transcript a person pinned from the drawer

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="anchors")
    tier = models.PositiveSmallIntegerField(choices=Tier.choices, default=Tier.CONCLUSION)
    text = models.TextField()
    key = models.CharField(max_length=200, blank=True,
                           help_text="Conflict key: a newer anchor with the same key replaces it.")
    source = models.CharField(max_length=5, choices=Source.choices, default=Source.USER)
    active = models.BooleanField(default=True)
    turn = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["session", "tier", "id"]

    def __str__(self) -> str:
        return f"T{self.tier}: {self.text[:80]}"


class LiveEventManager(models.Manager):
    """Events of committed turns, and of the turn in flight; never discarded ones."""

    def get_queryset(self):
        return super().get_queryset().filter(discarded=False)


class SessionEvent(models.Model):
    """An engine event as stored before it is streamed; the drawer's source of truth.

    Events of a turn that a killed worker never committed are kept (they record calls that
    were paid for) but marked `discarded` when the turn is run again, so nothing counts or
    shows them twice. `objects` hides them; `all_objects` sees every row.
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=40)
    payload = models.JSONField(default=dict)
    turn = models.PositiveIntegerField(default=0)
    at = models.DateTimeField()
    discarded = models.BooleanField(default=False)

    objects = LiveEventManager()
    all_objects = models.Manager()

    class Meta:
        base_manager_name = "all_objects"
        ordering = ["seq"]
        constraints = [models.UniqueConstraint(fields=["session", "seq"],
                                               name="runs_event_unique_seq_per_session")]
        indexes = [models.Index(fields=["session", "type", "seq"], name="runs_event_type")]

    def __str__(self) -> str:
        return f"#{self.seq} {self.type}"

    def to_dict(self) -> dict:
        """The same shape as agents.events.Event.to_dict()."""
        return {"type": self.type, "payload": self.payload, "turn": self.turn,
                "session_id": str(self.session_id), "seq": self.seq,
                "at": self.at.isoformat()}


class PendingMessage(models.Model):
    """A follow-up message from the dashboard, waiting for the agent's next turn."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE,
                                related_name="pending_messages")
    text = models.TextField(validators=[validate_message_length])
    created_at = models.DateTimeField(auto_now_add=True)
    taken = models.BooleanField(default=False)
    # The turn that took it: a turn that never commits gives its messages back.
    taken_turn = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.text[:80]


class EngineStateChunk(models.Model):
    """A piece of a session's saved engine state, written once (taskos/store/state_chunks.py).

    `Session.engine_state` holds the small part that changes every turn and names its
    pieces by key; a key is the hash of its text, so a piece that did not change since the
    last save (a message of the recent history, the summary, the audit's figures) is never
    written again. The text is kept as sent, key order included.
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="state_chunks")
    key = models.CharField(max_length=64)
    value = models.TextField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "key"],
                                               name="unique_state_chunk_per_session")]
