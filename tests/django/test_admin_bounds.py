"""The admin checks what the start form checks (issue 25 item 8), a profile's URL may name
only allowed hosts (item 9), and a row changed behind the checks fails its session at once
with profile_invalid instead of an internal error."""
from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

import agents
from agents import EventType
from taskos.runs.models import ModelProfile, Session
from tests.django.test_profile_faults_and_limits import admin_profile_form as profile_form

pytestmark = pytest.mark.django_db

HUGE = 10**20


def session_form(session: Session, **overrides) -> dict:
    data = {"goal": session.goal, "scenario": session.scenario, "owner": "",
            "profile": session.profile_id, "window": session.window,
            "context_settings": "{}", "compact_request": ""}
    for prefix in ("anchors", "tasks"):
        data.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0",
                     f"{prefix}-MIN_NUM_FORMS": "0", f"{prefix}-MAX_NUM_FORMS": "1000"})
    data.update(overrides)
    return data


@pytest.mark.parametrize("field, value, message", [
    ("context_settings", '{"trigger_ratio": 5}', "trigger_ratio must be greater than 0"),
    ("context_settings", "[1, 2]", "Context settings must be an object"),
    ("context_settings", f'{{"tool_result_limit": {HUGE}}}', f"(got {HUGE})"),
    ("context_settings", f'{{"max_rounds": {HUGE}}}', "max_rounds must be at least 1"),
    ("context_settings", '{"max_round": 5}', "Unknown context setting 'max_round'"),
    ("window", "0", "window must be at least 1000 tokens"),
    ("window", "999999999", "at most 100000000 tokens (got 999999999)"),
    ("window", "16001", "larger than the context size of profile"),
    ("scenario", "/etc/passwd", "Select a valid choice"),
    ("scenario", "agents/scenarios/sales-report.json", "Select a valid choice"),
])
def test_the_session_admin_refuses_what_the_start_form_refuses(client, staff_user, make_session,
                                                                sim_profile, field, value,
                                                                message):
    sim_profile.context_size = 16_000
    sim_profile.save()
    session = make_session(window=8000, context_settings={"max_rounds": 5})
    client.force_login(staff_user)
    response = client.post(reverse("admin:runs_session_change", args=[session.pk]),
                           session_form(session, **{field: value}))
    assert response.status_code == 200, response.status_code
    errors = response.context["adminform"].form.errors
    assert message in " ".join(errors.get(field, [])), errors
    stored = Session.objects.get(pk=session.pk)
    assert (stored.window, stored.scenario, stored.context_settings) == (
        8000, "", {"max_rounds": 5})


def test_the_session_admin_saves_good_values(client, staff_user, make_session):
    session = make_session(window=8000)
    client.force_login(staff_user)
    response = client.post(reverse("admin:runs_session_change", args=[session.pk]),
                           session_form(session, scenario="sales-report", window="9000",
                                        context_settings='{"max_rounds": 7}'))
    assert response.status_code == 302, response.context["adminform"].form.errors
    session.refresh_from_db()
    assert (session.scenario, session.window, session.context_settings) == (
        "sales-report", 9000, {"max_rounds": 7})


def test_a_sub_agents_scenario_stays_when_unchanged(client, staff_user, make_session):
    session = make_session(scenario="research-subagents#pricing")
    client.force_login(staff_user)
    response = client.post(reverse("admin:runs_session_change", args=[session.pk]),
                           session_form(session, goal="edited goal"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    session.refresh_from_db()
    assert (session.goal, session.scenario) == ("edited goal", "research-subagents#pricing")


@pytest.mark.parametrize("overrides, field, message", [
    ({"read_timeout": "1e308"}, "read_timeout", "less than or equal to 86400"),
    ({"retry_budget": "1e20"}, "retry_budget", "less than or equal to 86400"),
    ({"context_size": str(HUGE)}, "context_size", "less than or equal to 100000000"),
    ({"price_output": "-1"}, "price_output", "greater than or equal to 0"),
    ({"base_url": "file:///etc/passwd"}, "base_url", "uses file://"),
    ({"base_url": "gopher://api.example/v1"}, "base_url", "uses gopher://"),
    ({"base_url": "http://169.254.169.254/latest/meta-data/", "local": "on"}, "base_url",
     "link-local"),
    ({"base_url": "http://10.0.0.5:8000/v1"}, "base_url",
     "allowed only for a profile marked local"),
    ({"base_url": "http://127.0.0.1:6390/v1", "local": "on"}, "base_url",
     "one of TaskOS's own services"),
])
def test_the_profile_admin_refuses_numbers_out_of_range_and_urls_it_may_not_ask(
        client, staff_user, settings, overrides, field, message):
    settings.REDIS_URL = settings.CELERY_BROKER_URL = "redis://127.0.0.1:6390/0"
    client.force_login(staff_user)
    response = client.post(reverse("admin:runs_modelprofile_add"), profile_form(**overrides))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert message in " ".join(errors.get(field, [])), errors
    assert not ModelProfile.objects.filter(name="deepseek").exists()


def test_a_local_profile_may_name_a_private_address(client, staff_user):
    client.force_login(staff_user)
    response = client.post(reverse("admin:runs_modelprofile_add"), profile_form(
        base_url="http://10.0.0.5:8000/v1", local="on", api_key_env=""))
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert ModelProfile.objects.get(name="deepseek").local


def test_a_name_resolving_to_a_private_address_is_private(monkeypatch, settings):
    monkeypatch.setattr("agents.provider.hosts.resolve_host", lambda host, port: ["10.2.3.4"])
    profile = ModelProfile(name="p", model="m", base_url="https://llm.example/v1",
                           api_key_env="")
    with pytest.raises(ValidationError) as error:
        profile.full_clean()
    assert "llm.example (10.2.3.4)" in str(error.value.message_dict["base_url"])
    settings.TASKOS_MODEL_HOSTS = ["public", "llm.example"]  # the operator lists it
    profile.full_clean()


def test_to_engine_says_profile_invalid_for_a_row_out_of_range():
    profile = ModelProfile.objects.create(name="p", model="m", base_url="https://api.example/v1")
    ModelProfile.objects.filter(pk=profile.pk).update(read_timeout=1e308)
    profile.refresh_from_db()
    with pytest.raises(agents.ProfileInvalid) as error:
        profile.to_engine()
    assert error.value.code == "profile_invalid"
    assert "'p' cannot be used: read_timeout must be" in str(error.value)


def test_a_session_on_a_profile_whose_url_became_invalid_fails_at_once(channels_redis_url):
    from taskos.runs import services
    from taskos.worker.execute import execute_session

    profile = ModelProfile.objects.create(name="p", model="m", api_key_env="",
                                          base_url="https://93.184.215.14/v1",
                                          context_size=16_000, retry_budget=600)
    session = services.create_session(None, "Say hello.", "", profile, None, {})
    ModelProfile.objects.filter(pk=profile.pk).update(base_url="http://169.254.169.254/v1")
    try:
        execute_session(Session.objects.get(pk=session.pk))
    except agents.ProfileInvalid:
        pass  # the worker's task ends with it; the session says why
    session.refresh_from_db()
    assert session.status == Session.Status.FAILED
    assert session.error.startswith("profile_invalid: Model profile 'p' cannot be used")
    errors = list(session.events.filter(type=EventType.ERROR).values_list("payload", flat=True))
    assert [(e["code"], e["fatal"]) for e in errors] == [("profile_invalid", True)]
    assert "link-local" in errors[0]["message"]
