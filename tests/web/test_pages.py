"""Pages and form: access control, validation messages, escaping, start a session."""
from __future__ import annotations

import pytest

from taskos.runs.models import ModelProfile, Session

from .factories import add_events, budget

pytestmark = pytest.mark.django_db

XSS = "<script>alert(1)</script>"


def form_data(**overrides):
    data = {"goal": "Summarise the sales CSV", "scenario": "",
            "profile": ModelProfile.objects.get(name="sim").pk, "window": "",
            "trigger_ratio": "0.8", "reserve_ratio": "0.1", "context_buffer_ratio": "0.2",
            "tool_result_limit": "50000", "max_rounds": "5",
            "compression_fallback_to_truncation": "on", "timezone": "UTC"}
    data.update(overrides)
    return data


@pytest.mark.parametrize("url", ["/", "/sessions/new", "/sessions/{pk}/",
                                 "/sessions/{pk}/events?after=0", "/sessions/{pk}/calls/1.json"])
def test_anonymous_is_sent_to_sign_in(client, session, url):
    response = client.get(url.format(pk=session.pk))
    assert response.status_code == 302 and response.url.startswith("/accounts/login/?next=")


@pytest.mark.parametrize("url", ["/sessions/{pk}/", "/sessions/{pk}/events?after=0",
                                 "/sessions/{pk}/calls/1.json", "/sessions/{pk}/inspect",
                                 "/sessions/{pk}/refs/arc:{pk}:1", "/sessions/{pk}/archive"])
def test_someone_elses_session_is_not_found(client, bob, session, url):
    client.force_login(bob)
    assert client.get(url.format(pk=session.pk)).status_code == 404


@pytest.mark.parametrize("action", ["cancel", "message", "compact"])
def test_someone_elses_session_cannot_be_acted_on(client, bob, session, action):
    client.force_login(bob)
    response = client.post(f"/sessions/{session.pk}/{action}", {"text": "hi"})
    assert response.status_code == 404
    session.refresh_from_db()
    assert not session.cancel_requested and session.compact_request is None


def test_dashboard_lists_only_own_sessions_with_progress(make_session, ann_client, ann, bob, session):
    make_session(owner=bob, goal="Bob's secret goal")
    session.tasks.create(task_id="1", subject="a", state="completed")
    session.tasks.create(task_id="2", subject="b")
    Session.objects.filter(pk=session.pk).update(turns=7, total_input_tokens=12345, cost=0.25)
    html = ann_client.get("/").content.decode()
    assert "Analyse regional sales" in html and "Bob&#x27;s secret goal" not in html
    assert "Bob's secret goal" not in html
    assert "7 turns · 1/2 tasks" in html and "12,345" in html and "$0.2500" in html
    assert 'hx-trigger="every 3s"' in html  # a running session keeps the table polling


def test_goal_is_escaped_everywhere(make_session, ann_client, ann):
    hostile = make_session(owner=ann, goal=XSS)
    add_events(hostile, ("USER_MESSAGE", {"text": XSS, "source": "user"}),
               ("TOOL_RESULT", {"call_id": "c", "name": "read_file", "original_chars": 10,
                                "kept_chars": 10, "original_tokens": 3, "kept_tokens": 3,
                                "truncated": False, "ref": None, "error": None,
                                "preview": XSS}),
               ("HINT_BLOCK", {"kind": "tool_error", "text": XSS}))
    for url in ("/", f"/sessions/{hostile.pk}/", f"/sessions/{hostile.pk}/events?after=0"):
        html = ann_client.get(url).content.decode()
        assert XSS not in html, url
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, url


def test_form_requires_a_goal_or_a_scenario(ann_client):
    response = ann_client.post("/sessions/new", form_data(goal="  "))
    assert response.status_code == 400
    assert "Give a goal or choose a scenario." in response.content.decode()
    assert not Session.objects.exists()


def test_form_rejects_trigger_ratio_of_one_with_the_engine_message(ann_client):
    response = ann_client.post("/sessions/new", form_data(trigger_ratio="1.0"))
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert list(errors) == ["trigger_ratio"]
    assert "at most 0.9" in errors["trigger_ratio"][0]


@pytest.mark.parametrize("window, message", [
    ("999", "greater than or equal to 1000"),
    ("100000001", "less than or equal to 100000000"),
    ("500000", "larger than the context size of profile 'sim'"),
])
def test_form_rejects_windows_out_of_range(ann_client, window, message):
    response = ann_client.post("/sessions/new", form_data(window=window))
    assert response.status_code == 400
    assert message in response.context["form"].errors["window"][0]


@pytest.mark.parametrize("field, value, message", [
    ("reserve_ratio", "0.7", "reserve_ratio must be at least 0 and less than 0.5"),
    ("max_rounds", "0", "max_rounds must be at least 1"),
    ("timezone", "Mars/Olympus", "Unknown time zone 'Mars/Olympus'"),
    ("tool_result_limit", "5", "tool_result_limit must be at least 100"),
])
def test_form_puts_knob_errors_on_their_fields(ann_client, field, value, message):
    response = ann_client.post("/sessions/new", form_data(**{field: value}))
    assert message in response.context["form"].errors[field][0]


def test_form_labels_the_simulated_profile(ann_client):
    html = ann_client.get("/sessions/new").content.decode()
    assert "simulated" in html and "retrieval-6x1600" in html


def test_start_creates_queues_and_redirects(ann_client, ann, monkeypatch, django_capture_on_commit_callbacks):
    started = []
    monkeypatch.setattr("taskos.web.views.start_session", started.append)
    response = ann_client.post("/sessions/new", form_data(
        goal="", scenario="retrieval-6x1600", trigger_ratio="0.7", max_rounds="3"))
    session = Session.objects.get()
    assert response.status_code == 302 and response.url == f"/sessions/{session.pk}/"
    assert started == [session] and session.owner == ann
    assert session.window == 4000  # the scenario's window when the field is empty
    assert session.goal.startswith("Collect six sources")
    assert session.context_settings["trigger_ratio"] == 0.7
    assert session.context_settings["max_rounds"] == 3
    assert session.context_settings["tools"] == [] and session.context_settings["max_turns"] == 400


def test_start_form_chooses_the_tools_offered_and_max_turns(ann_client, monkeypatch,
                                                          django_capture_on_commit_callbacks):
    monkeypatch.setattr("taskos.web.views.start_session", lambda session: None)
    form = ann_client.get("/sessions/new").content.decode()
    assert 'name="tools" value="list_files"' in form and 'name="max_turns"' in form
    ann_client.post("/sessions/new", form_data(tools=["list_files", "read_file"], max_turns="12"))
    settings = Session.objects.get().context_settings
    assert settings["tools"] == ["list_files", "read_file"] and settings["max_turns"] == 12


def test_session_page_renders_transcript_drawer_and_socket(ann_client, session):
    add_events(session, ("USER_MESSAGE", {"text": "Sales by region please", "source": "scenario"}),
               budget(history=2500))
    html = ann_client.get(f"/sessions/{session.pk}/").content.decode()
    assert "Sales by region please" in html
    assert f'ws-connect="/ws/sessions/{session.pk}/"' in html
    assert 'id="last-seq" value="2"' in html
    for panel in ("budget", "curve", "compactions", "anchors", "tasks", "hints", "inspector",
                  "errors", "cost"):
        assert f'id="panel-{panel}-body"' in html
    assert "Compact now" in html


def test_finished_session_page_has_no_socket_or_controls(make_session, ann_client, ann):
    done = make_session(owner=ann, status=Session.Status.FINISHED)
    html = ann_client.get(f"/sessions/{done.pk}/").content.decode()
    assert "ws-connect" not in html and "Compact now" not in html and "Cancel" not in html


def test_session_page_warns_when_the_profiles_window_is_assumed(make_session, ann_client, ann):
    from taskos.runs.models import ModelProfile
    profile = ModelProfile.objects.create(name="mine", model="my-llm", api_key_env="",
                                          base_url="http://127.0.0.1:9/v1")
    guessed = make_session(owner=ann, profile=profile)
    html = ann_client.get(f"/sessions/{guessed.pk}/").content.decode()
    assert 'class="flag flag-warn window-warning"' in html
    assert "sets no context size: TaskOS assumes 128,000 tokens" in html
    profile.context_size = 8192
    profile.save()
    html = ann_client.get(f"/sessions/{guessed.pk}/").content.decode()
    assert "window-warning" not in html


def test_a_goal_larger_than_the_person_s_words_share_is_said_before_the_start(ann_client):
    goal = "Compare the regional figures and explain each difference. " * 400
    response = ann_client.post("/sessions/new", form_data(goal=goal, window="8000"))
    assert response.status_code == 400
    page = response.content.decode()
    assert "person&#x27;s words are sent whole up to 1,750 tokens" in page
    assert 'name="long_goal_ok"' in page and Session.objects.count() == 0
    started = ann_client.post("/sessions/new", form_data(goal=goal, window="8000",
                                                         long_goal_ok="on"))
    assert started.status_code == 302 and Session.objects.count() == 1
    roomy = ann_client.post("/sessions/new", form_data(goal=goal, window="128000"))
    assert roomy.status_code == 302  # fits the share of a larger window: no question
