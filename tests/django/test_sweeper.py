"""Orphaned sessions are queued again by every worker, whoever started Redis (issue 9: F3)."""
from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from taskos.runs import services
from taskos.runs.models import Session
from taskos.store.django_store import DjangoStore
from taskos.worker import sweeper
from taskos.worker.tasks import run_session

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


def run_until_killed(monkeypatch, session_pk: int, turn: int) -> None:
    """Run the session in this process until it saves the state of `turn`; the worker dies
    there, before that save (as SIGKILL would), and the real save_state is put back."""
    original = DjangoStore.save_state

    def killed(self, session_id, state):
        if int(session_id) == session_pk and state["turn"] == turn:
            raise WorkerKilled
        original(self, session_id, state)

    monkeypatch.setattr(DjangoStore, "save_state", killed)
    with pytest.raises(WorkerKilled):
        run_session.apply(args=[session_pk], throw=True)
    monkeypatch.setattr(DjangoStore, "save_state", original)


def test_the_worker_sweeper_resumes_a_dead_workers_session(worker, sim_profile, monkeypatch,  # noqa: F811
                                                           settings):
    """External Redis, no `taskos` restart: only the workers' own sweep can recover it."""
    session = new_session(sim_profile)
    run_until_killed(monkeypatch, session.pk, turn=3)
    # SIGKILL releases nothing: the lease is still held and simply stops being renewed.
    Session.objects.filter(pk=session.pk).update(
        lease_owner="killed:1", lease_expires=timezone.now() + dt.timedelta(seconds=1),
        enqueued_at=timezone.now() - AGO)
    assert Session.objects.get(pk=session.pk).status == "running"

    settings.TASKOS_SWEEP_SECONDS = 0.3
    from taskos.worker.sweeper import start_session_sweeper

    running = start_session_sweeper()
    try:
        done = _wait_until_done(session.pk)
    finally:
        running.stop()
    assert done.status == "finished" and done.final_answer
    assert done.engine_state["turn"] > 3


def killed_after_delegating(sim_profile, monkeypatch):
    """A research-subagents parent whose worker dies in turn 0 after its three delegate
    calls made their child rows (each one committed), before the turn itself committed."""
    parent = services.create_session(None, "", "research-subagents", sim_profile, None, {})
    run_until_killed(monkeypatch, parent.pk, turn=1)  # at the end of turn 0
    # Long enough ago for any sweep: the dead worker's lease ran out, the rows are old.
    Session.objects.filter(pk=parent.pk).update(
        lease_expires=timezone.now() - dt.timedelta(seconds=1), enqueued_at=timezone.now() - AGO)
    Session.objects.filter(parent=parent).update(created_at=timezone.now() - AGO)
    return parent


def test_children_of_a_turn_that_never_committed_are_not_sent_by_the_sweeper(
        sim_profile, monkeypatch, channels_redis_url):
    parent = killed_after_delegating(sim_profile, monkeypatch)
    children = list(parent.children.values_list("pk", "status", "enqueued_at"))
    assert len(children) == 3 and all(s == "queued" and e is None for _, s, e in children)
    found, sent = sweep_now(None, None, monkeypatch)
    # The parent runs turn 0 again and asks again; a child sent now would run twice.
    assert sent == [parent.pk]
    assert not parent.children.filter(enqueued_at__isnull=False).exists()


def test_a_never_sent_child_of_a_parent_that_ended_is_cancelled_not_run(
        sim_profile, monkeypatch, channels_redis_url):
    parent = killed_after_delegating(sim_profile, monkeypatch)
    Session.objects.filter(pk=parent.pk).update(status="failed", lease_owner="",
                                                lease_expires=None)
    found, sent = sweep_now(None, None, monkeypatch)
    assert sent == []
    statuses = set(parent.children.values_list("status", flat=True))
    assert statuses == {"cancelled"}
    assert all("ended before" in e for e in parent.children.values_list("error", flat=True))


def test_a_parent_killed_after_delegating_gets_each_sub_agent_run_exactly_once(
        worker, sim_profile, monkeypatch):  # noqa: F811
    """The whole path on the real worker: kill, sweep, re-run of turn 0, children, wake."""
    parent = killed_after_delegating(sim_profile, monkeypatch)
    monkeypatch.setattr(sweeper, "broker_started", lambda now: None)
    sweeper.sweep()
    done = _wait_until_done(parent.pk)
    assert done.status == "finished", done.error
    children = list(done.children.order_by("id"))
    assert [c.status for c in children] == ["finished"] * 3
    goals = [c.goal for c in children]
    assert len(set(goals)) == 3  # each sub-task once, none of them twice
    for child in children:  # and each child ran once: one start, never resumed
        starts = child.events.filter(type="SESSION_STARTED").values_list("payload__resumed",
                                                                         flat=True)
        assert list(starts) == [False]
    answered = sorted(p["child"] for p in done.events.filter(
        type="TOOL_RESULT", payload__name="delegate").values_list("payload", flat=True)
        if p.get("child"))
    assert answered == sorted(str(c.pk) for c in children)


@pytest.mark.parametrize("how", ["runtask", "replay"])
def test_a_headless_run_is_never_taken_for_an_orphan_by_a_workers_sweep(
        sim_profile, monkeypatch, channels_redis_url, how):
    """`runtask` and `replay` run in their own process while workers sweep: a sweep in the
    middle of their run must leave them alone, or the session runs twice at once."""
    from io import StringIO

    from django.core.management import call_command

    from taskos.worker.execute import execute_tree
    monkeypatch.setattr(sweeper, "broker_started", lambda now: None)
    swept = []
    original = DjangoStore.save_state

    def sweep_at_turn_three(self, session_id, state):
        original(self, session_id, state)
        if state["turn"] == 3 and not swept:
            # 40 s on: long past the 30 s a never-sent session gets, inside its lease.
            swept.append(sweeper.sweep(send=lambda pk: None,
                                       now=timezone.now() + dt.timedelta(seconds=40)))

    recorded = new_session(sim_profile)
    if how == "replay":
        execute_tree(recorded)
    monkeypatch.setattr(DjangoStore, "save_state", sweep_at_turn_three)
    if how == "runtask":
        execute_tree(recorded)
        ran = recorded
    else:
        call_command("replay", recorded.pk, "--json", stdout=StringIO(), stderr=StringIO())
        ran = Session.objects.get(replay_of=recorded)
    assert swept == [[]]
    ran.refresh_from_db()
    assert ran.status == "finished" and ran.lease_owner == "" and ran.lease_expires is None
    starts = ran.events.filter(type="SESSION_STARTED").count()
    assert starts == 1
