"""Sending stored events to a session's channel-layer group, in order, a batch per hop.

The database row is the truth (taskos/live/publisher.py); a page that missed a message
resyncs from it, so a failed send pauses streaming for a while instead of failing the run.
"""
from __future__ import annotations

import asyncio
import logging
import os
import threading
import time

from channels.layers import get_channel_layer

log = logging.getLogger("taskos.live")

# After a failed send, skip streaming for this long instead of paying a connection
# attempt on every event while Redis is down.
SEND_RETRY_AFTER_S = 5.0
SEND_TIMEOUT_S = 10.0


class _SendLoop:
    """One event loop per process, in a daemon thread, for every group_send.

    async_to_sync would make a fresh loop per call, and the Redis layer keeps its
    connections per loop: every event would open and close a connection (~25 ms each).
    """

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None
    _pid = 0

    @classmethod
    def run(cls, coroutine, timeout: float):
        with cls._lock:
            if cls._loop is None or cls._pid != os.getpid():  # none yet, or forked
                cls._loop = asyncio.new_event_loop()
                cls._pid = os.getpid()
                threading.Thread(target=cls._loop.run_forever, name="taskos-publisher",
                                 daemon=True).start()
            loop = cls._loop
        future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise


def group_name(session_id: int | str) -> str:
    return f"session.{session_id}"


class GroupSender:
    """Sends a session's messages, in order, in one hop to the send loop per batch.

    The engine waits for the send (bounded by SEND_TIMEOUT_S): a page is never far behind
    the stored rows, and a held channel layer holds the engine between two commit points,
    outside any transaction (the browser tests rely on that to act mid-run).
    """

    def __init__(self, session_pk: int) -> None:
        self.session_pk = session_pk
        self._layer = get_channel_layer()
        self._send_blocked_until = 0.0
        self._warned = False

    def send(self, messages: list[dict]) -> None:
        if not messages or self._layer is None or time.monotonic() < self._send_blocked_until:
            return
        group = group_name(self.session_pk)

        async def send_in_order():
            for message in messages:  # in seq order: the drawer appends as they come
                await asyncio.wait_for(self._layer.group_send(group, message), SEND_TIMEOUT_S)

        try:
            _SendLoop.run(send_in_order(), SEND_TIMEOUT_S * 2)
        except Exception as exc:  # noqa: BLE001 - any transport failure: keep storing
            self._send_failed(exc)
            return
        self._send_ok()

    def _send_failed(self, exc: BaseException) -> None:
        """Keep storing; streaming pauses for a while instead of failing every event."""
        self._send_blocked_until = time.monotonic() + SEND_RETRY_AFTER_S
        if not self._warned:
            self._warned = True
            log.warning("Live updates for session %s are paused: the channel layer is "
                        "unreachable (%s). Events are still stored; open pages catch up "
                        "when they reconnect.", self.session_pk, exc)

    def _send_ok(self) -> None:
        if self._warned:
            self._warned = False
            log.info("Live updates for session %s resumed.", self.session_pk)
