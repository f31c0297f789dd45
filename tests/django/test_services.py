"""Services the dashboard calls: create, start, cancel, follow-up message, compact now."""
import pytest

from taskos.runs import queue, services
from taskos.runs.models import ModelProfile, PendingMessage, Session
from taskos.runs.services import SessionError

pytestmark = pytest.mark.django_db


def test_create_session_from_a_scenario_takes_its_goal_and_window(sim_profile, plain_user):
    session = services.create_session(plain_user, "", "retrieval-6x1600", sim_profile, None,
                                      {"trigger_ratio": 0.7})
    assert session.status == "queued" and session.owner == plain_user
    assert session.goal.startswith("Collect six sources") and session.window == 4000
    assert session.context_settings["trigger_ratio"] == 0.7
    assert session.context_settings["reserve_ratio"] == 0.1  # the rest filled with defaults


def test_create_session_with_a_goal_defaults_to_the_profile_window(sim_profile):
    session = services.create_session(None, "  Summarise the CSV  ", "", sim_profile, None, None)
    assert session.goal == "Summarise the CSV" and session.window == sim_profile.context_size


@pytest.mark.parametrize("goal, scenario, window, context, message", [
    ("", "", None, {}, "Give a goal or choose a scenario"),
    ("x", "no-such-scenario", None, {}, "Unknown scenario 'no-such-scenario'"),
    ("x", "", 500, {}, "at least 1000 tokens"),
    ("x", "", 200_000, {}, "larger than the context size"),
    ("x", "", None, {"trigger_ratio": 1.0}, "trigger_ratio must be greater than 0 and at most 0.9"),
])
def test_create_session_explains_what_is_wrong(sim_profile, goal, scenario, window, context,
                                               message):
    with pytest.raises(SessionError, match=message):
        services.create_session(None, goal, scenario, sim_profile, window, context)
    assert Session.objects.count() == 0


def test_unknown_scenario_error_lists_the_bundled_ones(sim_profile):
    with pytest.raises(SessionError) as error:
        services.create_session(None, "", "nope", sim_profile, None, {})
    assert "sales-report" in str(error.value) and "retrieval-6x1600" in str(error.value)


def test_start_session_enqueues_after_commit(make_session, monkeypatch,
                                             django_capture_on_commit_callbacks):
    queued = []

    class Result:
        id = "celery-task-1"

    monkeypatch.setattr(queue, "run_session", lambda pk: queued.append(pk) or Result())
    session = make_session()
    with django_capture_on_commit_callbacks(execute=True):
        services.start_session(session)
        assert queued == []  # nothing is sent before the session row is committed
    assert queued == [session.pk]
    session.refresh_from_db()
    assert session.celery_task_id == "celery-task-1"


def test_start_session_marks_the_session_failed_when_the_queue_is_down(
        make_session, monkeypatch, django_capture_on_commit_callbacks):
    def broken(pk):
        raise ConnectionRefusedError("Error 111 connecting to 127.0.0.1:6390")

    monkeypatch.setattr(queue, "run_session", broken)
    session = make_session()
    with django_capture_on_commit_callbacks(execute=True):
        services.start_session(session)
    session.refresh_from_db()
    assert session.status == "failed" and "Could not reach the task queue" in session.error


def test_cancel_stops_a_queued_session_at_once_and_flags_a_running_one(make_session):
    queued, running = make_session(), make_session(status="running")
    services.request_cancel(queued)
    services.request_cancel(running)
    assert (queued.status, queued.cancel_requested) == ("cancelled", True)
    assert queued.finished_at is not None
    running.refresh_from_db()
    assert (running.status, running.cancel_requested) == ("running", True)


def test_finished_sessions_refuse_requests(make_session):
    done = make_session(status="finished")
    for call in (lambda: services.request_cancel(done),
                 lambda: services.post_message(done, "more please"),
                 lambda: services.request_compaction(done)):
        with pytest.raises(SessionError, match="is finished"):
            call()


def test_messages_are_queued_and_validated(make_session):
    session = make_session(status="running")
    services.post_message(session, "  also compare with last year  ")
    assert list(PendingMessage.objects.values_list("text", "taken")) == [
        ("also compare with last year", False)]
    with pytest.raises(SessionError, match="empty"):
        services.post_message(session, "   ")
    with pytest.raises(SessionError, match="too long"):
        services.post_message(session, "x" * 100_001)


def test_compaction_request_keeps_instructions_and_blank_means_plain(make_session):
    session = make_session(status="running")
    services.request_compaction(session, "keep the regional figures")
    assert Session.objects.get(pk=session.pk).compact_request == "keep the regional figures"
    services.request_compaction(session)
    assert Session.objects.get(pk=session.pk).compact_request == ""


def test_real_profiles_convert_with_the_session_window():
    profile = ModelProfile.objects.create(name="local", model="qwen2.5:7b", local=True,
                                          base_url="http://127.0.0.1:11434/v1",
                                          context_size=32_768, num_ctx=32_768)
    session = services.create_session(None, "Plan a trip", "", profile, 16_000, {})
    engine = session.profile.to_engine(context_size=session.window)
    assert engine.context_size == 16_000 and engine.num_ctx == 32_768
