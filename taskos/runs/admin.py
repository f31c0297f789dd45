"""Admin (staff only): anchors and tasks are editable while a session runs (SPEC W4).

Every save made here is marked as an admin edit, so the engine and the drawer can tell
it from the agent's own changes.
"""
from __future__ import annotations

from django.contrib import admin

from .models import Anchor, ArchivedTurn, ModelProfile, PendingMessage, Session, SessionEvent, Task


def mark_anchor(anchor: Anchor) -> None:
    anchor.source = Anchor.Source.ADMIN


def mark_task(task: Task) -> None:
    task.metadata = {**(task.metadata or {}), "edited_by": "admin"}


class AnchorInline(admin.TabularInline):
    model = Anchor
    extra = 1
    fields = ("tier", "text", "key", "active", "source", "turn")
    readonly_fields = ("source", "turn")


class TaskInline(admin.TabularInline):
    model = Task
    extra = 1
    fields = ("task_id", "subject", "state", "owner", "blocked_by", "description")


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ("id", "short_goal", "status", "owner", "profile", "turns",
                    "total_input_tokens", "peak_input_tokens", "compactions", "created_at")
    list_filter = ("status", "profile")
    search_fields = ("goal", "scenario")
    readonly_fields = ("status", "turns", "total_input_tokens", "peak_input_tokens",
                       "compactions", "cost", "final_answer", "error", "celery_task_id",
                       "created_at", "started_at", "finished_at")
    fields = ("goal", "scenario", "owner", "profile", "window", "context_settings",
              "cancel_requested", "compact_request") + readonly_fields
    inlines = [AnchorInline, TaskInline]

    @admin.display(description="goal")
    def short_goal(self, obj: Session) -> str:
        return obj.goal[:80]

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
    list_display = ("id", "session", "tier", "short_text", "source", "active", "turn",
                    "updated_at")
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
    list_display = ("id", "session", "task_id", "subject", "state", "owner", "updated_at")
    list_filter = ("state",)
    search_fields = ("subject", "description")

    def save_model(self, request, obj, form, change):
        mark_task(obj)
        super().save_model(request, obj, form, change)


@admin.register(ModelProfile)
class ModelProfileAdmin(admin.ModelAdmin):
    list_display = ("name", "model", "base_url", "context_size", "price_input", "price_output",
                    "token_ratio", "token_ratio_calls")
    readonly_fields = ("token_ratio", "token_ratio_calls")


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
