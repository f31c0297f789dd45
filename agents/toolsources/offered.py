"""The tools a session's sources offer the model, as registry Tools (feature T10).

`SourceSet.open` starts every source and lists its tools at session start; each tool the
model may see becomes a `Tool` whose boundary (C10) comes from the source's settings, so the
registry bounds, offloads and archives its results as it does the built-ins'. A source
that cannot start, and a tool whose schema is invalid or too long, is left out with a
warning the person sees; a fault during a call is a ToolError the model sees.
"""
from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.tools.base import Tool, ToolContext, ToolError
from agents.toolsources.connection import McpConnection, SourceFault, SourceLoop
from agents.toolsources.spec import SourceConfigError, SourceSpec

CHARS_PER_TOKEN = 4  # the schema limit is checked cheaply; the budget counts exactly
MAX_DESCRIPTION_CHARS = 2000
LOOP_GRACE_S = 15.0  # beyond the source's own timeouts: closing a stuck server takes a while
CANCEL_POLL_S = 0.5  # how often a call in flight reads the session's cancel flag


@dataclass
class OfferedTool:
    source: str
    name: str  # the server's name of the tool
    offered_as: str  # the name the model sees
    schema_tokens: int


@dataclass
class SourceSet:
    """The open sources of one run; `close` stops every server it started."""

    specs: list[SourceSpec]
    workspace: Path
    loop: SourceLoop = field(default_factory=SourceLoop)
    connections: dict[str, McpConnection] = field(default_factory=dict)
    tools: list[Tool] = field(default_factory=list)
    offered: list[OfferedTool] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def open(cls, specs: list[SourceSpec], workspace: Path,
             taken: set[str] = frozenset()) -> SourceSet:
        sources = cls(specs=list(specs), workspace=workspace)
        names = set(taken)
        for spec in specs:
            sources._open_one(spec, names)
        return sources

    def _open_one(self, spec: SourceSpec, names: set[str]) -> None:
        connection = McpConnection(spec, self.workspace)
        self.connections[spec.name] = connection
        try:
            listed = self.loop.run(connection.list_tools(),
                                   spec.start_timeout_s * 2 + LOOP_GRACE_S)
        except (SourceFault, SourceConfigError) as exc:
            self.warnings.append(f"{exc}. Its tools are not offered in this run.")
            return
        except TimeoutError:
            self.warnings.append(f"tool source {spec.name!r} did not list its tools in time. "
                                 "Its tools are not offered in this run.")
            return
        for listed_tool in listed:
            tool = self._tool(spec, connection, listed_tool, names)
            if tool is not None:
                names.add(tool.name)
                self.tools.append(tool)

    def _tool(self, spec: SourceSpec, connection: McpConnection, listed: Any,
              names: set[str]) -> Tool | None:
        name = str(listed.name)
        offered_as = spec.tool_name(name)
        schema = listed.input_schema if isinstance(listed.input_schema, dict) else None
        problem = schema_problem(schema)
        if problem:
            self.warnings.append(f"tool {name!r} of source {spec.name!r} is not offered: its "
                                 f"input schema is invalid ({problem}).")
            return None
        description = (listed.description or listed.title or f"{name} (from {spec.name})")
        description = description[:MAX_DESCRIPTION_CHARS]
        tokens = len(json.dumps(schema, ensure_ascii=False) + description) // CHARS_PER_TOKEN
        if tokens > spec.max_schema_tokens:
            self.warnings.append(
                f"tool {name!r} of source {spec.name!r} is not offered: its schema is about "
                f"{tokens} tokens, over the source's limit of {spec.max_schema_tokens}.")
            return None
        if offered_as in names:
            self.warnings.append(f"tool {name!r} of source {spec.name!r} is not offered: "
                                 f"the name {offered_as!r} is taken.")
            return None
        self.offered.append(OfferedTool(spec.name, name, offered_as, tokens))
        # Hidden `_`-prefixed properties are the registry's own: a server's are dropped.
        properties = {k: v for k, v in (schema.get("properties") or {}).items()
                      if not k.startswith("_")}
        parameters = {"type": "object", "properties": properties}
        required = [k for k in schema.get("required") or [] if k in properties]
        if required:
            parameters["required"] = required

        def call(_ctx: ToolContext, **arguments: Any) -> Any:
            return self.call(connection, name, arguments, _ctx)

        return Tool(name=offered_as, description=f"[{spec.name}] {description}",
                    parameters=parameters, func=call, boundary=spec.boundary(name),
                    timeout_s=spec.start_timeout_s + spec.call_timeout(name) + LOOP_GRACE_S,
                    # In the loop's thread: the call waits on the source's own event loop
                    # and reads the cancel flag through the store, whose connection
                    # belongs to this thread.
                    inline=True,
                    ask_first=spec.asks_first(name),
                    # The server's own hint (MCP tool annotations): asked first where a
                    # session asks before writes (T11).
                    destructive=bool(getattr(listed.annotations, "destructive_hint", False)))

    def call(self, connection: McpConnection, name: str, arguments: dict[str, Any],
             ctx: ToolContext | None = None) -> Any:
        spec = connection.spec
        try:
            result = self._wait(connection, name, arguments, ctx,
                                spec.start_timeout_s + spec.call_timeout(name) + LOOP_GRACE_S)
        except (SourceFault, SourceConfigError) as exc:
            raise ToolError(str(exc)) from None
        if result.is_error:
            text = content_text(result) or "(no message)"
            gone = self._gone(connection, name)
            raise ToolError(f"{name} on tool source {spec.name!r} returned an error: {text}"
                            + (f" {gone}" if gone else ""))
        return result_value(result)

    def _wait(self, connection: McpConnection, name: str, arguments: dict[str, Any],
              ctx: ToolContext | None, limit_s: float) -> Any:
        """The call's result; a person's cancel (the drawer's Cancel) or the overall limit
        abandons it and stops the server, which starts again for the next call."""
        future = asyncio.run_coroutine_threadsafe(connection.call(name, arguments),
                                                  self.loop.loop)
        end = time.monotonic() + limit_s
        while True:
            try:
                return future.result(CANCEL_POLL_S)
            except concurrent.futures.TimeoutError:
                pass
            cancelled = ctx is not None and ctx.store.cancel_requested(ctx.session_id)
            if cancelled or time.monotonic() >= end:
                future.cancel()
                try:
                    self.loop.run(connection.close(), LOOP_GRACE_S * 2)
                except Exception:  # noqa: BLE001 - the server is abandoned either way
                    pass
                what = ("the session was cancelled during the call" if cancelled
                        else f"it did not finish within {limit_s:g} s")
                raise SourceFault(f"{name} on tool source {connection.spec.name!r} was "
                                  f"abandoned: {what}; the server was stopped")

    def _gone(self, connection: McpConnection, name: str) -> str:
        """Whether the server's tool list changed under the session: said beside its error."""
        try:
            listed = self.loop.run(connection.list_tools(),
                                   connection.spec.start_timeout_s * 2 + LOOP_GRACE_S)
        except (SourceFault, TimeoutError):
            return ""
        now = [tool.name for tool in listed]
        if name in now:
            return ""
        return (f"The server no longer offers {name!r}: its tool list changed during the "
                f"session (now: {', '.join(now) or 'none'}).")

    def schema_tokens(self) -> dict[str, int]:
        """Estimated schema tokens per source, for the person's view of the system zone."""
        totals: dict[str, int] = {}
        for offered in self.offered:
            totals[offered.source] = totals.get(offered.source, 0) + offered.schema_tokens
        return totals

    def close(self) -> None:
        for connection in self.connections.values():
            try:
                self.loop.run(connection.close(), 30)
            except Exception:  # noqa: BLE001 - closing must not hide the run's own outcome
                pass
        self.loop.close()


def schema_problem(schema: dict[str, Any] | None) -> str:
    """What is wrong with a tool's input schema as a function's parameters, or ''."""
    if schema is None:
        return "it is not a JSON object"
    if schema.get("type", "object") != "object":
        return f"its type is {schema.get('type')!r}, not 'object'"
    try:
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return exc.message[:200]
    if not isinstance(schema.get("properties", {}), dict):
        return "its properties are not an object"
    return ""


def content_text(result: Any) -> str:
    """The text of a call's content; other content named, with its type and size."""
    parts = []
    for item in result.content or []:
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(item.text)
        elif kind in ("image", "audio"):
            size = len(base64.b64decode(item.data or "", validate=False) or b"")
            parts.append(f"[{kind} content, {item.mime_type}, {size} bytes: not text, "
                         "archived but not shown]")
        elif kind == "resource_link":
            parts.append(f"[resource link: {item.uri}]")
        elif kind == "resource":
            resource = item.resource
            text = getattr(resource, "text", None)
            parts.append(text if text is not None else
                         f"[binary resource {resource.uri}, {resource.mime_type or 'unknown type'}"
                         ": archived but not shown]")
        else:
            parts.append(f"[{kind or 'unknown'} content: not text, not shown]")
    return "\n".join(parts)


def result_value(result: Any) -> Any:
    """What the registry renders: bytes for a result that is only one binary item (archived
    as binary, described to the model), the structured content when there is no text, else
    the text with every non-text item named."""
    content = list(result.content or [])
    if len(content) == 1 and getattr(content[0], "type", "") in ("image", "audio"):
        try:
            return base64.b64decode(content[0].data, validate=False)
        except ValueError:
            return content_text(result)
    text = content_text(result)
    if not text and result.structured_content is not None:
        return result.structured_content
    return text
