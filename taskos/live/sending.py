"""Sending stored events to a session's channel-layer group, in order, a batch per hop.

The database row is the truth (taskos/live/publisher.py); a page that missed a message
resyncs from it, so a failed send pauses streaming for a while instead of failing the run.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
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
# Batches an engine may have on their way before it waits: a turn sends 3–5, so the engine
# runs on while Redis answers, and a held channel layer still holds it a turn or two later.
MAX_IN_FLIGHT = 8


class _SendLoop:
    """One event loop per process, in a daemon thread, for every group_send.

    async_to_sync would make a fresh loop per call, and the Redis layer keeps its
    connections per loop: every event would open and close a connection (~25 ms each).
    """

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None
    _pid = 0

    @classmethod
    def submit(cls, coroutine) -> concurrent.futures.Future:
        with cls._lock:
            if cls._loop is None or cls._pid != os.getpid():  # none yet, or forked
                cls._loop = asyncio.new_event_loop()
                cls._pid = os.getpid()
                threading.Thread(target=cls._loop.run_forever, name="taskos-publisher",
                                 daemon=True).start()
            loop = cls._loop
        return asyncio.run_coroutine_threadsafe(coroutine, loop)

    @classmethod
    def run(cls, coroutine, timeout: float):
        future = cls.submit(coroutine)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise


def group_name(session_id: int | str) -> str:
    return f"session.{session_id}"


class GroupSender:
    """Sends a session's messages, in order, in one hop to the send loop per batch.

    `send(..., wait=False)` (the engine's batches, after their commit) queues the batch
    behind the previous one and returns: the engine does not wait for Redis, the batches
    still arrive in seq order, and with MAX_IN_FLIGHT batches queued the engine waits for
    the oldest (bounded by SEND_TIMEOUT_S), outside any transaction — so a held channel
    layer still holds the engine (the browser tests rely on that to act mid-run).
    `drain()` waits for what is queued (the session's last events, before its worker
    moves on). Single events outside a batch are sent and waited for as before.
    """

    def __init__(self, session_pk: int) -> None:
        self.session_pk = session_pk
        self._layer = get_channel_layer()
        self._send_blocked_until = 0.0
        self._warned = False
        self._in_flight: list[concurrent.futures.Future] = []

    def send(self, messages: list[dict], wait: bool = True) -> None:
        if not messages or self._layer is None or time.monotonic() < self._send_blocked_until:
            return
        group = group_name(self.session_pk)
        self._in_flight = [f for f in self._in_flight if not f.done()]
        previous = self._in_flight[-1] if self._in_flight else None

        async def send_in_order():
            if previous is not None:  # the batch before this one goes out first
                try:
                    await asyncio.wrap_future(previous)
                except BaseException:  # noqa: BLE001 - its failure was reported by its own callback
                    pass
            for message in messages:  # in seq order: the drawer appends as they come
                await asyncio.wait_for(self._layer.group_send(group, message), SEND_TIMEOUT_S)

        future = _SendLoop.submit(send_in_order())
        future.add_done_callback(self._done)
        self._in_flight.append(future)
        if wait:
            self.drain()
        elif len(self._in_flight) > MAX_IN_FLIGHT:
            self._wait_for(self._in_flight[0])

    def drain(self) -> None:
        """Wait until every queued batch was sent or failed."""
        while self._in_flight:
            self._wait_for(self._in_flight[-1])
            self._in_flight = [f for f in self._in_flight if not f.done()]

    def _wait_for(self, future: concurrent.futures.Future) -> None:
        try:
            future.result(SEND_TIMEOUT_S * 2)
        except Exception:  # noqa: BLE001 - reported by _done; a hung send is given up
            if not future.done():
                future.cancel()
                self._send_failed(TimeoutError("the channel layer did not answer"))
                for pending in self._in_flight:
                    pending.cancel()
                self._in_flight = []

    def _done(self, future: concurrent.futures.Future) -> None:
        if future.cancelled():
            return
        exc = future.exception()
        if exc is not None:  # any transport failure: keep storing
            self._send_failed(exc)
        else:
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
