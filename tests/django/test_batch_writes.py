"""A batch's writes kept and sent as one query on PostgreSQL (taskos/store/batch_writes.py): what
runs in between sees them, a rollback drops them, a clash with another executor stops this
one. On other databases they run at once, and the same checks hold."""
from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.events import EventType, event_from
from taskos.runs import services
from taskos.runs.models import ArchivedTurn, Session, SessionEvent
from taskos.store import batch_writes
from taskos.store.django_store import DjangoStore
from taskos.worker.execute import event_sink
from taskos.worker.lease import Lease, LeaseLost

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("channels_redis_url")]

POSTGRES = pytest.mark.skipif("connection.vendor != 'postgresql'")


@pytest.fixture
def session(sim_profile):
    return services.create_session(None, "", "sales-report", sim_profile, None, {})


def test_a_read_in_the_batch_sees_the_writes_kept_before_it(session):
    store, sid = DjangoStore(), str(session.pk)
    store.begin_batch()
    try:
        ref = store.archive(sid, 1, "tool", "east region revenue 4821")
        if connection.vendor == "postgresql":
            assert batch_writes.for_connection()._kept  # not sent yet
        assert store.read_ref(sid, ref) == "east region revenue 4821"  # sent first
        assert not batch_writes.for_connection()._kept
        store.archive(sid, 2, "tool", "kept, then rolled back")
    finally:
        store.rollback_batch(RuntimeError("the turn failed"))
    assert list(ArchivedTurn.objects.filter(session=session).values_list("turn", flat=True)) == []
    assert not batch_writes.for_connection().active


@POSTGRES
def test_a_batchs_writes_go_out_as_one_query_at_the_commit(session):
    store, sid = DjangoStore(), str(session.pk)
    store.archive(sid, 0, "user", "reserve the ids first")  # the id block is read here
    store.begin_batch()
    with CaptureQueriesContext(connection) as queries:
        refs = [store.archive(sid, turn, "tool", f"result {turn}") for turn in (1, 2, 3)]
        store.commit_batch()
    sent = [q["sql"] for q in queries.captured_queries if q["sql"] is not None]
    inserts = [s for s in sent if s.startswith('INSERT INTO "runs_archivedturn"')]
    assert len(inserts) == 1 and inserts[0].count('INSERT INTO "runs_archivedturn"') == 3
    assert [store.read_ref(sid, ref) for ref in refs] == ["result 1", "result 2", "result 3"]


def test_events_clashing_with_a_new_owners_stop_this_executor(session):
    """Another executor took the session over (its lease) and stored the seqs this batch
    wanted: the commit fails, nothing of the batch is stored, and this one stops with
    LeaseLost (the worker leaves the session to the new owner, marking nothing failed)."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite runs one writer at a time: the new owner waits for this batch")
    old = Lease(session.pk, owner="worker-a:1")
    assert old.take()
    store, publisher = DjangoStore(lease=old), event_sink(session)
    publisher.hold()
    store.begin_batch()
    store.archive(str(session.pk), 1, "tool", "the old owner's result")
    publisher.emit(event_from(EventType.TURN_STARTED, {"turn": 1}, turn=1))
    publisher.emit(event_from(EventType.BUDGET, {"window": 8000}, turn=1))

    def new_owner():  # another worker, on its own connection
        try:
            Session.objects.filter(pk=session.pk).update(lease_owner="worker-b:2")
            event_sink(session).emit(event_from(EventType.TURN_STARTED, {"turn": 1}, turn=1))
        finally:
            connection.close()

    worker = threading.Thread(target=new_owner)
    worker.start()
    worker.join(30)
    publisher.flush()
    with pytest.raises(LeaseLost):
        store.commit_batch()
    assert old.lost
    assert list(SessionEvent.all_objects.filter(session=session).values_list("seq", "type")) == [
        (1, "TURN_STARTED")]  # the new owner's only
    assert not ArchivedTurn.objects.filter(session=session).exists()
