"""Model profile fault limits and key variables (issue 9 F4, F11, F12) and input limits (F14)."""
from __future__ import annotations

import io
import logging
import threading
import time

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.urls import reverse

from agents.secrets import register_secret
from taskos.runs import services
from taskos.runs.models import ModelProfile, PendingMessage, Session
from taskos.web.forms import MessageForm, NewSessionForm

pytestmark = pytest.mark.django_db


def admin_profile_form(**overrides) -> dict:
    data = {"name": "deepseek", "model": "deepseek-chat", "base_url": "https://api.example/v1",
            "api_key_env": "TASKOS_KEY_DEEPSEEK", "context_size": "65536", "encoding": "",
            "price_input": "0", "price_cached_input": "0", "price_output": "0",
            "summary_model": "", "num_ctx": "", "connect_timeout": "5", "read_timeout": "60",
            "call_timeout": "200", "retry_budget": "240"}
    data.update(overrides)
    return data


def test_profile_timeouts_reach_the_engine_with_sane_defaults():
    profile = ModelProfile.objects.create(name="p", model="m", base_url="http://x/v1")
    engine = profile.to_engine()
    assert (engine.connect_timeout, engine.read_timeout, engine.call_timeout,
            engine.retry_budget) == (10.0, 120.0, 300.0, 300.0)
    profile.read_timeout, profile.retry_budget = 30, 90
    assert profile.to_engine().read_timeout == 30 and profile.to_engine().retry_budget == 90


@pytest.mark.parametrize("name", ["DATABASE_URL", "REDIS_URL", "TASKOS_SECRET_KEY",
                                  "TASKOS_ADMIN_PASSWORD", "HOME"])
def test_the_model_refuses_a_key_variable_the_operator_did_not_allow(name):
    profile = ModelProfile(name="evil", model="m", base_url="http://evil/v1", api_key_env=name)
    with pytest.raises(ValidationError) as error:
        profile.full_clean()
    assert name in str(error.value.message_dict["api_key_env"])


def test_the_admin_form_refuses_a_project_secret_and_saves_an_allowed_key(client, staff_user):
    client.force_login(staff_user)
    url = reverse("admin:runs_modelprofile_add")
    response = client.post(url, admin_profile_form(api_key_env="DATABASE_URL"))
    assert response.status_code == 200
    assert "can never be sent to a model endpoint" in response.content.decode()
    assert not ModelProfile.objects.filter(name="deepseek").exists()
    response = client.post(url, admin_profile_form())
    assert response.status_code == 302
    saved = ModelProfile.objects.get(name="deepseek")
    assert saved.api_key_env == "TASKOS_KEY_DEEPSEEK" and saved.retry_budget == 240


def test_the_admin_form_refuses_a_zero_timeout(client, staff_user):
    client.force_login(staff_user)
    response = client.post(reverse("admin:runs_modelprofile_add"),
                           admin_profile_form(read_timeout="0"))
    assert response.status_code == 200 and not ModelProfile.objects.filter(name="deepseek").exists()


def test_log_lines_of_the_project_mask_registered_keys():
    register_secret("sk-live-abcdefghijklmnop")
    [handler] = [h for h in logging.getLogger("taskos").handlers  # settings.LOGGING's
                 if type(h) is logging.StreamHandler]
    stream = io.StringIO()
    previous = handler.setStream(stream)
    try:
        logging.getLogger("taskos.runs").error("provider said: bad key sk-live-abcdefghijklmnop")
    finally:
        handler.setStream(previous)
    text = stream.getvalue()
    assert "provider said: bad key [redacted]" in text and "sk-live-abcdefghijklmnop" not in text


# --- F14: goal and message length
def test_a_goal_over_the_limit_is_a_form_error_and_nothing_is_stored(client, plain_user,
                                                                     sim_profile, settings):
    settings.TASKOS_MAX_INPUT_CHARS = 100_000
    client.force_login(plain_user)
    data = {"goal": "x" * 100_001, "scenario": "", "profile": sim_profile.pk, "window": "",
            "trigger_ratio": "0.8", "reserve_ratio": "0.1", "context_buffer_ratio": "0.2",
            "tool_result_limit": "50000", "max_rounds": "5", "timezone": "UTC"}
    response = client.post(reverse("web:new"), data)
    assert response.status_code == 400
    assert "The goal is too long: 100,001 characters, at most 100,000" in response.content.decode()
    assert Session.objects.count() == 0
    form = NewSessionForm({**data, "goal": "x" * 100_000})
    assert form.is_valid(), form.errors


def test_the_limit_is_a_setting_and_applies_to_messages_and_the_service(make_session, settings):
    settings.TASKOS_MAX_INPUT_CHARS = 50
    assert not MessageForm({"text": "y" * 51}).is_valid()
    assert MessageForm({"text": "y" * 50}).is_valid()
    session = make_session(status="running")
    with pytest.raises(services.SessionError, match="message is too long: 51 characters"):
        services.post_message(session, "y" * 51)
    with pytest.raises(services.SessionError, match="goal is too long"):
        services.create_session(None, "z" * 51, "", session.profile, None, {})
    assert PendingMessage.objects.count() == 0 and Session.objects.count() == 1


def test_the_admin_refuses_a_goal_over_the_limit(make_session, settings):
    settings.TASKOS_MAX_INPUT_CHARS = 10
    session = make_session(goal="short")
    session.goal = "far too long a goal"
    with pytest.raises(ValidationError) as error:
        session.full_clean()
    assert "too long" in str(error.value.message_dict["goal"])


@pytest.mark.django_db(transaction=True)
def test_cancel_from_the_dashboard_interrupts_a_hung_model_call(channels_redis_url):
    from taskos.worker.execute import execute_session
    from tests.engine.fake_provider import FakeProvider

    with FakeProvider(default="hang") as provider:
        profile = ModelProfile.objects.create(
            name="hung", model="m", base_url=provider.base_url, api_key_env="", local=True,
            context_size=16_000, read_timeout=120, call_timeout=300)
        session = services.create_session(None, "Say hello.", "", profile, None, {})

        def cancel_when_the_call_is_in_flight() -> None:
            try:
                if provider.received.wait(60):
                    services.request_cancel(Session.objects.get(pk=session.pk))
            finally:
                connection.close()  # this thread's own connection, so teardown can drop the db

        helper = threading.Thread(target=cancel_when_the_call_is_in_flight, daemon=True)
        helper.start()
        started = time.monotonic()
        report = execute_session(Session.objects.get(pk=session.pk))
        elapsed = time.monotonic() - started
        helper.join(10)
    session.refresh_from_db()
    assert report["status"] == "cancelled" and session.status == "cancelled"
    assert elapsed < 60  # the hung call alone would take 120 s
    assert session.events.filter(type="SESSION_FINISHED", payload__status="cancelled").exists()
