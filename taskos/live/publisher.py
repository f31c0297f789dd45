"""The engine's event sink in the web app: store every event, then stream it (SPEC W5).

Contract with the websocket consumer: group `session.<pk>`, message
{"type": "session.event", "event": Event.to_dict()}. The database row is written first
and is the truth; a browser that missed a message resyncs from it.
"""
from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import threading
import time

from channels.layers import get_channel_layer
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Max, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from agents.events import Event, EventType
from taskos.runs.models import Session, SessionEvent

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


def _event_time(event: Event) -> dt.datetime:
    try:
        at = dt.datetime.fromisoformat(event.at)
    except (TypeError, ValueError):
        return timezone.now()
    return at if at.tzinfo else at.replace(tzinfo=dt.timezone.utc)


class ChannelsPublisher:
    """EventSink for one session: SessionEvent row first, then the channel layer."""

    def __init__(self, session: Session | int | str) -> None:
        self.session_pk = session.pk if isinstance(session, Session) else int(session)
        self._seq = self._stored_max_seq()
        self._layer = get_channel_layer()
        self._send_blocked_until = 0.0
        self._warned = False

    def _stored_max_seq(self) -> int:
        # Discarded rows count too: a seq a browser has seen is never given out again.
        return SessionEvent.all_objects.filter(session_id=self.session_pk).aggregate(
            top=Max("seq"))["top"] or 0

    def discard_after(self, seq: int) -> int:
        """Mark the events after `seq` (an uncommitted turn's) discarded; fix the counters."""
        with transaction.atomic():
            count = SessionEvent.objects.filter(session_id=self.session_pk,
                                                seq__gt=seq).update(discarded=True)
            if count:
                self._recount_session()
        self._seq = max(self._seq, self._stored_max_seq())
        return count

    def _recount_session(self) -> None:
        """The dashboard counters from the live MODEL_CALL and COMPACTION events."""
        live = SessionEvent.objects.filter(session_id=self.session_pk)
        calls = live.filter(type=str(EventType.MODEL_CALL)).values_list(
            "payload__input_tokens", "payload__cost")
        inputs = [int(tokens or 0) for tokens, _ in calls]
        noops = live.filter(type=str(EventType.COMPACTION)).values_list("payload__noop",
                                                                         flat=True)
        Session.objects.filter(pk=self.session_pk).update(
            total_input_tokens=sum(inputs), peak_input_tokens=max(inputs, default=0),
            cost=sum(float(cost or 0) for _, cost in calls),
            compactions=sum(1 for noop in noops if not noop))

    def emit(self, event: Event) -> None:
        event.session_id = str(self.session_pk)
        with transaction.atomic():
            if connection.vendor == "postgresql":
                # The event log does not wait for its own disk flush (SQLite in WAL mode
                # with synchronous=NORMAL behaves the same): a power loss may drop the last
                # instant of events, never corrupt them; the engine state and the archive
                # keep synchronous commits. Saves a flush per event.
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL synchronous_commit TO OFF")
            self._store(event)
            self._update_session(event)
        self._send(event)

    def _store(self, event: Event) -> None:
        for _ in range(5):
            event.seq = self._seq + 1
            try:
                with transaction.atomic():
                    SessionEvent.objects.create(
                        session_id=self.session_pk, seq=event.seq, type=str(event.type),
                        payload=event.payload, turn=event.turn or 0, at=_event_time(event))
            except IntegrityError:
                # Another publisher (a redelivered task overlapping the old one) took this
                # seq; continue after whatever is stored now.
                self._seq = self._stored_max_seq()
                continue
            self._seq = event.seq
            return
        raise RuntimeError(f"Could not store event {event.type} for session {self.session_pk}: "
                           "the sequence number kept clashing with another writer")

    def _update_session(self, event: Event) -> None:
        """Keep the dashboard's counters live; SESSION_FINISHED carries the final figures."""
        payload = event.payload or {}
        sessions = Session.objects.filter(pk=self.session_pk)
        if event.type == EventType.SESSION_STARTED:
            sessions.filter(started_at__isnull=True).update(started_at=timezone.now())
            sessions.filter(status=Session.Status.QUEUED).update(status=Session.Status.RUNNING)
        elif event.type == EventType.MODEL_CALL:
            tokens = int(payload.get("input_tokens") or 0)
            sessions.update(total_input_tokens=F("total_input_tokens") + tokens,
                            peak_input_tokens=Greatest(F("peak_input_tokens"), Value(tokens)),
                            turns=Greatest(F("turns"), Value(int(event.turn or 0))),
                            cost=F("cost") + float(payload.get("cost") or 0))
        elif event.type == EventType.COMPACTION and not payload.get("noop"):
            sessions.update(compactions=F("compactions") + 1)
        elif event.type == EventType.SESSION_FINISHED:
            status = payload.get("status")
            values = {name: payload[name] for name in
                      ("turns", "total_input_tokens", "peak_input_tokens", "compactions")
                      if isinstance(payload.get(name), int)}
            if status in Session.Status.values:
                values["status"] = status
            if isinstance(payload.get("final_answer"), str):
                values["final_answer"] = payload["final_answer"]
            if status in {"finished", "failed", "cancelled"}:
                values["finished_at"] = timezone.now()
            sessions.update(**values)

    def _send(self, event: Event) -> None:
        if self._layer is None or time.monotonic() < self._send_blocked_until:
            return
        message = {"type": "session.event", "event": event.to_dict()}
        try:
            _SendLoop.run(self._layer.group_send(group_name(self.session_pk), message),
                          SEND_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - any transport failure: keep storing
            self._send_blocked_until = time.monotonic() + SEND_RETRY_AFTER_S
            if not self._warned:
                self._warned = True
                log.warning("Live updates for session %s are paused: the channel layer is "
                            "unreachable (%s). Events are still stored; open pages catch up "
                            "when they reconnect.", self.session_pk, exc)
            return
        if self._warned:
            self._warned = False
            log.info("Live updates for session %s resumed.", self.session_pk)
