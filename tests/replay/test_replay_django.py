"""Replays as sessions of their own: created, run by the worker task, compared (feature E2)."""
import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from taskos.replays.compare import compare, first_difference
from taskos.replays.sessions import create_replay, parse_settings
from taskos.runs import services
from taskos.runs.models import Session, SessionEvent
from taskos.worker.execute import execute_session
from taskos.worker.tasks import run_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def recorded(sim_profile, channels_redis_url):
    session = services.create_session(None, "", "sales-report", sim_profile, 16000, {})
    execute_session(session)
    session.refresh_from_db()
    assert session.status == "finished"
    return session


@pytest.mark.parametrize("clearing", [False, True], ids=["summaries", "clears"])
def test_a_replay_with_its_own_settings_reproduces_every_request(sim_profile,
                                                                 channels_redis_url, clearing):
    # With clearing on, this window clears old tool results and needs no summary.
    recorded = services.create_session(None, "", "sales-report", sim_profile, 16000,
                                       {"clear_tool_results": clearing})
    execute_session(recorded)
    recorded.refresh_from_db()
    assert recorded.status == "finished"
    replay = create_replay(recorded, None)
    run_session.apply(args=[replay.pk])  # what the worker does with a queued replay
    replay.refresh_from_db()
    assert replay.status == "finished" and replay.replay_of == recorded
    # The same contexts call by call; each run's archive refs are its own, so the bytes
    # differ there and the comparison says so rather than "identical".
    first = first_difference(recorded, replay)
    assert first is None or first["kind"] == "refs", first
    report = compare(recorded, [replay])["replays"][0]
    assert all(d.get("delta", 0) == 0 for d in report["differences"].values())
    summaries = SessionEvent.objects.filter(session=replay, type="MODEL_CALL",
                                            payload__kind="summary").count()
    clears = SessionEvent.objects.filter(session=replay, type="COMPACTION",
                                         payload__kind="clear").count()
    if clearing:
        assert clears > 0 and clears == SessionEvent.objects.filter(
            session=recorded, type="COMPACTION", payload__kind="clear").count()
    else:
        assert summaries > 0  # the summaries were asked for again, not copied


def test_the_command_replays_in_a_smaller_window_and_reports_the_differences(recorded):
    out = StringIO()
    call_command("replay", recorded.pk, "--set", "window=8000", "--set", "trigger_ratio=0.6",
                 "--json", stdout=out, stderr=StringIO())
    report = json.loads(out.getvalue())
    for key in ("status", "turns", "model_calls", "total_input_tokens", "peak_input_tokens",
                "compactions", "over_window_requests", "anchor_survival", "engine_ms_per_call"):
        assert key in report  # the runtask keys
    diff = report["differences"]
    assert diff["compactions"]["replay"] > diff["compactions"]["source"]
    assert diff["anchor_survival"]["replay"] == 1.0
    assert report["first_difference"]["turn"] >= 0
    replay = Session.objects.get(pk=report["session"])
    assert replay.window == 8000 and replay.context_settings["trigger_ratio"] == 0.6


def test_settings_and_sources_a_replay_refuses_say_why(recorded, sim_profile):
    with pytest.raises(services.SessionError, match="Unknown setting 'trigger'"):
        parse_settings(["trigger=0.6"])
    with pytest.raises(services.SessionError, match="needs a float"):
        parse_settings(["trigger_ratio=high"])
    with pytest.raises(services.SessionError, match="trigger_ratio must be"):
        create_replay(recorded, None, {"trigger_ratio": 1.0})
    running = services.create_session(None, "", "sales-report", sim_profile, None, {})
    with pytest.raises(services.SessionError, match="still queued"):
        create_replay(running, None)
    with pytest.raises(CommandError, match="No session #999999"):
        call_command("replay", 999999, stdout=StringIO(), stderr=StringIO())


def test_a_session_recorded_without_answers_cannot_be_replayed(recorded):
    for event in SessionEvent.objects.filter(session=recorded, type="MODEL_CALL"):
        event.payload.pop("reply")
        event.save()
    with pytest.raises(services.SessionError, match="before TaskOS stored the model's answers"):
        create_replay(recorded, None)


@pytest.fixture
def delegated(sim_profile, channels_redis_url):
    """research-subagents recorded headless: a parent and its three finished sub-agents."""
    from taskos.worker.execute import execute_tree
    session = services.create_session(None, "", "research-subagents", sim_profile, None, {})
    execute_tree(session)
    session.refresh_from_db()
    assert session.status == "finished" and session.children.count() == 3
    return session


def test_a_session_that_delegated_replays_with_its_sub_agents_answers_reused(delegated):
    children = list(delegated.children.order_by("id"))
    replay = create_replay(delegated, None)
    run_session.apply(args=[replay.pk])  # the worker's task: no waiting, nothing sent
    replay.refresh_from_db()
    assert replay.status == "finished" and replay.final_answer == delegated.final_answer
    assert not replay.children.exists()  # no sub-agent ran again
    assert Session.objects.count() == 5  # the parent, its three children, the replay
    first = first_difference(delegated, replay)  # the same requests, call by call
    assert first is None or first["kind"] == "refs", first
    report = compare(delegated, [replay])["replays"][0]
    assert [r["child"] for r in report["reused_children"]] == [str(c.pk) for c in children]
    assert [r["recorded_input_tokens"] for r in report["reused_children"]] == [
        c.total_input_tokens for c in children]
    assert report["differences"]["total_input_tokens"]["delta"] == 0
    # The replay's cost is its own calls', not the sub-agents' again.
    assert replay.cost_with_children() == replay.cost == delegated.cost
    waits = SessionEvent.objects.filter(session=replay, type="SESSION_WAITING").count()
    assert waits == 1  # where the recorded parent waited; the replay went on at once


def test_the_command_replays_a_delegating_session_in_a_smaller_window(delegated):
    out = StringIO()
    call_command("replay", delegated.pk, "--set", "window=2000", "--json", stdout=out,
                 stderr=StringIO())
    report = json.loads(out.getvalue())
    assert report["status"] == "finished" and report["anchor_survival"] == 1.0
    assert report["over_window_requests"] == 0
    diff = report["differences"]
    assert diff["compactions"]["replay"] > diff["compactions"]["source"]
    assert diff["summary_calls"]["replay"] >= 1
    assert [r["reused"] for r in report["reused_children"]] == [True] * 3
    assert report["first_difference"] is not None
