"""A resumed turn starts from the anchors of the last committed turn (found by the chaos run).

A worker killed after a turn saved its anchors but before the turn committed left them
behind: the re-run found its new anchors already there and the old ones already retired,
reported neither, and the session's ANCHOR_CHANGED events differed from an uninterrupted run.
"""
from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from taskos.ops.chaos.scenario import write_chaos_scenario
from taskos.runs import services
from taskos.runs.models import Anchor, Session, SessionEvent
from taskos.store.django_store import DjangoStore
from taskos.worker.tasks import run_session

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channels_redis_url")]

KILLED_TURN = 8  # tool anchors are both added and retired (more than 10 active) by then


class WorkerKilled(BaseException):
    """Stands in for SIGKILL."""


def anchor_events(session):
    return [(e.turn, e.payload.get("action"), e.payload.get("tier"), e.payload.get("old"),
             e.payload.get("new"))
            for e in SessionEvent.objects.filter(session=session, type="ANCHOR_CHANGED")]


def active_anchors(session):
    return sorted(Anchor.objects.filter(session=session, active=True).values_list(
        "tier", "text", "turn"))


def test_a_resumed_turn_adds_and_retires_its_anchors_again(sim_profile, monkeypatch, tmp_path):
    scenario = write_chaos_scenario(tmp_path, 14)
    reference = services.create_session(None, "", scenario, sim_profile, None, {})
    run_session.apply(args=[reference.pk])

    session = services.create_session(None, "", scenario, sim_profile, None, {})
    original = DjangoStore.save_state

    def killed_at_commit(self, session_id, state):
        if state["turn"] == KILLED_TURN + 1:  # the turn saved its anchors, then died
            getattr(self, "commit_batch", lambda: None)()  # its writes committed, not its state
            raise WorkerKilled
        original(self, session_id, state)

    monkeypatch.setattr(DjangoStore, "save_state", killed_at_commit)
    with pytest.raises(WorkerKilled):
        run_session.apply(args=[session.pk], throw=True)
    dying = SessionEvent.objects.filter(session=session, type="ANCHOR_CHANGED",
                                        turn=KILLED_TURN)
    assert {e.payload["action"] for e in dying} >= {"added", "removed"}
    monkeypatch.setattr(DjangoStore, "save_state", original)
    Session.objects.filter(pk=session.pk).update(
        lease_expires=timezone.now() - dt.timedelta(seconds=1))

    run_session.apply(args=[session.pk])  # the redelivered message
    session.refresh_from_db()
    reference.refresh_from_db()
    assert session.status == reference.status == "finished"
    assert anchor_events(session) == anchor_events(reference)
    assert active_anchors(session) == active_anchors(reference)
    # and no event says a person edited anything
    assert not SessionEvent.objects.filter(session=session, type="ANCHOR_CHANGED",
                                           payload__source="admin").exists()
