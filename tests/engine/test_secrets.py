"""API key variables (issue 9 F11) and key redaction (F12)."""
from __future__ import annotations

import io
import json
import logging

import pytest

from agents.events import EventType
from agents.secrets import KeyEnvRefused, RedactingFilter, check_key_env, redact, register_secret

from .fake_provider import FakeProvider
from .test_model_faults import errors, finished, run_against


@pytest.mark.parametrize("name", ["DATABASE_URL", "REDIS_URL", "TASKOS_SECRET_KEY",
                                  "TASKOS_ADMIN_PASSWORD", "TASKOS_WORKSPACES"])
def test_the_projects_own_settings_are_refused_even_when_listed(name, monkeypatch):
    monkeypatch.setenv("TASKOS_ALLOWED_KEY_ENVS", f"{name},OPENAI_API_KEY")
    with pytest.raises(KeyEnvRefused, match="TaskOS's own settings"):
        check_key_env(name)


def test_only_the_prefix_and_the_operators_list_are_allowed(monkeypatch):
    monkeypatch.delenv("TASKOS_ALLOWED_KEY_ENVS", raising=False)
    check_key_env("TASKOS_KEY_DEEPSEEK")
    check_key_env("OPENAI_API_KEY")  # the default list
    check_key_env("")  # no key: keyless local servers
    with pytest.raises(KeyEnvRefused, match="not an allowed API key variable"):
        check_key_env("HOME")
    with pytest.raises(KeyEnvRefused, match="not an environment variable name"):
        check_key_env("MY KEY")
    monkeypatch.setenv("TASKOS_ALLOWED_KEY_ENVS", "DEEPSEEK_API_KEY")
    check_key_env("DEEPSEEK_API_KEY")
    with pytest.raises(KeyEnvRefused, match="allowed now: DEEPSEEK_API_KEY"):
        check_key_env("OPENAI_API_KEY")


def test_a_refused_variable_is_never_read_or_sent(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://admin:hunter2hunter2@db/prod")
    with FakeProvider(default="ok") as provider:
        run, sink, _ = run_against(provider, api_key_env="DATABASE_URL")
    assert run.status == "failed"
    [fatal] = errors(sink, fatal=True)
    assert fatal["code"] == "key_env_refused" and "DATABASE_URL" in fatal["message"]
    assert provider.requests == []
    assert "hunter2" not in json.dumps([e.to_dict() for e in sink.events])


def test_a_key_echoed_by_the_provider_is_redacted_from_events_errors_and_archive(monkeypatch):
    key = "sk-fake-0123456789-SECRETVALUE"
    monkeypatch.setenv("TASKOS_KEY_FAKE", key)
    with FakeProvider(script=["tool"], default="echo401") as provider:
        run, sink, store = run_against(provider, api_key_env="TASKOS_KEY_FAKE")
    assert provider.requests[0]["authorization"] == f"Bearer {key}"  # the key was used
    assert run.status == "failed"
    [fatal] = errors(sink, fatal=True)
    assert fatal["code"] == "auth" and "[redacted]" in fatal["message"]
    assert key not in run.result.error
    assert key not in json.dumps([e.to_dict() for e in sink.events])
    assert key not in finished(sink)["error"]
    assert all(key not in row["content"] for row in store.archived_rows("f1"))
    assert sink.of_type(EventType.TOOL_RESULT)  # a turn ran and was archived before the 401


def test_log_lines_and_tracebacks_are_redacted():
    register_secret("tok-abcdefgh-123456")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("tests.redaction")
    logger.addHandler(handler)
    try:
        logger.error("sent %s", "tok-abcdefgh-123456")
        try:
            raise RuntimeError("provider said tok-abcdefgh-123456 is wrong")
        except RuntimeError:
            logger.exception("call failed")
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert "tok-abcdefgh-123456" not in text and "sent [redacted]" in text
    assert "RuntimeError: provider said [redacted] is wrong" in text
    assert redact("short") == "short"
