"""The model check from the web side: `manage.py checkmodel`, the admin's Check button, the
start form's verdict, and a session on a profile whose server drops tools (tools off)."""
from __future__ import annotations

import json
import socket
from unittest import mock

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from agents import TOOLS_OFF_NOTICE, check_model
from taskos.runs import services
from taskos.runs.models import ModelProfile, Session
from tests.engine.check_server import CheckServer
from tests.engine.fake_provider import FakeProvider

pytestmark = pytest.mark.django_db


def local_profile(base_url: str, name: str = "local") -> ModelProfile:
    return ModelProfile.objects.create(
        name=name, model="smollm2-135m-instruct", base_url=base_url, api_key_env="",
        local=True, context_size=4096, server_tokenizer=True, tool_results_as_user=True,
        single_system_message=True)


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def test_checkmodel_stores_a_finished_check_and_exits_3_on_a_failed_verdict(capsys):
    with CheckServer(template="own") as server:
        profile = local_profile(server.base_url)
        with pytest.raises(CommandError, match="failed the check: Tools rendered") as failed:
            call_command("checkmodel", "local")
    assert failed.value.returncode == 3
    printed = capsys.readouterr().out
    assert "[FAIL] Tools rendered" in printed and "--chat_format chatml-function-calling" in printed
    profile.refresh_from_db()
    assert profile.model_checked_at is not None
    assert profile.tools_failed is not None and "drops tools" in profile.tools_off_notice()


def test_checkmodel_json_on_a_good_server(capsys):
    with CheckServer() as server:
        profile = local_profile(server.base_url)
        call_command("checkmodel", "local", "--json")
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True and data["server"] == "llama-cpp-python"
    assert {c["name"]: c["verdict"] for c in data["capabilities"]}["counting"] == "pass"
    profile.refresh_from_db()
    assert profile.model_check == data and profile.tools_failed is None


def test_checkmodel_errors_are_plain_and_store_nothing(capsys):
    with pytest.raises(CommandError, match="No model profile 'nope'. Profiles: "):
        call_command("checkmodel", "nope")
    with CheckServer() as server:
        profile = local_profile(server.base_url)
        call_command("checkmodel", "local")  # a finished check, kept
    stored = ModelProfile.objects.get(pk=profile.pk).model_check
    ModelProfile.objects.filter(pk=profile.pk).update(base_url=closed_port_url())
    with pytest.raises(CommandError, match="does not answer.*Nothing was stored"):
        call_command("checkmodel", "local", "--json")
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["error"].startswith(
        "The server at")
    assert ModelProfile.objects.get(pk=profile.pk).model_check == stored  # the earlier one
    with CheckServer(garbage=True) as garbage:
        ModelProfile.objects.filter(pk=profile.pk).update(base_url=garbage.base_url)
        with pytest.raises(CommandError, match="not an OpenAI-compatible API"):
            call_command("checkmodel", "local")
    assert ModelProfile.objects.get(pk=profile.pk).model_check == stored
    # A loopback server on a profile not marked local: the allowed-hosts rule, said as such.
    ModelProfile.objects.filter(pk=profile.pk).update(local=False)
    with pytest.raises(CommandError, match="allowed only for a profile marked local"):
        call_command("checkmodel", "local")
    with pytest.raises(CommandError, match="--timeout must be more than 0"):
        call_command("checkmodel", "local", "--timeout", "0")
    assert ModelProfile.objects.get(pk=profile.pk).model_check == stored


def test_the_admin_check_button_stores_and_shows_the_results(client, staff_user):
    client.force_login(staff_user)
    with CheckServer(template="own") as server:
        profile = local_profile(server.base_url)
        page = client.get(reverse("admin:runs_modelprofile_change", args=[profile.pk]))
        assert reverse("admin:runs_modelprofile_check", args=[profile.pk]) in \
            page.content.decode()
        assert "not checked yet" in page.content.decode()
        checked = client.post(reverse("admin:runs_modelprofile_check", args=[profile.pk]),
                              follow=True)
    shown = checked.content.decode()
    assert checked.status_code == 200
    assert "Tools rendered failed" in shown  # the message after the button
    assert 'class="model-check"' in shown and "drops tools" in shown  # the stored table
    profile.refresh_from_db()
    assert profile.tools_failed is not None
    listing = client.get(reverse("admin:runs_modelprofile_changelist")).content.decode()
    assert "failed: Tools rendered" in listing
    # A GET never runs a check.
    assert client.get(reverse("admin:runs_modelprofile_check",
                              args=[profile.pk])).status_code == 403


def test_the_admin_check_of_a_server_that_is_down_stores_nothing(client, staff_user):
    client.force_login(staff_user)
    profile = local_profile(closed_port_url())
    shown = client.post(reverse("admin:runs_modelprofile_check", args=[profile.pk]),
                        follow=True).content.decode()
    assert "was not checked" in shown and "does not answer" in shown
    profile.refresh_from_db()
    assert profile.model_check == {} and profile.model_checked_at is None


def failed_tools_profile(base_url: str) -> ModelProfile:
    """A profile at `base_url` whose stored check found a template that drops tools."""
    profile = local_profile(base_url, name="dropping")
    with CheckServer(template="own") as server:
        result = check_model(local_profile(server.base_url, name="probe").to_engine())
    profile.store_check(result)
    return profile


def test_the_start_form_shows_the_verdict_beside_the_profile(client, plain_user, sim_profile):
    failed_tools_profile("http://127.0.0.1:9/v1")
    with CheckServer() as server:
        good = local_profile(server.base_url, name="good")
        call_command("checkmodel", "good")
    local_profile("http://127.0.0.1:9/v1", name="fresh")
    client.force_login(plain_user)
    page = client.get(reverse("web:new")).content.decode()
    assert "dropping — smollm2-135m-instruct (4,096 tokens) — check: tools off" in page
    assert "Tools are off on profile &#x27;dropping&#x27;" in page
    assert "--chat_format chatml-function-calling" in page
    assert f"{good.name} — smollm2-135m-instruct (4,096 tokens) — check passed" in page
    assert "fresh</b>: model not checked yet" in page


@pytest.mark.django_db(transaction=True)
def test_a_session_on_a_failed_tools_profile_starts_with_tools_off_and_says_so(
        channels_redis_url, client, plain_user):
    from taskos.worker.execute import execute_session

    with FakeProvider(default="ok") as provider:
        profile = failed_tools_profile(provider.base_url)
        client.force_login(plain_user)
        form = {"goal": "Which region sold most?", "scenario": "", "profile": profile.pk,
                "window": "", "trigger_ratio": 0.8, "reserve_ratio": 0.1,
                "context_buffer_ratio": 0.2, "tool_result_limit": 50000, "max_rounds": 5,
                "compression_fallback_to_truncation": "on", "timezone": "UTC"}
        with mock.patch.object(services, "start_session"):  # run here, not on a worker
            answer = client.post(reverse("web:new"), form)
        assert answer.status_code == 302, answer.content.decode()[:2000]
        session = Session.objects.get(profile=profile)
        assert session.context_settings["tools_off"] is True
        execute_session(session)
    bodies = [r["body"] for r in provider.requests]
    assert bodies and all("tools" not in body for body in bodies)
    started = session.events.get(type="SESSION_STARTED").payload
    assert TOOLS_OFF_NOTICE in started["warnings"]
    assert any("Tools are off on profile 'dropping'" in w and "drops tools" in w
               for w in started["warnings"])
    page = client.get(reverse("web:session", args=[session.pk])).content.decode()
    assert "tools-off" in page and "the model is offered no tool" in page


def test_a_session_on_a_profile_that_passed_keeps_its_tools():
    with CheckServer() as server:
        profile = local_profile(server.base_url)
        call_command("checkmodel", "local")
    session = services.create_session(None, "Say hello.", "", profile, None, {})
    assert session.context_settings["tools_off"] is False and session.tools_off_notice == ""


@pytest.mark.django_db(transaction=True)
def test_runtask_on_a_failed_tools_profile_says_tools_are_off(channels_redis_url, capsys):
    with FakeProvider(default="ok") as provider:
        failed_tools_profile(provider.base_url)
        call_command("runtask", "--profile", "dropping", "--goal", "Say hello.",
                     "--tools", "list_files", "--json")
    said = capsys.readouterr().err
    assert TOOLS_OFF_NOTICE in said and "Tools are off on profile 'dropping'" in said
    assert provider.requests and all("tools" not in r["body"] for r in provider.requests)
