"""Announcing a session's stored events to its channel-layer group.

Contract with the websocket consumer (consumer.py): group `session.<pk>`, message
{"type": "session.event", "event": Event.to_dict()}, a MODEL_CALL's payload without its
messages. The database row is the truth (the event log, taskos/store/event_log.py, calls
`GroupSender.announce` after its commit); a page that missed a message resyncs from it,
so a failed send pauses streaming for a while instead of failing the run.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import time

from channels.layers import get_channel_layer

from agents import Event, EventType

log = logging.getLogger("taskos.live")

# After a failed send, skip streaming for this long instead of paying a connection
# attempt on every event while Redis is down.
SEND_RETRY_AFTER_S = 5.0
SEND_TIMEOUT_S = 10.0
# Each announcement tells the pages "events up to this seq are stored"; they read the events
# themselves from the database (taskos/live/consumer.py) and re-render at most every 0.25 s.
# So a session announces at most once per this interval: a newer announcement replaces one
# still waiting (it covers it). Each group_send costs the send thread ~0.5 ms of Python,
# which a fast run's engine paid through the GIL twice a turn.
ANNOUNCE_INTERVAL_S = 0.1


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


def event_message(event: Event) -> dict:
    """What the group gets: pages re-read the stored rows, so a call's prompt is not
    sent (it may be hundreds of kB); its seq, type and figures are. Shallow: the
    payload is not copied (asdict would deep-copy every message of a call)."""
    data = event.to_dict()
    if event.type == EventType.MODEL_CALL:
        data["payload"] = {k: v for k, v in data["payload"].items() if k != "messages"}
    return {"type": "session.event", "event": data}


class GroupSender:
    """Announces a session's newest stored event, at most once per ANNOUNCE_INTERVAL_S.

    `send(..., wait=False)` (the engine's batches, after their commit) returns at once: the
    message goes out now if the interval since the last announcement has passed, else at
    its end, replacing any message still waiting there. `send(..., wait=True)` (single
    events, the session's last ones, after which this worker moves on) goes out at once and
    is waited for (bounded by SEND_TIMEOUT_S). Two sends may overlap on the wire; a page
    drops an announcement older than what it already synced.
    """

    def __init__(self, session_pk: int) -> None:
        self.session_pk = session_pk
        self._layer = get_channel_layer()
        self._send_blocked_until = 0.0
        self._warned = False
        self._lock = threading.Lock()  # the engine's thread and the send loop's share these
        self._waiting: dict | None = None  # the newest message not sent yet
        self._scheduled: concurrent.futures.Future | None = None  # the newest send scheduled
        # True from scheduling a send until it takes the waiting message. A send that has
        # taken its message may still be on the wire: a newer message then needs its own
        # send, or it would wait until the session's next announcement.
        self._send_will_take = False
        self._last_sent = float("-inf")

    def announce(self, event: Event, wait: bool) -> None:
        """The event log's announcer (taskos/store/event_log.py): every event of the session
        up to `event` is stored and committed."""
        self.send([event_message(event)], wait=wait)

    def send(self, messages: list[dict], wait: bool = True) -> None:
        if not messages or self._layer is None or time.monotonic() < self._send_blocked_until:
            return
        with self._lock:
            self._waiting = messages[-1]  # the newest covers every one before it
            if not wait and self._send_will_take:
                return  # the send already scheduled will carry it
            delay = 0.0 if wait else self._last_sent + ANNOUNCE_INTERVAL_S - time.monotonic()
            self._send_will_take = True
            future = self._scheduled = _SendLoop.submit(self._send_waiting(max(0.0, delay)))
        future.add_done_callback(self._done)
        if wait:
            self._wait_for(future)

    def drain(self) -> None:
        """Wait until the scheduled announcement was sent or failed."""
        future = self._scheduled
        if future is not None:
            self._wait_for(future)

    async def _send_waiting(self, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        with self._lock:
            message, self._waiting = self._waiting, None
            self._send_will_take = False
            if message is not None:
                self._last_sent = time.monotonic()
        if message is not None:  # None: a send that did not wait carried it already
            await asyncio.wait_for(self._layer.group_send(group_name(self.session_pk), message),
                                   SEND_TIMEOUT_S)

    def _wait_for(self, future: concurrent.futures.Future) -> None:
        try:
            future.result(SEND_TIMEOUT_S * 2)
        except Exception:  # noqa: BLE001 - reported by _done; a hung send is given up
            if not future.done():
                future.cancel()
                self._send_failed(TimeoutError("the channel layer did not answer"))

    def _done(self, future: concurrent.futures.Future) -> None:
        with self._lock:
            if future is self._scheduled:  # a send cancelled before it took its message
                self._send_will_take = False
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
