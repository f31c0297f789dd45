"""What a tool source is (feature T10): an MCP server the worker starts as a command over
stdio, or reaches over Streamable HTTP, and the limits its tools run under.

Plain data, built by the web app from its admin rows and by tests by hand; nothing here
starts or reaches anything.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from agents.tools.base import ToolBoundary

STDIO, HTTP = "stdio", "http"
SUMMARY_MODES = ("none", "head_tail", "stats", "llm")
# The environment a command gets whatever its allow-list says (the SDK's safe defaults):
# where to find programs and who runs them, nothing that holds a secret.
BASE_ENVIRONMENT = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
_SLUG = re.compile(r"[^A-Za-z0-9_-]+")


class SourceConfigError(ValueError):
    """A source that cannot be used as configured (a missing variable, no command…)."""


@dataclass(frozen=True)
class ToolSettings:
    """One tool's limits (feature C10) and whether a person approves each call first (T11).
    None: the source's default."""

    max_result_rows: int | None = None
    max_result_length: int | None = None
    summary_mode: str | None = None
    ask_first: bool | None = None
    call_timeout_s: float | None = None


@dataclass
class SourceSpec:
    name: str  # prefixes its tools' names for the model: `<name>__<tool>`
    kind: str = STDIO
    command: str = ""
    args: list[str] = field(default_factory=list)
    env_allow: list[str] = field(default_factory=list)  # worker variables passed by name
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)  # header -> variable holding it
    call_timeout_s: float = 30.0
    start_timeout_s: float = 60.0  # a Python server may take seconds to import on a busy worker
    max_schema_tokens: int = 2000  # a tool whose schema is longer is not offered
    defaults: ToolSettings = field(default_factory=ToolSettings)
    tools: dict[str, ToolSettings] = field(default_factory=dict)  # per-tool overrides
    ask_first: bool = False  # every tool of the source asks first (T11)

    @property
    def prefix(self) -> str:
        return _SLUG.sub("_", self.name).strip("_")[:24] or "source"

    def tool_name(self, tool: str) -> str:
        """The name the model sees: the source's prefix, two underscores, the tool's name,
        in the characters and length function names allow."""
        return f"{self.prefix}__{_SLUG.sub('_', tool)}"[:64]

    def boundary(self, tool: str) -> ToolBoundary:
        override, base, default = self.tools.get(tool, ToolSettings()), self.defaults, \
            ToolBoundary()

        def pick(name: str) -> Any:
            for settings in (override, base):
                value = getattr(settings, name)
                if value is not None:
                    return value
            return getattr(default, name)

        mode = pick("summary_mode")
        return ToolBoundary(max_result_rows=int(pick("max_result_rows")),
                            max_result_length=int(pick("max_result_length")),
                            summary_mode=mode if mode in SUMMARY_MODES else "head_tail")

    def call_timeout(self, tool: str) -> float:
        override = self.tools.get(tool, ToolSettings()).call_timeout_s
        return float(override if override is not None else self.call_timeout_s)

    def asks_first(self, tool: str) -> bool:
        override = self.tools.get(tool, ToolSettings()).ask_first
        if override is not None:
            return override
        return self.ask_first or bool(self.defaults.ask_first)

    def environment(self, environ: dict[str, str] | None = None) -> dict[str, str]:
        """The command's environment: the base names and the allow-listed ones that are set
        on the worker; nothing else, secrets included, reaches it."""
        environ = os.environ if environ is None else environ
        names = [*BASE_ENVIRONMENT, *self.env_allow]
        return {name: environ[name] for name in names if name in environ}

    def header_values(self, environ: dict[str, str] | None = None) -> dict[str, str]:
        """The HTTP headers, each value read from its named worker variable."""
        environ = os.environ if environ is None else environ
        missing = [var for var in self.headers.values() if var not in environ]
        if missing:
            raise SourceConfigError(
                f"tool source {self.name!r}: the worker has no environment variable "
                f"{', '.join(sorted(missing))} for its HTTP headers")
        return {header: environ[var] for header, var in self.headers.items()}

    def to_dict(self) -> dict[str, Any]:
        def settings(value: ToolSettings) -> dict[str, Any]:
            return {k: v for k, v in value.__dict__.items() if v is not None}
        return {"name": self.name, "kind": self.kind, "command": self.command,
                "args": list(self.args), "env_allow": list(self.env_allow), "url": self.url,
                "headers": dict(self.headers), "call_timeout_s": self.call_timeout_s,
                "start_timeout_s": self.start_timeout_s,
                "max_schema_tokens": self.max_schema_tokens,
                "defaults": settings(self.defaults), "ask_first": self.ask_first,
                "tools": {name: settings(value) for name, value in self.tools.items()}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SourceSpec:
        data = dict(data)
        data["defaults"] = ToolSettings(**data.get("defaults", {}))
        data["tools"] = {name: ToolSettings(**value)
                         for name, value in data.get("tools", {}).items()}
        return cls(**data)
