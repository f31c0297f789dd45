"""The ToolRegistry: the only way the loop runs a tool, and it never raises.

`run` parses and checks the arguments, calls the tool (in a worker thread with a timeout
unless the tool is `inline`), renders whatever came back into text, archives the full raw
result, bounds it to the tool's boundary (feature C10) and reports an OFFLOAD event when
something was cut. Every failure becomes a ToolOutcome with a clear `error`.
"""
from __future__ import annotations

import dataclasses
import re
import threading
import traceback
from typing import Any

from agents.config import ContextConfig
from agents.tools import compress, data, documents, notes, recall, sql, tasks, workspace
from agents.tools.arguments import hidden_parameters, parse_arguments
from agents.tools.base import Pending, Tool, ToolBoundary, ToolContext, ToolError, ToolOutcome
from agents.tools.bounding import bound_rendered
from agents.storable import storable_text
from agents.tools.offload import Offloader, RawToolResult
from agents.tools.render import Rendered, render_result

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what OpenAI accepts as a function name
MAX_ERROR_CHARS = 2000


class ToolTimeout(Exception):
    pass


def _short(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


class ToolRegistry:
    def __init__(self, result_limit: int | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        self._hidden: dict[str, tuple[str, ...]] = {}
        self.result_limit = result_limit  # caps every tool's max_result_length

    def register(self, tool: Tool) -> Tool:
        if not _NAME.match(tool.name):
            raise ValueError(f"Tool name {tool.name!r} must be 1-64 letters, digits, _ or -.")
        if tool.name in self._tools:
            raise ValueError(f"A tool named {tool.name!r} is already registered.")
        self._hidden[tool.name] = hidden_parameters(tool)
        self._tools[tool.name] = tool
        return tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        """OpenAI tool schemas, hidden `_` parameters removed."""
        return [tool.schema() for tool in self._tools.values()]

    def boundary(self, tool: Tool) -> ToolBoundary:
        """The tool's boundary with max_result_length capped by the session's limit."""
        if self.result_limit is None or tool.boundary.max_result_length <= self.result_limit:
            return tool.boundary
        return dataclasses.replace(tool.boundary, max_result_length=self.result_limit)

    def run(self, name: str, arguments_json: str, ctx: ToolContext) -> ToolOutcome:
        """Run one tool call; whatever happens, return a bounded ToolOutcome."""
        try:
            return self._run(name, arguments_json, ctx)
        except Exception as exc:  # e.g. the store failing to archive: the loop must go on
            message = storable_text(_short(f"The tool layer failed while handling {name!r}: "
                                           f"{type(exc).__name__}: {exc}"))
            content = _short("Error: " + message, ToolBoundary().max_result_length)
            return ToolOutcome(content=content, error=message, kept_chars=len(content))

    def _run(self, name: str, arguments_json: str, ctx: ToolContext) -> ToolOutcome:
        tool = self._tools.get(name)
        offloader = Offloader(ctx.store, ctx.events)
        if tool is None:
            known = ", ".join(self._tools) or "none"
            return self._failure(offloader, ctx, name, {"arguments": arguments_json},
                                 f"Unknown tool {name!r}. Available tools: {known}.",
                                 ToolBoundary(), "")
        boundary = self.boundary(tool)
        try:
            args = parse_arguments(tool, arguments_json)
        except ToolError as exc:
            raw_args = {"arguments": _short(str(arguments_json), 100_000)}
            return self._failure(offloader, ctx, name, raw_args, str(exc), boundary, "")
        try:
            value = self._call(tool, args, ctx, boundary)
        except ToolError as exc:
            return self._failure(offloader, ctx, name, args, str(exc), boundary, "")
        except ToolTimeout:
            message = (f"{name} did not finish within {tool.timeout_s:g} s and was abandoned; "
                       "any later result is discarded. Try a smaller request.")
            return self._failure(offloader, ctx, name, args, message, boundary, "")
        except BaseException as exc:  # noqa: BLE001 — a tool may raise anything, even SystemExit
            if isinstance(exc, KeyboardInterrupt) and tool.inline:
                raise  # Ctrl-C of the person running the worker, not a tool failure
            message = f"{name} failed: {type(exc).__name__}: {exc}"
            details = "".join(traceback.format_exception(exc))
            return self._failure(offloader, ctx, name, args, message, boundary, details)
        if isinstance(value, Pending):
            outcome = self._success(offloader, ctx, name, args, render_result(value.message),
                                    boundary)
            outcome.pending = value.waiting_for
            return outcome
        return self._success(offloader, ctx, name, args, render_result(value), boundary)

    def _call(self, tool: Tool, args: dict[str, Any], ctx: ToolContext,
              boundary: ToolBoundary) -> Any:
        injected = {"_ctx": ctx, "_state": ctx.state, "_boundary": boundary}
        kwargs = dict(args)
        kwargs.update({name: injected[name] for name in self._hidden[tool.name]})
        if tool.inline:
            return tool.func(**kwargs)
        outcome: dict[str, Any] = {}
        finished = threading.Event()

        def target() -> None:
            try:
                outcome["value"] = tool.func(**kwargs)
            except BaseException as exc:  # noqa: BLE001 — carried to the caller's thread
                outcome["error"] = exc
            finally:
                finished.set()

        # A daemon thread: a tool that hangs forever must not keep the worker from exiting.
        worker = threading.Thread(target=target, name=f"tool-{tool.name}", daemon=True)
        worker.start()
        if not finished.wait(tool.timeout_s):
            raise ToolTimeout()
        if "error" in outcome:
            raise outcome["error"]
        return outcome.get("value")

    def _failure(self, offloader: Offloader, ctx: ToolContext, name: str,
                 args: dict[str, Any], message: str, boundary: ToolBoundary,
                 details: str) -> ToolOutcome:
        # An exception's text may quote what the tool read, NUL included: the model and the
        # archive get the same storable text (agents/storable.py).
        message = storable_text(_short(message))
        archived = message + ("\n\n" + storable_text(details) if details else "")
        ref = offloader.archive_tool_result(ctx.session_id, RawToolResult(
            tool_name=name, tool_args=args, text=archived, turn=ctx.turn))
        content = _short("Error: " + message, boundary.max_result_length)
        return ToolOutcome(content=content, error=message, ref=ref,
                           original_chars=len(archived), kept_chars=len(content))

    def _success(self, offloader: Offloader, ctx: ToolContext, name: str,
                 args: dict[str, Any], rendered: Rendered, boundary: ToolBoundary) -> ToolOutcome:
        binary = rendered.kind == "binary"
        ref = offloader.archive_tool_result(ctx.session_id, RawToolResult(
            tool_name=name, tool_args=args, text="" if binary else rendered.text,
            raw_bytes=rendered.raw_bytes if binary else None, turn=ctx.turn))
        bounded = bound_rendered(rendered, boundary, ref)
        original = len(rendered.raw_bytes or b"") if binary else len(rendered.text)
        if bounded.truncated:
            offloader.announce(ctx.session_id, ref, "tool_result", original, ctx.turn, tool=name)
        return ToolOutcome(content=bounded.content, truncated=bounded.truncated, ref=ref,
                           original_chars=original, kept_chars=len(bounded.content),
                           conclusions=rendered.conclusions)


CHARS_PER_TOKEN = 4


def all_tools() -> list[Tool]:
    """Fresh Tool objects from every tool module, in the order the model sees them."""
    modules = (tasks, notes, recall, workspace, data, sql, documents)
    return [tool for module in modules for tool in module.tools()]


def default_registry(config: ContextConfig | None = None, only: list[str] | None = None,
                     extra: list[Tool] | None = None) -> ToolRegistry:
    """A registry with every TaskOS tool (or the named ones); results capped by the config.
    `extra` tools (e.g. delegate, built per session) are offered when `only` allows them."""
    # tool_result_limit is in tokens (feature C4). Tools bound their output in characters,
    # cheaply, at a generous 4 characters a token; the engine then enforces the exact token
    # limit when the result enters the context (Budget.message_cap).
    registry = ToolRegistry(
        result_limit=config.tool_result_limit * CHARS_PER_TOKEN if config else None)
    tools = all_tools()
    if config is not None and config.compression_tool_enabled:
        tools += compress.tools()
    tools += extra or []
    unknown = set(only or ()) - {t.name for t in tools}
    if unknown:
        raise ValueError(f"unknown tools {sorted(unknown)}; available: "
                         f"{', '.join(t.name for t in tools)}")
    for tool in tools:
        if only is None or tool.name in only:
            registry.register(tool)
    return registry
