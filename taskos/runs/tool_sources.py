"""Tool sources (feature T10): MCP servers whose tools a session offers beside the built-ins.

Staff create and change them in the admin (taskos/runs/admin_tool_sources.py); a person
picks, on the start form, the ones open to them. The worker turns a session's sources
into the engine's SourceSpec (`to_engine`) at every run, so a resumed run reconnects them.
Imported by models.py, so Django registers these models with the runs app.
"""
from __future__ import annotations

import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from agents.toolsources import SourceSpec, ToolSettings
from agents.toolsources.spec import SUMMARY_MODES

_SOURCE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,24}$")
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
SUMMARY_CHOICES = [(mode, mode) for mode in SUMMARY_MODES]
MAX_TIMEOUT_S = 3600
TIMEOUT_MESSAGE = f"Give a number of seconds above 0 and up to {MAX_TIMEOUT_S}."


class ToolSourceQuerySet(models.QuerySet):
    def usable_by(self, user) -> ToolSourceQuerySet:
        """The enabled sources a person may pick: all for staff, else those open to
        everyone, to them, or to one of their groups."""
        enabled = self.filter(enabled=True)
        if user is None or not user.is_authenticated:
            return enabled.none()
        if user.is_staff:
            return enabled
        return enabled.filter(Q(open_to_everyone=True) | Q(allowed_users=user)
                              | Q(allowed_groups__in=user.groups.all())).distinct()


class ToolSource(models.Model):
    class Kind(models.TextChoices):
        STDIO = "stdio", "Command over stdio"
        HTTP = "http", "Streamable HTTP"

    name = models.CharField(
        max_length=24, unique=True,
        help_text="Letters, digits, _ or -. The model sees each tool as NAME__TOOL.")
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.STDIO)
    command = models.CharField(
        max_length=500, blank=True,
        help_text="stdio: the program the worker starts, e.g. python. It runs in the "
                  "session's workspace folder, as the worker's user.")
    args = models.JSONField(default=list, blank=True,
                            help_text='stdio: its arguments, a JSON list, e.g. '
                                      '["-m", "taskos_mcp.calculator"].')
    env_allow = models.JSONField(
        default=list, blank=True, verbose_name="environment allow-list",
        help_text="stdio: names of worker environment variables the command receives, a JSON "
                  "list. Nothing else is passed (besides HOME, LOGNAME, PATH, SHELL, TERM, "
                  "USER): no secret reaches it unless named here.")
    url = models.URLField(blank=True, help_text="HTTP: the server's Streamable HTTP endpoint.")
    headers = models.JSONField(
        default=dict, blank=True,
        help_text='HTTP: header name → name of the worker environment variable holding its '
                  'value, e.g. {"Authorization": "CRM_MCP_TOKEN"}. Values never stored here.')
    call_timeout_s = models.FloatField(default=30.0, verbose_name="call timeout (s)")
    start_timeout_s = models.FloatField(default=60.0, verbose_name="start timeout (s)")
    max_schema_tokens = models.PositiveIntegerField(
        default=2000, help_text="A tool whose schema is longer is not offered (it would "
                                "take that much of every request's window).")
    max_result_rows = models.PositiveIntegerField(null=True, blank=True,
                                                  help_text="Default for its tools (C10).")
    max_result_length = models.PositiveIntegerField(
        null=True, blank=True, help_text="Characters of a result kept in context; default "
                                         "for its tools (C10).")
    summary_mode = models.CharField(max_length=12, choices=SUMMARY_CHOICES, blank=True)
    ask_first = models.BooleanField(
        default=False, help_text="Every call of its tools waits for a person's approval.")
    enabled = models.BooleanField(default=True)
    open_to_everyone = models.BooleanField(
        default=False, help_text="Anyone may pick it; else staff, and the users and groups "
                                 "below.")
    allowed_users = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True,
                                           related_name="tool_sources")
    allowed_groups = models.ManyToManyField("auth.Group", blank=True,
                                            related_name="tool_sources")
    sessions = models.ManyToManyField("runs.Session", blank=True, related_name="tool_sources",
                                      editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ToolSourceQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if not _SOURCE_NAME.match(self.name or ""):
            errors["name"] = "Use 1 to 24 letters, digits, _ or -."
        if self.kind == self.Kind.STDIO and not (self.command or "").strip():
            errors["command"] = "A stdio source needs the command that starts its server."
        if self.kind == self.Kind.HTTP and not self.url:
            errors["url"] = "An HTTP source needs its server's URL."
        if not (isinstance(self.args, list) and all(isinstance(a, str) for a in self.args)):
            errors["args"] = 'Give a JSON list of strings, e.g. ["-m", "server"].'
        if not (isinstance(self.env_allow, list)
                and all(isinstance(v, str) and _VARIABLE.match(v) for v in self.env_allow)):
            errors["env_allow"] = 'Give a JSON list of variable names, e.g. ["CRM_URL"].'
        if not (isinstance(self.headers, dict) and all(
                isinstance(k, str) and _HEADER.match(k) and isinstance(v, str)
                and _VARIABLE.match(v) for k, v in self.headers.items())):
            errors["headers"] = ('Give a JSON object of header name → environment variable '
                                 'name, e.g. {"Authorization": "CRM_MCP_TOKEN"}.')
        for field in ("call_timeout_s", "start_timeout_s"):
            value = getattr(self, field)
            if value is None or not 0 < value <= MAX_TIMEOUT_S:
                errors[field] = TIMEOUT_MESSAGE
        if errors:
            raise ValidationError(errors)

    def to_engine(self) -> SourceSpec:
        return SourceSpec(
            name=self.name, kind=self.kind, command=self.command, args=list(self.args or []),
            env_allow=list(self.env_allow or []), url=self.url,
            headers=dict(self.headers or {}), call_timeout_s=self.call_timeout_s,
            start_timeout_s=self.start_timeout_s, max_schema_tokens=self.max_schema_tokens,
            defaults=ToolSettings(max_result_rows=self.max_result_rows,
                                  max_result_length=self.max_result_length,
                                  summary_mode=self.summary_mode or None),
            ask_first=self.ask_first,
            tools={tool.tool_name: tool.settings() for tool in self.tool_settings.all()})


class ToolSourceTool(models.Model):
    """One tool's settings in its source, over the source's defaults (C10, T11)."""

    source = models.ForeignKey(ToolSource, on_delete=models.CASCADE,
                               related_name="tool_settings")
    tool_name = models.CharField(max_length=128, help_text="The tool's name on its server.")
    max_result_rows = models.PositiveIntegerField(null=True, blank=True)
    max_result_length = models.PositiveIntegerField(null=True, blank=True)
    summary_mode = models.CharField(max_length=12, choices=SUMMARY_CHOICES, blank=True)
    ask_first = models.BooleanField(null=True, blank=True,
                                    help_text="Empty: as the source says.")
    call_timeout_s = models.FloatField(null=True, blank=True, verbose_name="call timeout (s)",
                                       help_text="Empty: the source's.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["source", "tool_name"],
                                               name="one_setting_per_source_tool")]

    def __str__(self) -> str:
        return f"{self.source.name}: {self.tool_name}"

    def clean(self) -> None:
        if self.call_timeout_s is not None and not 0 < self.call_timeout_s <= MAX_TIMEOUT_S:
            raise ValidationError({"call_timeout_s": TIMEOUT_MESSAGE})

    def settings(self) -> ToolSettings:
        return ToolSettings(max_result_rows=self.max_result_rows,
                            max_result_length=self.max_result_length,
                            summary_mode=self.summary_mode or None, ask_first=self.ask_first,
                            call_timeout_s=self.call_timeout_s)
