"""Orphaned sessions are queued again by every worker, whoever started Redis (issue 9: F3)."""
from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from taskos.runs import services, sweeper
from taskos.runs.models import Session
from taskos.runs.store import DjangoStore
from taskos.runs.tasks import run_session

from .test_celery import _wait_until_done, worker  # noqa: F401 - the real worker fixture

pytestmark = pytest.mark.django_db(transaction=True)

AGO = dt.timedelta(hours=1)


def new_session(sim_profile, **fields):
    session = services.create_session(None, "", "retrieval-6x1600", sim_profile, None, {})
    Session.objects.filter(pk=session.pk).update(**fields)
    return session


def sweep_now(now=None, broker_start=None, monkeypatch=None):
    sent = []
    if monkeypatch is not None:
        monkeypatch.setattr(sweeper, "broker_started", lambda now: broker_start)
    return sweeper.sweep(send=sent.append, now=now), sent


def test_a_running_session_whose_lease_expired_is_sent_again_once(sim_profile, monkeypatch):
    now = timezone.now()
    dead = new_session(sim_profile, status="running", lease_owner="gone:1",
                       lease_expires=now - dt.timedelta(seconds=5), enqueued_at=now - AGO)
    alive = new_session(sim_profile, status="running", lease_owner="busy:2",
                        lease_expires=now + dt.timedelta(seconds=30), enqueued_at=now - AGO)
    done = new_session(sim_profile, status="finished", enqueued_at=now - AGO)
    found, sent = sweep_now(now, None, monkeypatch)
    assert found == sent == [dead.pk]
    assert alive.pk not in sent and done.pk not in sent
    # A second sweep (or another worker's) right after sends nothing more.
    assert sweep_now(now + dt.timedelta(seconds=1), None, monkeypatch)[1] == []


def test_a_queued_session_is_sent_again_only_when_its_message_is_lost(sim_profile, monkeypatch):
    now = timezone.now()
    waiting = new_session(sim_profile, enqueued_at=now - dt.timedelta(seconds=20))
    assert sweep_now(now, now - AGO, monkeypatch)[1] == []  # in the queue, behind others
    # Redis restarted (it keeps nothing on disk) after the message was sent: it is gone.
    assert sweep_now(now, now - dt.timedelta(seconds=10), monkeypatch)[1] == [waiting.pk]
    assert sweep_now(now, now - dt.timedelta(seconds=10), monkeypatch)[1] == []
    # Past the re-send grace a waiting session gets one more message, whatever the broker.
    later = now + sweeper.requeue_after() + dt.timedelta(seconds=1)
    assert sweep_now(later, None, monkeypatch)[1] == [waiting.pk]


def test_a_failed_send_is_tried_again_on_the_next_sweep(sim_profile, monkeypatch):
    now = timezone.now()
    lost = new_session(sim_profile, enqueued_at=now - AGO)
    monkeypatch.setattr(sweeper, "broker_started", lambda now: None)

    def broker_down(pk):
        raise ConnectionError("Redis is down")

    assert sweeper.sweep(send=broker_down, now=now) == []
    assert Session.objects.get(pk=lost.pk).enqueued_at == now - AGO  # not marked as sent
    assert sweep_now(now, None, monkeypatch)[1] == [lost.pk]


def test_broker_start_time_comes_from_the_real_redis(celery_redis_url, settings):
    settings.CELERY_BROKER_URL = celery_redis_url
    now = timezone.now()
    started = sweeper.broker_started(now)
    assert started is not None and started <= now
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    assert sweeper.broker_started(now) is None


class WorkerKilled(BaseException):
    pass


def test_the_worker_sweeper_resumes_a_dead_workers_session(worker, sim_profile, monkeypatch,  # noqa: F811
                                                           settings):
    """External Redis, no `taskos` restart: only the workers' own sweep can recover it."""
    session = new_session(sim_profile)
    original = DjangoStore.save_state

    def killed_in_turn_three(self, session_id, state):
        if state["turn"] == 3:
            raise WorkerKilled
        original(self, session_id, state)

    monkeypatch.setattr(DjangoStore, "save_state", killed_in_turn_three)
    with pytest.raises(WorkerKilled):
        run_session.apply(args=[session.pk], throw=True)
    monkeypatch.setattr(DjangoStore, "save_state", original)
    # SIGKILL releases nothing: the lease is still held and simply stops being renewed.
    Session.objects.filter(pk=session.pk).update(
        lease_owner="killed:1", lease_expires=timezone.now() + dt.timedelta(seconds=1),
        enqueued_at=timezone.now() - AGO)
    assert Session.objects.get(pk=session.pk).status == "running"

    settings.TASKOS_SWEEP_SECONDS = 0.3
    from taskos.celery import start_session_sweeper

    running = start_session_sweeper()
    try:
        done = _wait_until_done(session.pk)
    finally:
        running.stop()
    assert done.status == "finished" and done.final_answer
    assert done.engine_state["turn"] > 3
