"""A live connection to one MCP server, used from the loop's synchronous threads.

The `mcp` SDK is asynchronous and its client must be entered and left in one task, so each
set of sources runs an event loop in a thread of its own (SourceLoop); a connection's owner
task holds the SDK's Client open until it is told to stop, and calls run beside it.

Whatever the server does becomes a SourceFault with a message a model can act on: it does
not start (its last stderr lines are quoted), never answers the handshake, dies or hangs in
a call, or sends garbage. After a fault in a call the connection is closed (a hung server
is killed with it), and the next call starts it again.
"""
from __future__ import annotations

import asyncio
import tempfile
import threading
from pathlib import Path
from typing import Any

from agents.toolsources.spec import HTTP, SourceSpec

MAX_LIST_PAGES = 20
STDERR_TAIL_CHARS = 600


class SourceFault(Exception):
    """The server could not do what was asked; the message says what happened."""


class SourceLoop:
    """An asyncio event loop in a daemon thread; `run` waits for a coroutine from any thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="tool-sources",
                                        daemon=True)
        self._thread.start()

    def run(self, coro: Any, timeout: float) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def close(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)
        if not self.loop.is_running():
            self.loop.close()


def _describe(exc: BaseException) -> str:
    """One line for an exception the SDK raised, groups unwrapped to their first cause."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"


class McpConnection:
    def __init__(self, spec: SourceSpec, workspace: Path) -> None:
        self.spec = spec
        self.workspace = workspace
        self.client: Any = None
        self.starts = 0  # how many times the server was started (or connected to)
        self._owner: asyncio.Task | None = None
        self._stop: asyncio.Event | None = None
        self._stderr: Any = None

    # -- the owner task: opens the client, holds it until told to stop --------------------
    def _transport(self) -> Any:
        """The SDK transport of the source: the HTTP client, or the command with the
        allow-listed environment, run in the session's workspace, its stderr kept."""
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client
        spec = self.spec
        if spec.kind == HTTP:
            import httpx2
            client = httpx2.AsyncClient(headers=spec.header_values(),
                                        timeout=httpx2.Timeout(spec.call_timeout_s + 5))
            return streamable_http_client(spec.url, http_client=client)
        if not spec.command:
            raise SourceFault(f"tool source {spec.name!r} has no command to start")
        if self._stderr is None:
            self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        self._stderr.seek(0)
        self._stderr.truncate()
        # The SDK merges `env` over its own safe defaults: the allow-listed names only.
        return stdio_client(StdioServerParameters(
            command=spec.command, args=list(spec.args), env=spec.environment(),
            cwd=str(self.workspace)), errlog=self._stderr)

    async def _hold(self, ready: asyncio.Future, stop: asyncio.Event) -> None:
        from mcp.client import Client
        try:
            client = Client(self._transport(), cache=None)
            async with client:
                self.client = client
                if not ready.done():
                    ready.set_result(client)
                await stop.wait()
        except BaseException as exc:  # noqa: BLE001 - reported to whoever waits for it
            if not ready.done():
                ready.set_exception(SourceFault(_describe(exc)))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.client = None

    def stderr_tail(self, since: int = 0) -> str:
        """The end of what the server wrote to stderr (after offset `since`)."""
        if self._stderr is None:
            return ""
        try:
            self._stderr.seek(since)
            text = self._stderr.read()
        except (OSError, ValueError):
            return ""
        text = text.strip()
        return text[-STDERR_TAIL_CHARS:]

    async def _start(self) -> Any:
        if self.client is not None and self._owner is not None and not self._owner.done():
            return self.client
        await self._close()
        loop = asyncio.get_running_loop()
        ready: asyncio.Future = loop.create_future()
        self._stop = asyncio.Event()
        self._owner = loop.create_task(self._hold(ready, self._stop))
        self.starts += 1
        where = (f"at {self.spec.url}" if self.spec.kind == HTTP
                 else f"({self.spec.command} {' '.join(self.spec.args)})".strip())
        try:
            return await asyncio.wait_for(asyncio.shield(ready), self.spec.start_timeout_s)
        except TimeoutError:
            await self._close()
            raise SourceFault(
                f"tool source {self.spec.name!r} {where} did not answer the MCP handshake "
                f"(initialize) within {self.spec.start_timeout_s:g} s{self._stderr_note()}"
            ) from None
        except SourceFault as exc:
            await self._close()
            raise SourceFault(f"tool source {self.spec.name!r} {where} could not be started "
                              f"or reached: {exc}{self._stderr_note()}") from None

    def _stderr_offset(self) -> int:
        if self._stderr is None:
            return 0
        try:
            return self._stderr.seek(0, 2)
        except (OSError, ValueError):
            return 0

    def _stderr_note(self, since: int = 0) -> str:
        tail = self.stderr_tail(since)
        return f". Its last error output: {tail}" if tail else ""

    async def _close(self) -> None:
        owner, self._owner = self._owner, None
        if owner is not None and not owner.done():
            self._stop.set()
            try:
                await asyncio.wait_for(owner, 10)
            except (TimeoutError, asyncio.CancelledError, Exception):  # noqa: BLE001
                owner.cancel()
        self.client = None

    # -- what the tools call ---------------------------------------------------------------
    async def list_tools(self) -> list[Any]:
        client = await self._start()
        tools, cursor = [], None
        try:
            for _ in range(MAX_LIST_PAGES):
                page = await asyncio.wait_for(client.list_tools(cursor=cursor),
                                              self.spec.start_timeout_s)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
        except Exception as exc:  # noqa: BLE001 - a listing that fails is the source's fault
            await self._close()
            raise SourceFault(f"tool source {self.spec.name!r} could not list its tools: "
                              f"{_describe(exc)}{self._stderr_note()}") from None
        return tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        client = await self._start()
        timeout, since = self.spec.call_timeout(tool), self._stderr_offset()
        try:
            return await asyncio.wait_for(client.call_tool(tool, arguments), timeout)
        except TimeoutError:
            await self._close()  # a stuck server is stopped; the next call starts it again
            raise SourceFault(f"{tool} on tool source {self.spec.name!r} did not answer "
                              f"within {timeout:g} s; the call was abandoned and the server "
                              "stopped (it starts again for the next call)") from None
        except Exception as exc:  # noqa: BLE001 - the connection is in doubt: start afresh
            reason = _describe(exc)
            crashed = (self._owner is None or self._owner.done()
                       or "connection closed" in reason.lower())
            await self._close()
            what = "the server stopped during the call" if crashed else "the call failed"
            raise SourceFault(f"{tool} on tool source {self.spec.name!r}: {what} "
                              f"({reason}); it starts again for the next call"
                              f"{self._stderr_note(since)}") from None

    async def close(self) -> None:
        await self._close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
