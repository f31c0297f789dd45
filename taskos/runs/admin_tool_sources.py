"""Admin of tool sources (feature T10): only staff create, change or delete them; each
tool's C10 limits and ask-first mark (T11) can be set over the source's defaults."""
from __future__ import annotations

from django.contrib import admin

from .tool_sources import ToolSource, ToolSourceTool


class StaffOnly:
    """Staff with the model's permission: a person given the permission but not staff (or
    a staff member without it) cannot add, change or delete a source."""

    def has_add_permission(self, request, *args) -> bool:
        return request.user.is_staff and super().has_add_permission(request, *args)

    def has_change_permission(self, request, obj=None) -> bool:
        return request.user.is_staff and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        return request.user.is_staff and super().has_delete_permission(request, obj)


class ToolSourceToolInline(StaffOnly, admin.TabularInline):
    model = ToolSourceTool
    extra = 1
    verbose_name = "tool setting"
    verbose_name_plural = "per-tool settings (empty: the source's defaults)"


@admin.register(ToolSource)
class ToolSourceAdmin(StaffOnly, admin.ModelAdmin):
    list_display = ("name", "kind", "command", "url", "enabled", "ask_first",
                    "open_to_everyone")
    list_filter = ("kind", "enabled")
    filter_horizontal = ("allowed_users", "allowed_groups")
    inlines = [ToolSourceToolInline]
    fieldsets = [
        (None, {"fields": ("name", "kind", "enabled")}),
        ("Command over stdio", {"fields": ("command", "args", "env_allow")}),
        ("Streamable HTTP", {"fields": ("url", "headers")}),
        ("Limits", {"fields": ("call_timeout_s", "start_timeout_s", "max_schema_tokens",
                               "max_result_rows", "max_result_length", "summary_mode")}),
        ("Who and how", {"fields": ("ask_first", "open_to_everyone", "allowed_users",
                                    "allowed_groups")}),
    ]
