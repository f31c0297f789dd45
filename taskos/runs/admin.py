"""Admin (staff only): anchors and tasks are editable while a session runs (feature W4).

Every save made here is marked as an admin edit, so the engine and the drawer can tell
it from the agent's own changes.
"""
from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from agents import CheckFailed, ConfigError, check_model, list_scenarios

from .models import (Anchor, ArchivedTurn, ModelProfile, PendingMessage, Session, SessionEvent,
                     Task, ToolApproval, WorkspaceFile)
from .services import SessionError, checked_config, checked_scenario, checked_window


def mark_anchor(anchor: Anchor) -> None:
    """Mark an admin edit. An edited text keeps its previous version as an inactive row:
    a replaced constraint stays in the database (issue 13), and the engine's ANCHOR event
    names the old text and the new one."""
    if anchor.pk is not None:
        before = Anchor.objects.filter(pk=anchor.pk).first()
        if before is not None and before.text != anchor.text:
            Anchor.objects.create(session_id=before.session_id, tier=before.tier,
                                  text=before.text, key=before.key, source=before.source,
                                  active=False, turn=before.turn)
    anchor.source = Anchor.Source.ADMIN


def mark_task(task: Task) -> None:
    task.metadata = {**(task.metadata or {}), "edited_by": "admin"}


class TaskIdsField(forms.CharField):
    """A list of task ids as "2, 3" (a JSON list such as ["2"] is read as well)."""

    def prepare_value(self, value):
        if isinstance(value, str) and value.startswith("["):
            value = json.loads(value)
        return ", ".join(str(v) for v in value) if isinstance(value, list) else value

    def to_python(self, value):
        text = (value or "").strip()
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except ValueError as exc:
                raise forms.ValidationError(f"Not a list of task ids: {exc}") from exc
            return [str(v) for v in parsed]
        return [part.strip() for part in text.split(",") if part.strip()]


class ReadableJSONField(forms.JSONField):
    """JSON shown indented over several lines instead of on one line."""

    def prepare_value(self, value):
        if isinstance(value, str):
            return value
        return json.dumps(value, ensure_ascii=False, indent=2)


class TaskForm(forms.ModelForm):
    """Task ids as "2, 3" and metadata indented, on whichever of them the admin shows."""

    class Meta:
        model = Task
        fields = "__all__"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, help_text in (("blocks", "task ids this task blocks, e.g. 2, 3"),
                                ("blocked_by", "task ids that must finish first, e.g. 1")):
            if name in self.fields:
                self.fields[name] = TaskIdsField(
                    required=False, help_text=help_text,
                    show_hidden_initial=self.fields[name].show_hidden_initial)
        if "metadata" in self.fields:
            self.fields["metadata"] = ReadableJSONField(
                required=False, widget=forms.Textarea(attrs={"rows": 4}),
                show_hidden_initial=self.fields["metadata"].show_hidden_initial)

    def clean_metadata(self):
        return self.cleaned_data.get("metadata") or {}


# Rows an inline shows at most. A long session holds hundreds of anchors and tasks, and a
# page with every one of them posts more fields than DATA_UPLOAD_MAX_NUMBER_FIELDS (1000):
# its Save was a 400 and the edit was lost. Raising the limit would keep a page of
# hundreds of text areas nobody can scan; the rest are one click away in their own list.
INLINE_ROWS = 50


class BoundedInlineFormSet(forms.BaseInlineFormSet):
    """The first INLINE_ROWS rows of `shown` (the active anchors); posted, exactly the rows
    the page showed, whatever the running session added or changed since."""

    shown: dict[str, object] = {}

    def get_queryset(self):
        if not hasattr(self, "_queryset"):
            rows = super().get_queryset()
            if self.is_bound:
                posted = [self.data.get(f"{self.prefix}-{i}-{self.model._meta.pk.name}")
                          for i in range(self.initial_form_count())]
                ids = [int(pk) for pk in posted if pk and str(pk).isascii() and str(pk).isdigit()]
            else:
                ids = list(rows.filter(**self.shown).values_list("pk", flat=True)[:INLINE_ROWS])
            self._queryset = rows.filter(pk__in=ids)
        return self._queryset


class BoundedInline(admin.TabularInline):
    extra = 1
    shown: dict[str, object] = {}

    def get_formset(self, request, obj=None, **kwargs):
        formset = super().get_formset(request, obj, **kwargs)
        return type(formset.__name__, (formset,), {"shown": self.shown})


class AnchorInline(BoundedInline):
    model = Anchor
    formset = BoundedInlineFormSet
    # Only the active ones: each edit of a text leaves the old version as an inactive row.
    shown = {"active": True}
    fields = ("tier", "text", "key", "active", "source", "turn")
    readonly_fields = ("source", "turn")


class TaskInline(BoundedInline):
    model = Task
    form = TaskForm
    formset = BoundedInlineFormSet
    fields = ("task_id", "subject", "state", "owner", "blocked_by", "description")


def rows_note(obj, related: str, noun: str, changelist: str, shown: dict[str, object]) -> str:
    """What the inline below shows of the session's rows, and a link to all of them."""
    if obj is None or obj.pk is None:
        return "—"
    rows = getattr(obj, related)
    total, listed = rows.count(), rows.filter(**shown).count()
    url = f"{reverse(changelist)}?session__id__exact={obj.pk}"
    if listed <= INLINE_ROWS and listed == total:
        return format_html('{} {}{} below (<a href="{}">in the {} list</a>).', total, noun,
                           "" if total == 1 else "s", url, noun)
    which = " active" if shown else ""
    return format_html('{} {}s, {}{} of them; below, the first {}{} (<a href="{}">all {} in '
                       'the {} list</a>, where the others are edited).', total, noun, listed,
                       which, min(listed, INLINE_ROWS), which, url, total, noun)


class SessionForm(forms.ModelForm):
    """The session's settings checked as the start form and create_session check them
    (issue 25 item 8): an admin save once stored {"trigger_ratio": 5}, a window of 0 or a
    server path as scenario, and the run ended as an internal error."""

    scenario = forms.ChoiceField(required=False, help_text="A bundled scenario (the simulated "
                                 "model plays it).")
    context_settings = ReadableJSONField(
        required=False, widget=forms.Textarea(attrs={"rows": 6}),
        help_text='Context settings, e.g. {"trigger_ratio": 0.7, "max_rounds": 5}; each is '
                  "checked against its range (docs/configuration.md).")

    class Meta:
        model = Session
        fields = "__all__"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        current = self.instance.scenario if self.instance.pk else ""
        names = list_scenarios()
        # A sub-agent's "NAME#SUB", or a file runtask was given, stays as it is when unchanged.
        extra = [current] if current and current not in names else []
        self.fields["scenario"].choices = [("", "— none: use the goal —")] + [
            (name, name) for name in names + extra]

    def clean_scenario(self):
        name = (self.cleaned_data.get("scenario") or "").strip()
        if self.instance.pk and name == self.instance.scenario:
            return name
        try:
            return checked_scenario(name)
        except SessionError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_context_settings(self):
        settings = self.cleaned_data.get("context_settings")
        settings = {} if settings is None else settings
        try:
            checked_config(settings, strict=True)
        except SessionError as exc:
            raise forms.ValidationError(str(exc)) from None
        return settings

    def clean(self):
        data = super().clean()
        window, profile = data.get("window"), data.get("profile")
        if window is not None and profile is not None and "window" not in self.errors:
            try:
                checked_window(window, profile)
            except SessionError as exc:
                self.add_error("window", str(exc))
        return data


# Input widths that keep the session page and the anchor list within a desktop window.
ADMIN_MEDIA = forms.Media(css={"all": ("css/admin.css",)})


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    form = SessionForm
    media = property(lambda self: super(SessionAdmin, self).media + ADMIN_MEDIA)
    list_display = ("id", "short_goal", "status", "owner", "profile", "turns",
                    "total_input_tokens", "peak_input_tokens", "compactions", "created_at")
    list_filter = ("status", "profile")
    search_fields = ("goal", "scenario")
    readonly_fields = ("status", "turns", "total_input_tokens", "peak_input_tokens",
                       "compactions", "cost", "final_answer", "error", "celery_task_id",
                       "parent", "created_at", "started_at", "finished_at")
    readonly_fields += ("anchors_shown", "tasks_shown")
    fields = ("goal", "scenario", "owner", "profile", "window", "context_settings",
              "ask_first", "cancel_requested", "compact_request") + readonly_fields
    inlines = [AnchorInline, TaskInline]

    @admin.display(description="goal")
    def short_goal(self, obj: Session) -> str:
        return obj.goal[:80]

    @admin.display(description="anchors")
    def anchors_shown(self, obj: Session) -> str:
        return rows_note(obj, "anchors", "anchor", "admin:runs_anchor_changelist",
                         AnchorInline.shown)

    @admin.display(description="tasks")
    def tasks_shown(self, obj: Session) -> str:
        return rows_note(obj, "tasks", "task", "admin:runs_task_changelist", TaskInline.shown)

    def save_formset(self, request, form, formset, change):
        for instance in formset.save(commit=False):
            if isinstance(instance, Anchor):
                mark_anchor(instance)
            elif isinstance(instance, Task):
                mark_task(instance)
            instance.save()
        for obj in formset.deleted_objects:
            obj.delete()
        formset.save_m2m()


@admin.register(Anchor)
class AnchorAdmin(admin.ModelAdmin):
    media = property(lambda self: super(AnchorAdmin, self).media + ADMIN_MEDIA)
    # The session as "#12", linked: its goal in this column left Text one word per line.
    list_display = ("id", "session_link", "tier", "short_text", "source", "active", "turn",
                    "updated_at")
    list_select_related = ("session",)

    @admin.display(description="session", ordering="session")
    def session_link(self, obj: Anchor) -> str:
        return format_html('<a href="{}" title="{}">#{}</a>',
                           reverse("admin:runs_session_change", args=[obj.session_id]),
                           obj.session.goal[:200], obj.session_id)
    list_filter = ("tier", "source", "active")
    search_fields = ("text", "key")
    readonly_fields = ("source", "created_at", "updated_at")

    @admin.display(description="text")
    def short_text(self, obj: Anchor) -> str:
        return obj.text[:100]

    def save_model(self, request, obj, form, change):
        mark_anchor(obj)
        super().save_model(request, obj, form, change)


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    form = TaskForm
    list_display = ("id", "session", "task_id", "subject", "state", "owner", "updated_at")
    list_filter = ("state",)
    search_fields = ("subject", "description")

    def save_model(self, request, obj, form, change):
        mark_task(obj)
        super().save_model(request, obj, form, change)


@admin.register(ModelProfile)
class ModelProfileAdmin(admin.ModelAdmin):
    change_form_template = "admin/runs/modelprofile/change_form.html"
    list_display = ("name", "model", "base_url", "window_shown", "price_input", "price_output",
                    "probe_questions", "token_ratio", "token_ratio_calls", "token_overheads",
                    "check_verdicts")
    readonly_fields = ("token_ratio", "token_ratio_calls", "token_overheads", "check_shown")
    actions = ["check_servers"]

    @admin.display(description="model check")
    def check_verdicts(self, obj):
        result = obj.check_result
        if result is None:
            return "—"
        failed = [c.label for c in result.capabilities if c.verdict == "fail"]
        return f"failed: {', '.join(failed)}" if failed else "passed"

    @admin.display(description="model check")
    def check_shown(self, obj):
        """The stored check, a row per capability with its verdict and fix."""
        result = obj.check_result if obj is not None else None
        if result is None:
            return obj.check_summary() if obj is not None else ""
        rows = format_html_join(
            "", '<tr class="check-{}"><th>{}</th><td>{}</td><td>{}</td><td>{}</td></tr>',
            ((c.verdict, c.label, c.verdict, c.found, c.fix) for c in result.capabilities))
        return format_html('<p>{} · server: {}</p><table class="model-check">{}</table>',
                           obj.check_summary().split(":")[0], result.server, rows)

    def get_urls(self):
        check = path("<path:object_id>/check/", self.admin_site.admin_view(self.check_view),
                     name="runs_modelprofile_check")
        return [check] + super().get_urls()

    def check_view(self, request, object_id):
        """The Check button: run the model check now and keep what it found."""
        obj = self.get_object(request, object_id)
        if obj is None:
            raise Http404(f"No model profile {object_id}.")
        if request.method != "POST" or not self.has_change_permission(request, obj):
            raise PermissionDenied
        run_check(request, obj)
        return redirect("admin:runs_modelprofile_change", obj.pk)

    @admin.action(description="Check the selected profiles' model servers")
    def check_servers(self, request, queryset):
        for obj in queryset:
            run_check(request, obj)

    @admin.display(description="window")
    def window_shown(self, obj):
        # feature C18: an assumed window is said wherever the profile is listed.
        return f"{obj.effective_window:,}" + (" (assumed: set the real one)"
                                               if obj.window_warning else "")

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if obj.window_warning:
            messages.warning(request, obj.window_warning)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, object_id)
        if request.method == "GET" and obj is not None and obj.window_warning:
            messages.warning(request, obj.window_warning)
        return super().change_view(request, object_id, form_url, extra_context)


def run_check(request, obj: ModelProfile) -> None:
    """Check one profile's server; store a finished check and say what it found, or say
    why it could not be done (nothing is stored then)."""
    if obj.simulated:
        messages.info(request, f"Profile {obj.name!r} is the built-in simulated model: "
                               "nothing to check.")
        return
    try:
        result = check_model(obj.to_engine())
    except (CheckFailed, ConfigError) as exc:
        messages.error(request, f"Profile {obj.name!r} was not checked: {exc} Nothing was "
                                "stored.")
        return
    obj.store_check(result)
    failed = [c for c in result.capabilities if c.verdict == "fail"]
    if not failed:
        messages.success(request, f"Profile {obj.name!r}: {obj.check_summary()}.")
    for capability in failed:
        messages.error(request, f"Profile {obj.name!r}: {capability.label} failed: "
                                f"{capability.found}. {capability.fix}")


class ReadOnlyAdmin(admin.ModelAdmin):
    """The archive and the event log are records of what happened: viewable, not editable."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(ArchivedTurn)
class ArchivedTurnAdmin(ReadOnlyAdmin):
    list_display = ("id", "session", "turn", "role", "tool_name", "token_count", "is_binary")
    list_filter = ("role",)
    exclude = ("search_text",)


@admin.register(SessionEvent)
class SessionEventAdmin(ReadOnlyAdmin):
    list_display = ("session", "seq", "type", "turn", "at")
    list_filter = ("type",)


@admin.register(PendingMessage)
class PendingMessageAdmin(ReadOnlyAdmin):
    list_display = ("session", "short_text", "taken", "created_at")

    @admin.display(description="text")
    def short_text(self, obj: PendingMessage) -> str:
        return obj.text[:100]


@admin.register(WorkspaceFile)
class WorkspaceFileAdmin(ReadOnlyAdmin):
    """The person's files (T9): who brought which into which workspace, and when the agent
    was told; the files themselves are on the session page."""

    list_display = ("session", "path", "size", "origin", "added_by", "after_turn",
                    "announced_turn", "added_at")
    list_filter = ("origin",)
    search_fields = ("path",)


@admin.register(ToolApproval)
class ToolApprovalAdmin(admin.ModelAdmin):
    """Ask-first calls (T11) and their decisions: a record, decided in the drawer."""

    list_display = ("id", "session", "tool", "turn", "status", "decided_by", "decided_how",
                    "requested_at", "decided_at")
    list_filter = ("status", "tool")
    readonly_fields = [field.name for field in ToolApproval._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


from .admin_tool_sources import ToolSourceAdmin  # noqa: E402,F401 - tool sources (T10)
