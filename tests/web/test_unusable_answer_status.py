"""`unusable_answer` is a final status of its own (feature T1's honest endings): a session
whose model, asked again, still wrote no answer is neither `finished` nor mixed with a
crash's `failed`, and everything that lists final statuses treats it as one."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

import agents
from taskos.replays.compare import stored_report
from taskos.replays.sessions import create_replay
from taskos.runs import services
from taskos.runs.models import ModelProfile, Session
from taskos.worker.execute import execute_session
from taskos.worker.sweeper import cancel_unasked_children
from tests.engine.fake_provider import FakeProvider

pytestmark = pytest.mark.django_db
CSS = Path(__file__).resolve().parents[2] / "static" / "css" / "taskos.css"


def test_the_engine_and_the_model_list_the_same_final_statuses():
    assert tuple(Session.FINAL_STATUSES) == agents.FINAL_STATUSES
    assert "unusable_answer" in Session.Status.values
    assert not set(Session.FINAL_STATUSES) & set(Session.ACTIVE_STATUSES)


def test_every_status_has_its_badge_colour():
    css = CSS.read_text()
    assert all(f".status-{status} {{" in css for status in Session.Status.values)


def test_a_session_of_non_answers_ends_unusable_answer_quoting_them(ann, ann_client):
    """The fake server sends the request's task snapshot back as the answer (an echo of the
    engine's own block) every time: asked again once, the session ends `unusable_answer`."""
    with FakeProvider(default="echo") as provider:
        profile = ModelProfile.objects.create(
            name="echoing", model="fake-model", base_url=provider.base_url, api_key_env="",
            local=True, context_size=16_000)
        session = services.create_session(ann, "List the files, then say hello.", "",
                                          profile, None, {})
        report = execute_session(session)
    session.refresh_from_db()
    assert report["status"] == "unusable_answer" == session.status
    assert report["error_code"] == "unusable_answer"
    assert session.final_answer == "" and session.finished_at is not None
    assert session.error.startswith("unusable_answer: the model's answer was not accepted")
    assert "What to do:" in session.error
    assert not session.is_active

    page = ann_client.get(f"/sessions/{session.pk}/").content.decode()
    assert 'class="status status-unusable_answer" data-status="unusable_answer" ' \
           'data-ended="true"' in page
    assert "No usable answer: unusable_answer: the model" in page
    assert "Why it failed" not in page
    table = ann_client.get("/").content.decode()
    assert '<span class="status status-unusable_answer">unusable_answer</span>' in table

    assert stored_report(session)["status"] == "unusable_answer"
    replay = create_replay(session, ann)  # an ended session, so it may be replayed
    assert replay.status == Session.Status.QUEUED and replay.replay_of_id == session.pk


def test_a_running_session_is_not_marked_ended(session, ann_client):
    page = ann_client.get(f"/sessions/{session.pk}/").content.decode()
    assert 'data-status="running" data-ended="false"' in page


@pytest.mark.parametrize("ending", agents.FINAL_STATUSES)
def test_a_never_sent_sub_agent_of_an_ended_parent_is_cancelled(make_session, ann, ending):
    parent = make_session(owner=ann, status=ending)
    child = make_session(owner=ann, status=Session.Status.QUEUED, parent=parent)
    assert cancel_unasked_children() == [child.pk]
    child.refresh_from_db()
    assert child.status == Session.Status.CANCELLED and "ended before" in child.error


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("as_json", [False, True])
def test_runtask_exits_3_on_unusable_answer_after_printing_its_report(channels_redis_url, capsys,
                                                                       as_json):
    with FakeProvider(default="echo") as provider:
        ModelProfile.objects.create(name="echoing", model="fake-model", api_key_env="",
                                    base_url=provider.base_url, local=True, context_size=16_000)
        with pytest.raises(CommandError, match=r"ended unusable_answer: unusable_answer: the "
                                               r"model's answer was not accepted") as ended:
            call_command("runtask", "--profile", "echoing", "--goal", "Say hello.",
                         *(["--json"] if as_json else []))
    assert ended.value.returncode == 3
    out = capsys.readouterr().out
    if as_json:
        assert json.loads(out)["status"] == "unusable_answer"
    else:
        assert out.startswith(f"Session #{Session.objects.get().pk} unusable_answer after ")


@pytest.mark.django_db(transaction=True)
def test_runtask_exits_0_when_the_session_finished(sim_profile, channels_redis_url, capsys):
    call_command("runtask", "--scenario", "sales-report", "--json")
    assert json.loads(capsys.readouterr().out)["status"] == "finished"
