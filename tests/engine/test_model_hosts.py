"""Which hosts a model profile's URL may name, checked before every request (issue 25 item 9).

Name resolution is injected: no test needs DNS, and a name can be made to point anywhere.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import httpx2
import pytest

from agents.config import ConfigError, ContextConfig, ModelProfile
from agents.events import EventType, ListSink
from agents.loop.retry import RetryBudget
from agents.loop.spec import SessionSpec
from agents.provider.client import ModelClient, ModelError
from agents.provider.hosts import HostUnresolved, UrlRefused, check_model_url
from agents.runner import run_session
from agents.store.memory import MemoryStore

NAMES = {"api.example.com": ["93.184.215.14"], "intranet.example": ["10.0.0.5"],
         "sneaky.example": ["93.184.215.14", "10.1.1.1"], "meta.example": ["169.254.169.254"],
         "localhost": ["127.0.0.1", "::1"], "redis.internal": ["10.0.0.9"]}


def resolve(host: str, port: int) -> list[str]:
    if host not in NAMES:
        raise HostUnresolved(f"cannot resolve {host!r}")
    return NAMES[host]


@pytest.mark.parametrize("url, how, reason", [
    ("file:///etc/passwd", {}, "uses file://"),
    ("gopher://api.example.com/", {}, "uses gopher://"),
    ("ftp://api.example.com/v1", {"local": True}, "http:// or https:// only"),
    ("http:///v1", {}, "names no host"),
    ("http://169.254.169.254/latest/meta-data/", {"local": True}, "link-local"),
    ("http://[fd00:ec2::254]/v1", {"local": True}, "link-local"),
    ("http://[::ffff:169.254.169.254]/v1", {"local": True}, "link-local"),
    ("http://meta.example/v1", {"local": True}, "meta.example (169.254.169.254): a link-local"),
    ("http://10.0.0.5:8000/v1", {}, "allowed only for a profile marked local"),
    ("http://intranet.example/v1", {}, "intranet.example (10.0.0.5)"),
    ("http://sneaky.example/v1", {}, "sneaky.example (10.1.1.1)"),  # every address counts
    ("http://127.0.0.1:8080/v1", {}, "loopback or private"),
    ("http://0.0.0.0:8080/v1", {"local": True}, "not an address a model server answers on"),
    ("http://localhost:6390/v1", {"local": True, "refused": ["127.0.0.1:6390"]},
     "one of TaskOS's own services"),
    ("http://redis.internal:6379/v1", {"hosts": ["public", "private"],
                                       "refused": ["redis.internal:6379"]}, "own services"),
    ("https://api.example.com/v1", {"hosts": ["api.openai.com"]}, "do not list"),
    ("https://api.example.com/v1", {"hosts": ["local"], "local": True}, "a public address"),
    ("https://api.example.com/v1", {"hosts": ["10.0.0.0/99"]}, "'10.0.0.0/99', which is not"),
])
def test_urls_that_may_not_be_asked_are_refused_with_the_reason(url, how, reason):
    with pytest.raises(UrlRefused) as error:
        check_model_url(url, resolve=resolve, **how)
    assert reason in str(error.value)


@pytest.mark.parametrize("url, how", [
    ("", {}),  # the simulated model
    ("https://api.example.com/v1", {}),
    ("http://10.0.0.5:8000/v1", {"local": True}),
    ("http://localhost:8436/v1", {"local": True, "refused": ["127.0.0.1:6390"]}),
    ("http://intranet.example/v1", {"hosts": ["public", "intranet.example"]}),
    ("http://10.0.0.5:8000/v1", {"hosts": ["public", "10.0.0.0/24"]}),
    ("http://169.254.169.254/v1", {"hosts": ["169.254.169.254:80"]}),  # only when listed
    ("http://127.0.0.1:8080/v1", {"hosts": ["public", "private"]}),  # the engine's default
])
def test_urls_the_host_list_allows(url, how):
    check_model_url(url, resolve=resolve, **how)


def test_a_name_that_does_not_resolve_is_neither_allowed_nor_refused():
    with pytest.raises(HostUnresolved):
        check_model_url("https://nowhere.example/v1", resolve=resolve)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "gopher://x/", "http:///v1",
                                 "http://host:99999/v1"])
def test_the_engine_profile_refuses_a_url_that_is_not_http(url):
    with pytest.raises(ConfigError):
        ModelProfile(name="bad", base_url=url)


class Recorder:
    """An HTTP transport that records what reached it and never answers usefully."""

    def __init__(self) -> None:
        self.requests: list = []

    def __call__(self, request):
        self.requests.append(request)
        return httpx2.Response(500, json={"error": {"message": "should not be asked"}})


def test_the_client_checks_the_url_before_each_request_and_sends_nothing_when_refused():
    recorder = Recorder()
    profile = ModelProfile(name="moved", model="m", base_url="http://intranet.example/v1",
                           api_key_env="", model_hosts=("public", "local"))
    client = ModelClient(profile, http_client=httpx2.Client(
        transport=httpx2.MockTransport(recorder)), resolve=resolve)
    with pytest.raises(ModelError) as error:
        client.complete([{"role": "user", "content": "hi"}], None, 10)
    assert error.value.code == "profile_invalid" and not error.value.transient
    assert "intranet.example (10.0.0.5)" in str(error.value) and recorder.requests == []


class CountingSleep:
    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def test_a_session_whose_url_now_resolves_to_a_private_address_fails_at_once():
    # Saved as a public name; by the time the session asks, the name points inside. Before
    # each request is checked, the call went out and was retried as a connection error.
    names = {"model.example": ["93.184.215.14"]}

    def moving(host: str, port: int) -> list[str]:
        return names[host]

    profile = ModelProfile(name="moving", model="m", base_url="http://model.example/v1",
                           api_key_env="", context_size=16_000,
                           model_hosts=("public", "local"))
    check_model_url(profile.base_url, hosts=profile.model_hosts, resolve=moving)  # as saved
    names["model.example"] = ["192.168.1.20"]
    recorder = Recorder()
    model = ModelClient(profile, resolve=moving, http_client=httpx2.Client(
        transport=httpx2.MockTransport(recorder)))
    sleep = CountingSleep()
    sink = ListSink()
    with tempfile.TemporaryDirectory() as tmp:
        run = run_session(SessionSpec.plan(goal="Say hello.", scenario=None, profile=profile,
                                           config=ContextConfig()),
                          session_id="h1", store=MemoryStore(), events=sink,
                          workspace=Path(tmp), model=model,
                          retries=RetryBudget(300, sleep=sleep, rng=lambda: 0.5))
    assert run.status == "failed" and run.result.code == "profile_invalid"
    errors = [e.payload for e in sink.of_type(EventType.ERROR)]
    assert [(e["code"], e["fatal"]) for e in errors] == [("profile_invalid", True)]
    assert sleep.calls == [] and recorder.requests == []  # no retry, nothing sent
    assert "192.168.1.20" in errors[0]["message"]
