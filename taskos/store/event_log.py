"""The event log: the engine's event sink over the ORM, every event a SessionEvent row
(feature W5).

The database row is written first and is the truth; once committed, the newest stored
event is handed to an announcer (the worker gives it the live pages' group sender,
taskos/live/sending.py), and a browser that missed an announcement resyncs from the rows.
"""
from __future__ import annotations

import datetime as dt
import logging
from typing import Callable

from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.utils import timezone

from agents import (Compaction, Event, EventType, ModelCall, SessionFinished, storable_text,
                    storable_value)
from taskos.runs.models import Session, SessionEvent, event_figures

from . import batch_writes, turn_sql
from .call_messages import CallCompactor
from .storage_errors import storage_problem
from .stored_events import select

log = logging.getLogger("taskos.live")

# announce(event, wait): tell whoever follows the session that every event up to this
# one's seq is stored; `wait` when the sender should not return before it went out.
Announce = Callable[[Event, bool], None]

# After these the session's worker stops or runs another session: nothing stays queued.
LAST_EVENTS = (EventType.SESSION_FINISHED, EventType.SESSION_WAITING)


def _event_time(event: Event) -> dt.datetime:
    try:
        at = dt.datetime.fromisoformat(event.at)
    except (TypeError, ValueError):
        return timezone.now()
    return at if at.tzinfo else at.replace(tzinfo=dt.timezone.utc)


class EventLog:
    """EventSink for one session: SessionEvent row first, then `announce` after the commit.

    Between `hold()` and `release()` (the engine's commit points, agents/loop/commits.py)
    events get their seq at once but are stored by `flush()`: one bulk insert and one
    counter update in the caller's transaction, sent after its commit in one hop to the
    send loop. A MODEL_CALL is stored as what is new since the previous
    call (taskos/store/call_messages.py).
    """

    def __init__(self, session: Session | int | str, announce: Announce, lease=None) -> None:
        self.session_pk = session.pk if isinstance(session, Session) else int(session)
        # The executor's lease (taskos/worker/lease.py): an event stored outside the engine's
        # batch is fenced by it in its own transaction; a batch's are fenced at its commit
        # (taskos/store/django_store.py).
        self.lease = lease
        self._seq = self._stored_max_seq()
        self._announce = announce
        self._held: list[Event] | None = None  # None: events are stored as they come
        self._unannounced: Event | None = None  # stored and committed, not sent yet
        # MODEL_CALLs stored in the caller's open transaction: a paid call stays on record
        # when that transaction rolls back (drop_held).
        self._calls_uncommitted: list[ModelCall] = []
        self._calls = CallCompactor(self.session_pk)

    # --- batches
    def hold(self) -> None:
        if self._held is None:
            self._held = []

    def release(self) -> None:
        self.flush(announce=False)
        self._held = None

    def drop_held(self) -> None:
        """The transaction the held events were for rolled back: they never existed, but
        for the model calls among them, which were paid for: those are stored again, each
        on its own, numbered after what is stored (a resume marks them discarded with the
        rest of the turn they belonged to)."""
        calls = self._calls_uncommitted + [e for e in self._held or []
                                           if isinstance(e, ModelCall)]
        self._held, self._calls_uncommitted = None, []
        self._calls.forget()
        self._seq = self._stored_max_seq()
        if self.lease is not None and self.lease.lost:
            return  # the session is another executor's now: its record is the one kept
        for event in calls:
            try:
                self.emit(event)
            except Exception as exc:  # noqa: BLE001 - the rollback's own cause is what is raised
                if self.lease is not None and self.lease.lost:
                    return
                problem = storage_problem(exc)
                if problem is not None:  # a full disk: one line (issue 25 item 7)
                    log.warning("Session %s: could not keep the record of model call %s after "
                                "its turn rolled back: %s", self.session_pk, event.call,
                                problem.what())
                    return
                log.exception("Session %s: could not keep the record of model call %s after "
                              "its turn rolled back", self.session_pk, event.call)
                return

    def flush(self, announce: bool = True) -> None:
        """Store the held events in one go, in the caller's transaction; send after commit.
        Not `announce`d (agents/loop/commits.py), the batch's newest event is sent with the next
        announced batch or event instead — or alone, when nothing newer came: its seq
        covers every event stored before it."""
        events = self._held or []
        if not events:
            if announce and self._unannounced is not None:
                self._send_many([self._unannounced], wait=False)
            return
        self._held = []
        # Inside the engine's batch no savepoint of its own (a statement pair saved): an
        # error rolls the batch back as a whole.
        with transaction.atomic(savepoint=False):
            self._store_many(events)
            self._update_counters(events)
        calls = [e for e in events if isinstance(e, ModelCall)]
        if calls:
            self._calls_uncommitted += calls
            transaction.on_commit(self._calls_uncommitted.clear)
        if announce or any(e.type in LAST_EVENTS for e in events):
            transaction.on_commit(lambda: self._send_many(events, wait=False))
        else:
            transaction.on_commit(lambda: setattr(self, "_unannounced", events[-1]))

    def _store_many(self, events: list[Event]) -> None:
        writes = batch_writes.for_connection()
        if writes.active:
            # Sent with the batch's other writes. A seq another executor took fails the
            # commit instead of being renumbered here (taskos/store/django_store.py commit_batch).
            with writes.writing():
                self._insert(events, returning=False)
            return
        saved = self._calls.state()
        for _ in range(5):
            stored = self._insert(events)
            if len(stored) == len(events):
                return
            # Another event log (an executor that lost its lease) took some of these
            # numbers: take back the rows that went in and number the batch after whatever
            # is stored now (the loop reads event.seq back). No savepoint per batch: a
            # clash is rare, and undoing it by hand keeps a turn's transaction whole.
            if stored:
                SessionEvent.all_objects.filter(session_id=self.session_pk,
                                                seq__in=stored).delete()
            self._calls.restore(saved)
            self._seq = self._stored_max_seq()
            for event in events:
                self._seq += 1
                event.seq = self._seq
        raise RuntimeError(f"Could not store {len(events)} events for session "
                           f"{self.session_pk}: the sequence numbers kept clashing")

    def _insert(self, events: list[Event], returning: bool = True) -> list[int]:
        """One INSERT for the batch; the seqs stored (a taken seq is skipped, not an error),
        or, not `returning`, a plain insert that fails on a taken seq and returns [].

        Plain SQL, not bulk_create: Django compiles the same statement anew per batch, and
        on PostgreSQL sends the rows as arrays whose text dump escapes every quote of every
        payload one regex replacement at a time."""
        q, ops = connection.ops.quote_name, connection.ops
        columns = ("session_id", "seq", "type", "payload", "turn", "at", "discarded",
                   "figures")
        params = []
        for e in events:  # the fields' own conversions, minus the field machinery around them
            payload = self._stored_payload(e)
            figures = event_figures(str(e.type), payload)
            params += [self.session_pk, e.seq, str(e.type), ops.adapt_json_value(payload, None),
                       int(e.turn or 0), ops.adapt_datetimefield_value(_event_time(e)), False,
                       None if figures is None else ops.adapt_json_value(figures, None)]
        values = ", ".join(["(" + ", ".join(["%s"] * len(columns)) + ")"] * len(events))
        sql = (f"INSERT INTO {q(SessionEvent._meta.db_table)} "
               f"({', '.join(q(c) for c in columns)}) VALUES {values}")
        with connection.cursor() as cursor:
            if not returning:
                cursor.execute(sql, params)
                return []
            cursor.execute(f"{sql} ON CONFLICT ({q('session_id')}, {q('seq')}) DO NOTHING "
                           f"RETURNING {q('seq')}", params)
            return [row[0] for row in cursor.fetchall()]

    def _stored_payload(self, event: Event) -> dict:
        """The payload as its row holds it: a MODEL_CALL's messages compacted, and every
        string storable (PostgreSQL's jsonb refuses "\\u0000"; agents/storable.py)."""
        if event.type == EventType.MODEL_CALL:
            return storable_value(self._calls.stored(event.seq, event.payload))
        return storable_value(event.payload)

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
        calls = select(live, ModelCall, ("input_tokens", "cost"))
        inputs = [call.input_tokens for call in calls]
        compactions = select(live, Compaction, ("noop",))
        Session.objects.filter(pk=self.session_pk).update(
            total_input_tokens=sum(inputs), peak_input_tokens=max(inputs, default=0),
            cost=sum(float(call.cost) for call in calls),
            compactions=sum(1 for compaction in compactions if not compaction.noop))

    def emit(self, event: Event) -> None:
        event.session_id = str(self.session_pk)
        if self._held is not None:
            self._seq += 1
            event.seq = self._seq
            self._held.append(event)
            return
        with transaction.atomic():
            if self.lease is not None:
                turn_sql.hold_lease(self.lease)
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
                        payload=self._stored_payload(event), turn=event.turn or 0,
                        at=_event_time(event))
            except IntegrityError:
                # Another event log (a redelivered task overlapping the old one) took this
                # seq; continue after whatever is stored now.
                self._seq = self._stored_max_seq()
                self._calls.forget()
                continue
            self._seq = event.seq
            return
        raise RuntimeError(f"Could not store event {event.type} for session {self.session_pk}: "
                           "the sequence number kept clashing with another writer")

    def _update_counters(self, events: list[Event]) -> None:
        """One UPDATE for the calls and compactions of a batch; the rare lifecycle events
        (start, finish) as they are."""
        calls = [e for e in events if isinstance(e, ModelCall)]
        compactions = sum(1 for e in events if isinstance(e, Compaction) and not e.noop)
        if calls or compactions:
            tokens = [e.input_tokens for e in calls] or [0]
            with batch_writes.for_connection().writing():
                turn_sql.add_to_counters(
                    self.session_pk, tokens=sum(tokens), peak=max(tokens),
                    turn=max((int(e.turn or 0) for e in calls), default=0),
                    cost=sum(float(e.cost) for e in calls),
                    compactions=compactions)
        for event in events:
            if event.type in (EventType.SESSION_STARTED, EventType.SESSION_FINISHED):
                self._update_session(event)

    def _update_session(self, event: Event) -> None:
        """Keep the dashboard's counters live; SESSION_FINISHED carries the status, the final
        answer and the turns."""
        sessions = Session.objects.filter(pk=self.session_pk)
        if event.type == EventType.SESSION_STARTED:
            sessions.filter(started_at__isnull=True).update(started_at=timezone.now())
            sessions.filter(status=Session.Status.QUEUED).update(status=Session.Status.RUNNING)
        elif event.type in (EventType.MODEL_CALL, EventType.COMPACTION):
            self._update_counters([event])  # the same statement as a batch's
        elif isinstance(event, SessionFinished):
            status = event.status
            # Its token counters are the calls' (above); the worker stores the run's report.
            values: dict[str, object] = {"turns": event.turns,
                                         "final_answer": storable_text(event.final_answer or "")}
            if status in Session.Status.values:
                values["status"] = status
            if status in Session.FINAL_STATUSES:
                values["finished_at"] = timezone.now()
            sessions.update(**values)

    def _send(self, event: Event) -> None:
        self._send_many([event])

    def _send_many(self, events: list[Event], wait: bool = True) -> None:
        """Announce a committed batch: its newest event only — a page syncs every stored
        event up to that seq from the database (taskos/live/consumer.py), so one message
        per batch carries what ten did. An engine batch's goes out within the announcer's
        interval without being waited for (taskos/live/sending.py GroupSender), except the
        session's last one, after which this worker moves on: that one is sent at once and
        waited for."""
        if not events:
            return
        self._unannounced = None  # the newest event sent: it covers every one before it
        last = any(e.type in LAST_EVENTS for e in events)
        self._announce(events[-1], wait or last)
