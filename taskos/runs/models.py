"""The domain tables (feature W1): model profiles, sessions, their tasks, anchors, archive
and event log."""
from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

import agents
from agents import KeyEnvRefused, check_key_env, keywords


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


# --- model profiles (features W1, C18)

def validate_key_env(name: str) -> None:
    """Refuse a variable the operator has not allowed as an API key (agents.secrets)."""
    try:
        check_key_env(name)
    except KeyEnvRefused as exc:
        raise ValidationError(str(exc)) from None


ASSUMED_WINDOW = 128_000  # an unknown model without a context size: said, never silent


def refused_endpoints() -> list[str]:
    """host:port of TaskOS's own services, which a model URL may never name: the broker
    (and channel layer) and a database server."""
    out = []
    for url in {settings.REDIS_URL, getattr(settings, "CELERY_BROKER_URL", settings.REDIS_URL)}:
        parts = urlsplit(url or "")
        if parts.hostname:
            out.append(f"{parts.hostname}:{parts.port or 6379}")
    database = settings.DATABASES["default"]
    port = database.get("PORT") or (5432 if "postgresql" in database["ENGINE"] else None)
    if database.get("HOST") and port:
        out.append(f"{database['HOST']}:{port}")
    return sorted(out)


def column(spec: dataclasses.Field, how: agents.Setting) -> models.Field:
    """The column (and admin form field) of one of the engine's profile fields."""
    options: dict[str, Any] = {"help_text": how.help} if how.help else {}
    if how.optional:
        options.update(null=True, blank=True)
    elif not how.required:
        default = spec.default_factory if spec.default_factory is not dataclasses.MISSING \
            else spec.default
        options["default"] = default
    if how.learnt:
        options["editable"] = False
    validators = []
    if how.minimum is not None:
        validators.append(MinValueValidator(how.minimum))
    if how.maximum is not None:
        validators.append(MaxValueValidator(how.maximum))
    if how.check is not None:
        validators.append(validate_key_env)
    if validators:
        options["validators"] = validators
    kind = spec.type
    if kind == "str":
        options.update(max_length=how.max_chars, unique=how.unique)
        if not how.required:
            options["blank"] = True
        if options.get("default") == "":
            del options["default"]  # a blank text column needs none
        return models.CharField(**options)
    if how.money:
        return models.DecimalField(max_digits=12, decimal_places=4, **options)
    if kind == "bool":
        return models.BooleanField(**options)
    if kind.startswith("int"):
        return models.PositiveIntegerField(**options)
    if kind.startswith("float"):
        return models.FloatField(**options)
    if kind.startswith("dict"):
        return models.JSONField(blank=True, **options)
    raise TypeError(f"no column for profile field {spec.name}: {kind}")


class ModelProfile(models.Model):
    """Where a model lives, its window and prices; the API key itself is never stored.

    Its columns are the engine's profile fields (agents.ModelProfile, each with its
    Setting), added below the class: a field is defined once, in the engine."""

    class Meta:
        ordering = ["name"]

    # What the model check found (agents.check_model): written whole by `manage.py
    # checkmodel` and the admin's Check button, only once a check finished; never by a form.
    model_check = models.JSONField(
        default=dict, blank=True, editable=False,
        help_text="What the last model check found: window, tools, tool_choice, counting, speed.")
    model_checked_at = models.DateTimeField(null=True, blank=True, editable=False)

    def __str__(self) -> str:
        return f"{self.name} ({'simulated' if self.simulated else self.model})"

    def store_check(self, result: agents.CheckResult) -> None:
        """Keep a finished check with the profile: only its two columns are written, so an
        admin's edit of the profile meanwhile is not undone."""
        values = {"model_check": agents.storable_value(result.to_dict()),
                  "model_checked_at": timezone.now()}
        ModelProfile.objects.filter(pk=self.pk).update(**values)
        for name, value in values.items():
            setattr(self, name, value)

    @property
    def check_result(self) -> agents.CheckResult | None:
        """The stored check, or None when there is none (or it cannot be read back)."""
        if not self.model_check:
            return None
        try:
            return agents.CheckResult.from_dict(self.model_check)
        except (TypeError, ValueError, AttributeError):
            return None

    @property
    def tools_failed(self) -> agents.Capability | None:
        """The stored check's failed tools verdict: sessions on this profile run without
        tools while it stands."""
        result = self.check_result
        return result.get("tools") if result is not None and result.tools_failed else None

    def check_summary(self) -> str:
        """One line on the stored check: when, and each capability's verdict."""
        result = self.check_result
        if result is None:
            return "" if self.simulated else "not checked yet (manage.py checkmodel " \
                                             f"{self.name}, or Check in the admin)"
        when = self.model_checked_at.strftime("%Y-%m-%d %H:%M") if self.model_checked_at \
            else result.checked_at
        verdicts = ", ".join(f"{c.label} {c.verdict}" for c in result.capabilities)
        return f"checked {when}: {verdicts}"

    def tools_off_notice(self) -> str:
        """Why sessions on this profile run with tools off, or "" when they do not."""
        failed = self.tools_failed
        if failed is None:
            return ""
        return (f"Tools are off on profile {self.name!r}: its model check found that "
                f"{failed.found}. {failed.fix}")

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
        return agents.KNOWN_CONTEXT_SIZES.get(self.model, ASSUMED_WINDOW)

    @property
    def window_warning(self) -> str:
        """Why the window is a guess (feature C18), or "" when it is not."""
        if self.context_size or self.simulated or self.model in agents.KNOWN_CONTEXT_SIZES:
            return ""
        return (f"Model {self.model!r} is unknown and profile {self.name!r} sets no context "
                f"size: TaskOS assumes {ASSUMED_WINDOW:,} tokens. Set the real window on the "
                "profile, or requests may go over it.")

    def url_problem(self) -> str:
        """Why the worker may not ask this profile's base URL (issue 25 item 9), or "". A
        name that does not resolve here is not refused: it may resolve where the worker
        runs, and is checked again before every request."""
        try:
            agents.check_model_url(self.base_url, local=self.local,
                                   hosts=settings.TASKOS_MODEL_HOSTS,
                                   refused=refused_endpoints())
        except agents.UrlRefused as exc:
            return str(exc)
        except agents.HostUnresolved:
            pass
        return ""

    def clean(self) -> None:
        super().clean()
        problem = self.url_problem()
        if problem:
            raise ValidationError({"base_url": problem})

    def to_engine(self, context_size: int | None = None) -> agents.ModelProfile:
        """The engine's view of this profile, optionally with a smaller window; a row that
        cannot work (changed behind the admin's checks) raises ProfileInvalid saying why."""
        kept = {spec.name: float(value) if how.money else value
                for spec, how in agents.profile_settings()
                for value in [getattr(self, spec.name)]}
        kept.update(context_size=context_size or self.effective_window,
                    token_overheads=dict(self.token_overheads or {}))
        warning = self.window_warning
        try:
            problem = self.url_problem()
            if problem:
                raise agents.ConfigError(problem)
            return agents.ModelProfile(
                **kept, warnings=[warning] if warning else [],
                sim_latency_ms=settings.TASKOS_SIM_LATENCY_MS if self.simulated else 0.0,
                model_hosts=tuple(settings.TASKOS_MODEL_HOSTS),
                refused_endpoints=tuple(refused_endpoints()))
        except agents.ConfigError as exc:
            raise agents.ProfileInvalid(
                f"Model profile {self.name!r} cannot be used: {exc} Correct it in the admin "
                "(Runs → Model profiles).") from None


for _spec, _how in agents.profile_settings():
    ModelProfile.add_to_class(_spec.name, column(_spec, _how))


# --- sessions and what they hold

class Session(models.Model):
    """One agent task from start to final answer."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        WAITING = "waiting"  # for its sub-agents (feature T6); no worker holds it meanwhile
        FINISHED = "finished"
        FAILED = "failed"
        # the model's answers were refused as no answer; Session.error quotes the last one
        UNUSABLE_ANSWER = "unusable_answer"
        CANCELLED = "cancelled"
        # an ask-first tool call waits for a person (feature T11); no worker holds it
        WAITING_FOR_APPROVAL = "waiting_for_approval"

    ACTIVE_STATUSES = (Status.QUEUED, Status.RUNNING, Status.WAITING,
                       Status.WAITING_FOR_APPROVAL)
    # the engine's own list (agents.FINAL_STATUSES), as the choices spell them
    FINAL_STATUSES = (Status.FINISHED, Status.FAILED, Status.UNUSABLE_ANSWER, Status.CANCELLED)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                              on_delete=models.CASCADE, related_name="task_sessions")
    goal = models.TextField(validators=[validate_goal_length])
    scenario = models.CharField(max_length=500, blank=True)
    status = models.CharField(max_length=24, choices=Status.choices, default=Status.QUEUED,
                              db_index=True)
    profile = models.ForeignKey(ModelProfile, on_delete=models.PROTECT, related_name="sessions")
    window = models.PositiveIntegerField(help_text="Context size actually used, in tokens.")
    context_settings = models.JSONField(default=dict, blank=True)
    # Tool names whose calls wait for a person's approval (feature T11), besides the
    # TASKOS_ASK_FIRST settings' (taskos/runs/approvals.py).
    ask_first = models.JSONField(default=list, blank=True)
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

    @property
    def tools_off_notice(self) -> str:
        """What the session page says when this session runs without tools, and why."""
        if not (self.context_settings or {}).get("tools_off"):
            return ""
        return " ".join(filter(None, [agents.TOOLS_OFF_NOTICE,
                                      self.profile.tools_off_notice()]))

    def undelivered_messages(self) -> list[str]:
        """The follow-ups an ended session never read: accepted while it ran, then the run
        ended (a cancel taken at the next turn, a final answer, a failure) before its next
        turn took them. Shown on its page so none is kept out of sight."""
        if self.is_active:  # still waiting for the next turn, not lost
            return []
        return list(self.pending_messages.filter(taken=False).values_list("text", flat=True))

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


# Of the event types whose rows the drawer charts by the hundred, the payload keys that
# make them big: a MODEL_CALL's messages and request (~5 KB a call on long-1000), a
# compaction's summaries (~11 KB), a tool result's preview (most of its ~0.6 KB). A row
# of these types keeps the rest of its payload, its figures, in `SessionEvent.figures`
# too, so a page reading ~1 000 calls' figures never parses their payloads
# (taskos/store/stored_events.py `select`).
BULK_KEYS: dict[str, frozenset[str]] = {
    agents.EventType.MODEL_CALL: frozenset({"messages", "request", "reply", "message_parts",
                                            "message_meta"}),
    agents.EventType.COMPACTION: frozenset({"summary_before", "summary_after", "digests"}),
    agents.EventType.TOOL_RESULT: frozenset({"preview", "conclusions"}),
}


def event_figures(event_type: str, payload: dict[str, Any]) -> dict[str, Any] | None:
    """The payload of a row of `event_type` less its BULK_KEYS, as `SessionEvent.figures`
    keeps it; None for a type without bulk (read from its payload)."""
    bulk = BULK_KEYS.get(event_type)
    if bulk is None:
        return None
    return {key: value for key, value in payload.items() if key not in bulk}


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
    # `event_figures` of the payload, kept on every write (`save`, taskos/store/event_log.py);
    # NULL for the other types and for a row written before the column existed, whose
    # figures are read from its payload instead.
    figures = models.JSONField(null=True, blank=True, editable=False)

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

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.figures = event_figures(self.type, self.payload)
        super().save(*args, **kwargs)

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


# --- the archive (feature C5)

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


class ArchivedTurn(models.Model):
    """One raw message or tool output, append-only and never truncated (feature C5).

    `search_text` feeds the full-text index created in migration 0003 (an FTS5 table kept
    in sync by triggers on SQLite, a generated tsvector column with a GIN index on
    PostgreSQL). A later migration that rebuilds this table on SQLite drops those triggers:
    re-create them there (see 0003) or search stops finding new rows.
    """

    session = models.ForeignKey("runs.Session", on_delete=models.CASCADE,
                                related_name="archive")
    turn = models.PositiveIntegerField()
    role = models.CharField(max_length=20)
    content = models.TextField()
    tool_name = models.CharField(max_length=100, blank=True)
    tool_args = models.JSONField(default=dict, blank=True)
    token_count = models.PositiveIntegerField(default=0)
    is_binary = models.BooleanField(default=False, help_text="content is base64")
    search_text = models.TextField(blank=True, editable=False)
    # True while the row's words are not in the full-text index yet. The engine archives a
    # turn's rows without them (reading ~200 words out of a result and indexing them was a
    # third of a turn's database time); the session's next search indexes them first
    # (taskos/store/search.py), as the in-memory store does. NULL once indexed, as every
    # row saved through the ORM is.
    search_pending = models.BooleanField(null=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["session", "turn"], name="runs_archive_session_turn"),
                   # newest-first walks within one session (search on dense words)
                   models.Index(fields=["session", "id"], name="runs_archive_session_id"),
                   models.Index(fields=["session"], condition=models.Q(search_pending=True),
                                name="runs_archive_search_pending")]

    def __str__(self) -> str:
        return f"turn {self.turn} {self.role} {self.tool_name}".strip()

    @property
    def ref(self) -> str:
        return f"arc:{self.session_id}:{self.pk}"

    def save(self, *args, **kwargs) -> None:
        if not self.search_text:
            self.search_text = search_terms(self.content, self.tool_name, self.is_binary)
        self.search_pending = None
        super().save(*args, **kwargs)


# --- the person's files in a workspace (feature T9)

class WorkspaceFile(models.Model):
    """A file a person put into a session's workspace (uploaded, from the command line, or
    copied from another session's workspace). The file itself is in the workspace folder;
    the row says who brought it and when, and whether the agent has been told (a hint on
    its next turn, feature C12)."""

    class Origin(models.TextChoices):
        UPLOAD = "upload"
        COMMAND_LINE = "command_line"
        COPY = "copy"

    session = models.ForeignKey(Session, on_delete=models.CASCADE,
                                related_name="workspace_files")
    path = models.CharField(max_length=1024)  # relative to the workspace, "/"-separated
    size = models.PositiveBigIntegerField()
    origin = models.CharField(max_length=16, choices=Origin.choices, default=Origin.UPLOAD)
    added_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                 on_delete=models.SET_NULL, related_name="+")
    # The turns the session had run when the file came: the agent first sees it after that.
    after_turn = models.PositiveIntegerField(default=0)
    added_at = models.DateTimeField(auto_now_add=True)
    # The turn whose hint told the agent of it; None: not told yet. A turn that never
    # commits gives it back (taskos/store/django_store.py discard_uncommitted).
    announced_turn = models.PositiveIntegerField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["session"], condition=models.Q(announced_turn=None),
                                name="runs_wsfile_unannounced")]

    def __str__(self) -> str:
        return f"{self.path} ({self.size} bytes)"


class ToolApproval(models.Model):
    """An ask-first tool call (feature T11): what the model asked to run, what it would
    change, and a person's decision. The session waits (`waiting_for_approval`, no worker
    held) until every pending call of its turn is decided (taskos/runs/approvals.py)."""

    class Decision(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        DENIED = "denied"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="approvals")
    call_id = models.CharField(max_length=200)
    tool = models.CharField(max_length=200)
    arguments = models.TextField(blank=True)
    preview = models.TextField(blank=True)  # what it would change: a write's diff
    turn = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=10, choices=Decision.choices, default=Decision.PENDING,
                              db_index=True)
    reason = models.TextField(blank=True)  # a denial's, as the model reads it
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    # "timeout" when the sweeper denied it, else empty (decided_by names the person)
    decided_how = models.CharField(max_length=20, blank=True)
    requested_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["session", "call_id"],
                                               name="one_approval_per_call")]

    def __str__(self) -> str:
        return f"{self.tool} call {self.call_id} of session {self.session_id}: {self.status}"


# Tool sources (feature T10) live in their own module; imported here so Django registers them.
from taskos.runs.tool_sources import ToolSource, ToolSourceTool  # noqa: E402,F401
