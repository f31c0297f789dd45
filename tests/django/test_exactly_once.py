"""One executor per session, and turns that a dying worker cannot double (issue 9: F1, F8).

A "kill" is a BaseException raised from inside the engine's writes: like SIGKILL, nothing
catches it, nothing marks the session failed, and the lease is left to expire.
"""
from __future__ import annotations

import datetime as dt
import threading
from collections import Counter

import pytest
from django.db import connections
from django.utils import timezone

from taskos.runs import services
from taskos.runs.models import ArchivedTurn, PendingMessage, Session, SessionEvent
from taskos.store.django_store import DjangoStore
from taskos.worker.lease import Lease
from taskos.worker.tasks import run_session

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channels_redis_url")]


class WorkerKilled(BaseException):
    """Stands in for SIGKILL."""


def new_session(sim_profile, scenario="sales-report"):
    return services.create_session(None, "", scenario, sim_profile, None, {})


def expire_lease(session):
    """What a SIGKILLed worker leaves behind: its lease, no longer renewed, runs out."""
    Session.objects.filter(pk=session.pk).update(
        lease_expires=timezone.now() - dt.timedelta(seconds=1))


def tool_rows(session):
    return Counter(ArchivedTurn.objects.filter(session=session, role="tool").values_list(
        "turn", "tool_name", "content"))


def call_numbers(session):
    return list(SessionEvent.objects.filter(session=session, type="MODEL_CALL")
                .order_by("seq").values_list("payload__call", flat=True))


def kill_on_save(monkeypatch, when):
    """Kill the worker inside the turn whose state save `when(state)` picks, before it
    commits: everything that turn archived and emitted is written, its state is not."""
    original = DjangoStore.save_state

    def save_state(self, session_id, state):
        if when(state):
            raise WorkerKilled
        original(self, session_id, state)

    monkeypatch.setattr(DjangoStore, "save_state", save_state)
    return original


def test_a_second_delivery_exits_while_the_first_holds_the_lease(sim_profile, monkeypatch):
    session = new_session(sim_profile)
    first = Lease(session.pk, owner="worker-a:1")
    assert first.take()
    import agents
    monkeypatch.setattr(agents, "run_session",
                        lambda *a, **kw: pytest.fail("a second executor must not run the session"))
    assert run_session.apply(args=[session.pk]).get() == {"status": "leased_elsewhere"}
    assert not SessionEvent.all_objects.filter(session=session).exists()
    assert not ArchivedTurn.objects.filter(session=session).exists()
    session.refresh_from_db()
    assert session.lease_owner == "worker-a:1"  # the holder keeps it


def test_a_redelivery_during_a_run_neither_runs_nor_duplicates_anything(sim_profile):
    """Broker redelivery (visibility timeout) while the first delivery is mid-session."""
    reference = new_session(sim_profile)
    run_session.apply(args=[reference.pk])

    session = new_session(sim_profile)
    in_turn_three, go_on = threading.Event(), threading.Event()
    original, original_commit = DjangoStore.save_state, DjangoStore.commit_batch
    saved = []

    def save(self, session_id, state):
        original(self, session_id, state)
        if int(session_id) == session.pk:
            saved.append(state["turn"])

    def slow_wait(self, durable=False):
        original_commit(self, durable)
        if saved == [1, 2, 3] and not in_turn_three.is_set():  # waiting on the model, turn 4
            in_turn_three.set()
            go_on.wait(60)

    DjangoStore.save_state, DjangoStore.commit_batch = save, slow_wait
    try:
        first = threading.Thread(target=lambda: (run_session.apply(args=[session.pk]),
                                                 connections.close_all()))
        first.start()
        assert in_turn_three.wait(60)
        assert run_session.apply(args=[session.pk]).get() == {"status": "leased_elsewhere"}
        go_on.set()
        first.join(120)
    finally:
        DjangoStore.save_state, DjangoStore.commit_batch = original, original_commit
    session.refresh_from_db()
    reference.refresh_from_db()
    assert session.status == reference.status == "finished"
    assert tool_rows(session) == tool_rows(reference)
    assert call_numbers(session) == call_numbers(reference)
    assert session.lease_owner == "" and session.lease_expires is None


def test_an_executor_that_lost_its_lease_stops_without_writing(sim_profile, monkeypatch):
    session = new_session(sim_profile)
    original_save, original_commit = DjangoStore.save_state, DjangoStore.commit_batch
    turn_two_saved = []

    def save_state(self, session_id, state):
        original_save(self, session_id, state)
        turn_two_saved.append(state["turn"] == 2)

    def commit_batch(self, durable=False):
        original_commit(self, durable)
        if any(turn_two_saved) and turn_two_saved[-1]:
            # During turn 3, between two commit points (no transaction open, as another
            # worker's commit would land): the lease expired and another worker took it.
            turn_two_saved.append(False)
            Session.objects.filter(pk=session.pk).update(lease_owner="worker-b:2")

    monkeypatch.setattr(DjangoStore, "save_state", save_state)
    monkeypatch.setattr(DjangoStore, "commit_batch", commit_batch)
    assert run_session.apply(args=[session.pk]).get() == {"status": "lease_lost"}
    session.refresh_from_db()
    assert session.status == "running" and session.lease_owner == "worker-b:2"
    assert session.engine_state["turn"] == 2  # turn 3 was never committed by the old owner


def test_a_turn_killed_before_its_commit_runs_again_without_duplicates(sim_profile,
                                                                        monkeypatch):
    reference = new_session(sim_profile)
    run_session.apply(args=[reference.pk])

    session = new_session(sim_profile)
    original = kill_on_save(monkeypatch, lambda state: state["turn"] == 4)
    with pytest.raises(WorkerKilled):
        run_session.apply(args=[session.pk], throw=True)
    orphan_calls = call_numbers(session)
    assert orphan_calls[-1] not in call_numbers(reference)[:3]  # the killed turn did call
    monkeypatch.setattr(DjangoStore, "save_state", original)
    expire_lease(session)

    run_session.apply(args=[session.pk])  # the redelivered message
    session.refresh_from_db()
    assert session.status == "finished"
    assert tool_rows(session) == tool_rows(reference)  # every tool result archived once
    numbers = call_numbers(session)
    assert numbers == list(range(1, len(numbers) + 1))  # call numbers never repeat
    discarded = SessionEvent.all_objects.filter(session=session, discarded=True)
    assert discarded.filter(type="MODEL_CALL").exists()  # the paid call is still on record
    assert not discarded.filter(type="SESSION_FINISHED").exists()
    for number in numbers:  # /calls/N.json is the committed call, never the orphan
        from taskos.drawer.events import call_payload
        assert call_payload(session, number)["call"] == number
    notice = SessionEvent.objects.filter(session=session, type="ERROR",
                                         payload__code="turn_interrupted").get()
    assert "turn 3" in notice.payload["message"]
    seqs = list(SessionEvent.all_objects.filter(session=session).values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))  # no seq is ever given out twice


def test_a_model_call_stays_on_record_when_its_turn_rolls_back(sim_profile, monkeypatch):
    """The call's MODEL_CALL commits with the next wait's batch; an error before that (here
    archiving the reply fails) rolls the batch back, and the paid call is stored again."""
    session = new_session(sim_profile)
    original = DjangoStore.archive

    def archive(self, session_id, turn, role, content, **kw):
        if role == "assistant" and turn == 2:
            raise RuntimeError("disk full")
        return original(self, session_id, turn, role, content, **kw)

    monkeypatch.setattr(DjangoStore, "archive", archive)
    run_session.apply(args=[session.pk])
    calls = SessionEvent.all_objects.filter(session=session, type="MODEL_CALL")
    assert calls.filter(turn=2).count() == 1  # the call whose reply could not be archived
    assert call_numbers(session) == list(range(1, len(call_numbers(session)) + 1))
    session.refresh_from_db()
    assert session.engine_state["turn"] == 2 and session.status == "failed"
    assert "disk full" in session.error
    seqs = list(SessionEvent.all_objects.filter(session=session).values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))


def test_a_worker_killed_in_turn_zero_archives_the_goal_once(sim_profile, monkeypatch):
    session = new_session(sim_profile)
    original = kill_on_save(monkeypatch, lambda state: state["turn"] == 1)
    with pytest.raises(WorkerKilled):
        run_session.apply(args=[session.pk], throw=True)
    monkeypatch.setattr(DjangoStore, "save_state", original)
    expire_lease(session)
    run_session.apply(args=[session.pk])
    session.refresh_from_db()
    assert session.status == "finished"
    goal_rows = ArchivedTurn.objects.filter(session=session, role="user",
                                            content=session.goal or "")
    assert ArchivedTurn.objects.filter(session=session, turn=0, role="user").count() == 1
    assert goal_rows.count() <= 1
    started = SessionEvent.objects.filter(session=session, type="SESSION_STARTED")
    assert started.count() == 1  # the killed attempt's start is discarded with its turn


def test_a_message_taken_by_a_killed_turn_is_delivered_again(sim_profile, monkeypatch):
    session = new_session(sim_profile)
    PendingMessage.objects.create(session=session, text="Also split by channel, please.")
    original = kill_on_save(monkeypatch, lambda state: state["turn"] == 1)
    with pytest.raises(WorkerKilled):
        run_session.apply(args=[session.pk], throw=True)
    assert PendingMessage.objects.get(session=session).taken  # taken by the dead turn
    monkeypatch.setattr(DjangoStore, "save_state", original)
    expire_lease(session)
    before_resume = SessionEvent.all_objects.filter(session=session).count()
    run_session.apply(args=[session.pk])
    texts = list(SessionEvent.objects.filter(session=session, type="USER_MESSAGE")
                 .values_list("payload__text", flat=True))
    assert texts.count("Also split by channel, please.") == 1
    from taskos.store.call_messages import full_payload
    rows = SessionEvent.objects.filter(session=session, type="MODEL_CALL",
                                       seq__gt=before_resume).values_list("seq", "payload")
    seen_by_model = [payload for seq, payload in rows  # rebuilt: stored by archive ref
                     if any("Also split by channel" in str(m.get("content"))
                            for m in full_payload(session.pk, seq, payload)["messages"])]
    assert seen_by_model  # the re-run turn handed it to the model
    assert ArchivedTurn.objects.filter(session=session,
                                       content="Also split by channel, please.").count() == 1


def test_killed_after_the_final_commit_finishes_without_calling_the_model(sim_profile,
                                                                          monkeypatch):
    session = new_session(sim_profile)
    original = DjangoStore.save_state

    def dies_right_after_committing_the_answer(self, session_id, state):
        original(self, session_id, state)
        if state.get("final_answer"):
            raise WorkerKilled

    monkeypatch.setattr(DjangoStore, "save_state", dies_right_after_committing_the_answer)
    with pytest.raises(WorkerKilled):
        run_session.apply(args=[session.pk], throw=True)
    monkeypatch.setattr(DjangoStore, "save_state", original)
    calls_before = call_numbers(session)
    expire_lease(session)
    run_session.apply(args=[session.pk])
    session.refresh_from_db()
    assert session.status == "finished" and session.final_answer
    assert call_numbers(session) == calls_before


def test_a_worker_frozen_past_its_lease_writes_nothing_when_it_wakes():
    """Issue 25 item 3: worker A freezes in a model call (SIGSTOP, a VM pause: its lease
    heartbeat freezes with it), its lease runs out, worker B takes the session over and
    finishes it; then A wakes with the model's answer. Before the fence it stored that
    call again after SESSION_FINISHED (the rolled-back batch's paid call, re-stored)."""
    from taskos.runs.models import ModelProfile
    from taskos.worker.execute import execute_session
    from tests.engine.fake_provider import FakeProvider

    def record(session):
        events = list(SessionEvent.all_objects.filter(session=session).order_by("seq")
                      .values_list("seq", "type", "discarded"))
        archive = list(ArchivedTurn.objects.filter(session=session).order_by("id")
                       .values_list("id", "turn", "role", "content"))
        return events, archive

    with FakeProvider(script=["tool", "gated_tool", "tool"], default="ok") as provider:
        profile = ModelProfile.objects.create(name="fake", model="m", api_key_env="", local=True,
                                              base_url=provider.base_url, context_size=16_000)
        session = services.create_session(None, "Say hello.", "", profile, None, {})
        frozen = Lease(session.pk, owner="worker-a", seconds=60)
        assert frozen.take()  # no heartbeat: it is frozen with the rest of worker A
        outcome = {}

        def worker_a():
            try:
                outcome["a"] = execute_session(Session.objects.get(pk=session.pk),
                                               lease=frozen)
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion
                outcome["a"] = exc
            finally:
                connections.close_all()

        thread = threading.Thread(target=worker_a, daemon=True)
        thread.start()
        assert provider.gated.wait(60), "worker A never reached its second model call"
        expire_lease(session)
        taker = Lease(session.pk, owner="worker-b", seconds=60)
        assert taker.take()
        report = execute_session(Session.objects.get(pk=session.pk), lease=taker)
        assert report["status"] == "finished"
        before = record(session)
        provider.gate.set()  # worker A wakes with its answer
        thread.join(60)
    assert outcome["a"] == {"status": "lease_lost"}, outcome["a"]
    assert record(session) == before  # not one event or archive row written by A
    session.refresh_from_db()
    assert session.status == "finished" and session.lease_owner == "worker-b"
    last = SessionEvent.objects.filter(session=session).order_by("-seq").first()
    assert last.type == "SESSION_FINISHED"
