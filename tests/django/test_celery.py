"""The Celery task with a real worker on a real Redis broker (features T1, W5)."""
import contextlib
import time

import pytest
from celery.contrib.testing.worker import start_worker
from celery.signals import task_postrun
from django.db import connections

from taskos.celery import app
from taskos.runs import services
from taskos.runs.models import Session, SessionEvent
from taskos.worker.tasks import run_session

pytestmark = pytest.mark.django_db(transaction=True)


def _close_worker_connections(**kwargs):
    # The worker thread's own database connection must not outlive the test (PostgreSQL
    # refuses to drop the test database while it is open).
    connections.close_all()


@contextlib.contextmanager
def on_broker(broker_url: str):
    """The app sends to (and its workers read from) `broker_url` meanwhile."""
    saved = (app.conf.broker_url, app.conf.result_backend)
    app.conf.broker_url = app.conf.result_backend = broker_url
    # Forget connections made with another broker URL: the connection pool and the
    # producer pool, which keeps its own (a task sent earlier in the process through
    # the default broker left one, and this worker's tasks went there).
    app._pool = None
    app.amqp._producer_pool = None
    task_postrun.connect(_close_worker_connections, weak=False)
    try:
        yield app
    finally:
        task_postrun.disconnect(_close_worker_connections)
        app.conf.broker_url, app.conf.result_backend = saved
        app._pool = None
        app.amqp._producer_pool = None


def solo_worker():
    """A real worker in this process, one task at a time, on the app's broker."""
    return start_worker(app, pool="solo", perform_ping_check=False, loglevel="WARNING",
                        shutdown_timeout=60)


@pytest.fixture
def worker(celery_redis_url, channels_redis_url):
    with on_broker(celery_redis_url), solo_worker():
        yield app


def _wait_until_done(pk, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        session = Session.objects.get(pk=pk)
        if not session.is_active:
            return session
        time.sleep(0.2)
    raise AssertionError(f"session {pk} still {Session.objects.get(pk=pk).status} "
                         f"after {timeout} s")


def test_worker_runs_a_scenario_to_the_end_with_its_events_stored(worker, sim_profile):
    session = services.create_session(None, "", "retrieval-6x1600", sim_profile, None, {})
    services.start_session(session)  # autocommit: enqueued at once
    done = _wait_until_done(session.pk)
    assert done.status == "finished", done.error
    assert done.final_answer and done.turns >= 6
    assert done.celery_task_id and done.started_at and done.finished_at
    assert done.compactions >= 1 and done.peak_input_tokens <= done.window
    types = list(SessionEvent.objects.filter(session=done).values_list("type", flat=True))
    assert types[0] == "SESSION_STARTED" and types[-1] == "SESSION_FINISHED"
    assert {"BUDGET", "MODEL_CALL", "TOOL_CALL", "TOOL_RESULT", "COMPACTION"} <= set(types)
    assert done.archive.count() > 0  # raw tool results went to the archive
    assert done.workspace.is_dir()  # the engine worked in the session's own folder


def test_an_engine_crash_fails_the_session_with_an_error_event(worker, sim_profile, monkeypatch):
    import agents
    from agents.events import event_from

    def crash(spec, **kwargs):
        kwargs["events"].emit(event_from("SESSION_STARTED", payload={}))
        raise RuntimeError("disk full")

    monkeypatch.setattr(agents, "run_session", crash)
    session = services.create_session(None, "", "retrieval-6x1600", sim_profile, None, {})
    services.start_session(session)
    done = _wait_until_done(session.pk)
    assert done.status == "failed" and "RuntimeError: disk full" in done.error
    events = list(SessionEvent.objects.filter(session=done).values_list("type", "payload"))
    assert events[0][0] == "SESSION_STARTED"  # what was saved before the crash stays
    assert events[-1][0] == "ERROR" and events[-1][1]["fatal"] is True
    assert "disk full" in events[-1][1]["message"]


def test_a_redelivered_task_resumes_a_running_session_and_skips_a_finished_one(
        sim_profile, channels_redis_url, monkeypatch):
    session = services.create_session(None, "", "retrieval-6x1600", sim_profile, None, {})
    Session.objects.filter(pk=session.pk).update(status="running")  # worker died mid-run
    run_session.apply(args=[session.pk])  # what the redelivered message does
    session.refresh_from_db()
    assert session.status == "finished"
    import agents
    monkeypatch.setattr(agents, "run_session",
                        lambda *a, **kw: pytest.fail("a finished session must not run again"))
    assert run_session.apply(args=[session.pk]).get() == {"status": "finished"}


def test_a_session_cancelled_while_queued_never_starts(sim_profile, monkeypatch):
    import agents
    monkeypatch.setattr(agents, "run_session",
                        lambda *a, **kw: pytest.fail("a cancelled session must not run"))
    session = services.create_session(None, "", "retrieval-6x1600", sim_profile, None, {})
    services.request_cancel(session)
    assert run_session.apply(args=[session.pk]).get() == {"status": "cancelled"}


class WorkerKilled(BaseException):
    """Stands in for SIGKILL: not an Exception, so nothing marks the session failed."""


def test_a_session_killed_mid_run_resumes_from_its_saved_state(sim_profile, channels_redis_url,
                                                               monkeypatch):
    from taskos.store.django_store import DjangoStore
    save_state, commit_batch = DjangoStore.save_state, DjangoStore.commit_batch
    saved = []

    def records(self, session_id, state):
        save_state(self, session_id, state)
        saved.append(state)

    def dies_once_the_fourth_turn_is_committed(self, durable=False):
        commit_batch(self, durable)  # the next wait's commit carries the saved state
        if len(saved) == 4:
            raise WorkerKilled

    monkeypatch.setattr(DjangoStore, "save_state", records)
    monkeypatch.setattr(DjangoStore, "commit_batch", dies_once_the_fourth_turn_is_committed)
    session = services.create_session(None, "", "sales-report", sim_profile, None, {})
    with pytest.raises(WorkerKilled):
        run_session.apply(args=[session.pk], throw=True)
    session.refresh_from_db()
    assert session.status == "running" and session.engine_state["turn"] == 4
    monkeypatch.setattr(DjangoStore, "save_state", save_state)
    monkeypatch.setattr(DjangoStore, "commit_batch", commit_batch)

    run_session.apply(args=[session.pk])  # the redelivered message
    session.refresh_from_db()
    assert session.status == "finished" and session.final_answer
    started = list(session.events.filter(type="SESSION_STARTED")
                   .values_list("payload__resumed", flat=True))
    assert started == [False, True]
    from taskos.runs.models import SessionEvent
    every = SessionEvent.all_objects.filter(session=session)
    seqs = list(every.values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))  # one unbroken event log across both runs
    # What the fifth turn had committed with the fourth's state is marked discarded: that
    # turn ran again. Nothing of the four saved turns is.
    assert set(every.filter(discarded=True).values_list("turn", flat=True)) == {4}


def test_up_queues_the_interrupted_sessions_again_for_a_worker(worker, sim_profile,
                                                              celery_redis_url):
    """`up` after a stop whose Redis took the queue along: every active session is sent
    again, by task name, and a worker runs it."""
    from taskos.ops.management.commands.up import resume_interrupted

    session = services.create_session(None, "", "sales-report", sim_profile, None, {})
    assert resume_interrupted(celery_redis_url) == 1
    done = _wait_until_done(session.pk)
    assert done.status == "finished", done.error
    assert done.enqueued_at and done.celery_task_id
