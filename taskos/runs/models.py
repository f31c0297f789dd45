"""The domain tables (SPEC W1): sessions, their tasks, anchors, archive and event log."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

import agents.config
from agents.secrets import KeyEnvRefused, check_key_env
from agents.memory_store import keywords

# Words longer than this are ids, hashes or base64 runs: nobody searches for them by
# keyword and they would only bloat the full-text index.
MAX_INDEXED_WORD = 64
# Only the start of a huge tool result is indexed; the whole of it stays in `content`.
MAX_INDEXED_CHARS = 200_000


def search_terms(content: str, tool_name: str = "", is_binary: bool = False) -> str:
    """The space-separated keywords the full-text index sees (CJK characters one by one)."""
    words = keywords(tool_name)
    if not is_binary:
        words |= keywords(content[:MAX_INDEXED_CHARS])
    return " ".join(sorted(w for w in words if len(w) <= MAX_INDEXED_WORD))


def validate_key_env(name: str) -> None:
    """Refuse a variable the operator has not allowed as an API key (agents.secrets)."""
    try:
        check_key_env(name)
    except KeyEnvRefused as exc:
        raise ValidationError(str(exc)) from None


def max_input_chars() -> int:
    """The longest goal or message a person may send (TASKOS_MAX_INPUT_CHARS)."""
    return int(getattr(settings, "TASKOS_MAX_INPUT_CHARS", 100_000))


def input_too_long(text: str, what: str) -> str | None:
    """Why `text` is refused as too long (the engine's wording), or None when it fits."""
    reason = agents.config.input_too_long(text, what, max_input_chars())
    return reason[:1].upper() + reason[1:] if reason else None


def validate_goal_length(text: str) -> None:
    reason = input_too_long(text, "goal")
    if reason:
        raise ValidationError(reason)


def validate_message_length(text: str) -> None:
    reason = input_too_long(text, "message")
    if reason:
        raise ValidationError(reason)


ASSUMED_WINDOW = 128_000  # an unknown model without a context size: said, never silent


class ModelProfile(models.Model):
    """Where a model lives, its window and prices; the API key itself is never stored."""

    name = models.CharField(max_length=80, unique=True)
    model = models.CharField(max_length=200, help_text="Model name sent to the API.")
    base_url = models.CharField(
        max_length=500, blank=True,
        help_text="OpenAI-compatible endpoint, e.g. https://api.openai.com/v1. "
                  "Leave blank for the built-in simulated model.")
    api_key_env = models.CharField(
        max_length=100, default="OPENAI_API_KEY", blank=True,
        validators=[validate_key_env],
        help_text="Name of the environment variable holding the API key (blank: no key, for "
                  "local servers). Allowed: names starting with TASKOS_KEY_ and those the "
                  "operator lists in TASKOS_ALLOWED_KEY_ENVS.")
    context_size = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="The model's window in tokens, as its server enforces it. Blank: the "
                  "known window of a well-known model; for any other model TaskOS assumes "
                  "128 000 and warns on every page that shows the profile (SPEC C18).")
    encoding = models.CharField(max_length=50, blank=True,
                                help_text="tiktoken encoding; blank: the model's own.")
    price_input = models.DecimalField(max_digits=12, decimal_places=4, default=0,
                                      help_text="Per 1M input tokens.")
    price_cached_input = models.DecimalField(max_digits=12, decimal_places=4, default=0,
                                             help_text="Per 1M cached input tokens.")
    price_output = models.DecimalField(max_digits=12, decimal_places=4, default=0,
                                       help_text="Per 1M output tokens.")
    summary_model = models.CharField(max_length=200, blank=True,
                                     help_text="Cheaper model for summaries; blank: the same.")
    num_ctx = models.PositiveIntegerField(null=True, blank=True,
                                          help_text="Window to request from local servers.")
    # Model faults (issue 9): the loop retries, never the SDK, so these bound a bad provider.
    connect_timeout = models.FloatField(
        default=10.0, validators=[MinValueValidator(0.1)],
        help_text="Seconds to open a connection to the endpoint.")
    read_timeout = models.FloatField(
        default=120.0, validators=[MinValueValidator(0.1)],
        help_text="Seconds to wait for the next byte; long prompts take long to prefill.")
    call_timeout = models.FloatField(
        default=300.0, validators=[MinValueValidator(0.1)],
        help_text="Seconds one whole call may take, however slowly the bytes arrive.")
    retry_budget = models.FloatField(
        default=300.0, validators=[MinValueValidator(0)],
        help_text="Seconds a session may spend on failed calls and backoff waits "
                  "(rate limits, timeouts, 5xx, malformed answers) before it fails.")

    # Sampling and counting per model (issue 11).
    temperature = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0), MaxValueValidator(2)],
        help_text="Sampling temperature; blank: the server's default. Small local models "
                  "call tools more reliably at 0–0.3.")
    top_p = models.FloatField(null=True, blank=True,
                              validators=[MinValueValidator(0.01), MaxValueValidator(1)],
                              help_text="Nucleus sampling; blank: the server's default.")
    server_tokenizer = models.BooleanField(
        default=False, help_text="Count with the server's /tokenize (llama.cpp, "
                                 "llama-cpp-python); otherwise calibrate from usage.")
    tool_results_as_user = models.BooleanField(
        default=False, help_text="Send tool results as user messages (llama-cpp-python's "
                                 "chatml-function-calling format drops tool messages' text).")
    tool_free_summaries = models.BooleanField(
        default=False, help_text="Send summary and probe requests as a fresh request without "
                                 "tools (a short instruction, the material as one user "
                                 "message). Small local models continue a request that "
                                 "repeats the agent's prefix with one more tool call; paid "
                                 "models bill that prefix as cached, so leave it off there.")
    single_system_message = models.BooleanField(
        default=False, help_text="Merge the system messages into one (a later one goes as a "
                                 "user message). For llama-cpp-python's chatml-function-"
                                 "calling template, which writes the tool schemas into every "
                                 "system message.")
    token_ratio = models.FloatField(
        default=1.0, editable=False,
        help_text="Provider's prompt tokens ÷ the engine's count, learnt from past calls.")
    token_ratio_calls = models.PositiveIntegerField(
        default=0, editable=False, help_text="Calls the learnt ratio is based on.")
    probe_questions = models.BooleanField(
        default=False, help_text="After each compaction, ask the model a few short questions "
                                 "(constraints, key figures, open tasks) against the new "
                                 "context and grade the answers against the archive. Costs "
                                 "one call per compaction: on for local models, off for paid "
                                 "ones unless you want the check.")
    token_overheads = models.JSONField(
        default=dict, blank=True, editable=False,
        help_text="Tokens the server adds per kind of request (tools offered, tool_choice), "
                  "learnt with the ratio: provider ≈ overhead + ratio × engine count.")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({'simulated' if self.simulated else self.model})"

    def learn_token_ratio(self, report: dict) -> None:
        """Keep the ratio a session learnt, so the next one starts calibrated."""
        calls = report.get("token_ratio_calls")
        ratio = report.get("token_ratio")
        if self.simulated or not isinstance(calls, int) or not isinstance(ratio, (int, float)):
            return
        # Compared in the database: a parallel session may have learnt from more calls.
        overheads = report.get("token_overheads")
        ModelProfile.objects.filter(pk=self.pk, token_ratio_calls__lt=calls).update(
            token_ratio=ratio, token_ratio_calls=calls,
            token_overheads=overheads if isinstance(overheads, dict) else {})

    @property
    def simulated(self) -> bool:
        return not self.base_url

    @property
    def effective_window(self) -> int:
        """The window sessions use: the one set, the known one, else the assumed 128k."""
        if self.context_size:
            return self.context_size
        return agents.config.KNOWN_CONTEXT_SIZES.get(self.model, ASSUMED_WINDOW)

    @property
    def window_warning(self) -> str:
        """Why the window is a guess (SPEC C18), or "" when it is not."""
        if self.context_size or self.simulated or self.model in agents.config.KNOWN_CONTEXT_SIZES:
            return ""
        return (f"Model {self.model!r} is unknown and profile {self.name!r} sets no context "
                f"size: TaskOS assumes {ASSUMED_WINDOW:,} tokens. Set the real window on the "
                "profile, or requests may go over it.")

    def to_engine(self, context_size: int | None = None) -> agents.config.ModelProfile:
        """The engine's view of this profile, optionally with a smaller window."""
        return agents.config.ModelProfile(
            name=self.name, model=self.model, base_url=self.base_url,
            api_key_env=self.api_key_env, context_size=context_size or self.effective_window,
            warnings=[self.window_warning] if self.window_warning else [],
            encoding=self.encoding, price_input=float(self.price_input),
            price_cached_input=float(self.price_cached_input),
            price_output=float(self.price_output), summary_model=self.summary_model,
            num_ctx=self.num_ctx, temperature=self.temperature, top_p=self.top_p,
            server_tokenizer=self.server_tokenizer, token_ratio=self.token_ratio,
            tool_results_as_user=self.tool_results_as_user,
            tool_free_summaries=self.tool_free_summaries,
            single_system_message=self.single_system_message,
            token_ratio_calls=self.token_ratio_calls, probe_questions=self.probe_questions,
            token_overheads=dict(self.token_overheads or {}), **self.fault_limits())

    def fault_limits(self) -> dict[str, float]:
        """The timeouts and retry budget, for the engine's profile."""
        return {"connect_timeout": self.connect_timeout, "read_timeout": self.read_timeout,
                "call_timeout": self.call_timeout, "retry_budget": self.retry_budget}


class Session(models.Model):
    """One agent task from start to final answer."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        WAITING = "waiting"  # for its sub-agents (SPEC T6); no worker holds it meanwhile
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
    # One executor per session (taskos/runs/lease.py): whoever holds an unexpired lease runs
    # the session; a second delivery of the same task finds it taken and exits.
    lease_owner = models.CharField(max_length=200, blank=True, editable=False)
    lease_expires = models.DateTimeField(null=True, blank=True, editable=False)
    # When a run_session message was last sent; the sweeper re-sends only after a grace.
    enqueued_at = models.DateTimeField(null=True, blank=True, editable=False)
    # A replay (SPEC E2) plays this session's recorded decisions under its own settings.
    replay_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE,
                                  related_name="replays")
    # A sub-agent (SPEC T6) is a child session started by its parent's delegate call at
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
    """One entry of the agent's task list (SPEC T2); editable in the admin mid-run."""

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
    """A fact that must survive compaction (SPEC C8)."""

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


class ArchivedTurn(models.Model):
    """One raw message or tool output, append-only and never truncated (SPEC C5).

    `search_text` feeds the full-text index created in migration 0003 (an FTS5 table kept
    in sync by triggers on SQLite, a generated tsvector column with a GIN index on
    PostgreSQL). A later migration that rebuilds this table on SQLite drops those triggers:
    re-create them there (see 0003) or search stops finding new rows.
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="archive")
    turn = models.PositiveIntegerField()
    role = models.CharField(max_length=20)
    content = models.TextField()
    tool_name = models.CharField(max_length=100, blank=True)
    tool_args = models.JSONField(default=dict, blank=True)
    token_count = models.PositiveIntegerField(default=0)
    is_binary = models.BooleanField(default=False, help_text="content is base64")
    search_text = models.TextField(blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["session", "turn"], name="runs_archive_session_turn"),
                   # newest-first walks within one session (search on dense words)
                   models.Index(fields=["session", "id"], name="runs_archive_session_id")]

    def __str__(self) -> str:
        return f"turn {self.turn} {self.role} {self.tool_name}".strip()

    @property
    def ref(self) -> str:
        return f"arc:{self.session_id}:{self.pk}"

    def save(self, *args, **kwargs) -> None:
        if not self.search_text:
            self.search_text = search_terms(self.content, self.tool_name, self.is_binary)
        super().save(*args, **kwargs)


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
    """A piece of a session's saved engine state, written once (taskos/runs/state_chunks.py).

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
