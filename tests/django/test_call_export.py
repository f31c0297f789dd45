"""The inspector is exactly what the model saw (issue 12): the export of every call is the
body the simulated provider received, byte for byte, and the inspector's token column adds
up to the call's input total, read through the public URLs after a real sales-report run."""
from __future__ import annotations

import json
import re

import pytest

import agents.runner
from agents.sim import transport as sim_transport
from taskos.runs import services
from taskos.runs.models import ModelProfile, SessionEvent
from taskos.worker.tasks import run_session

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channels_redis_url")]


class RawRecordingTransport(sim_transport.SimTransport):
    """The simulated provider, also keeping the raw bytes of each request it accepted."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.raw: list[bytes] = []

    def handle_request(self, request):
        accepted = len(self.requests)
        response = super().handle_request(request)
        if len(self.requests) > accepted:
            self.raw.append(request.content)
        return response


# The simulated model behind a plain endpoint, behind a gateway to a provider whose prompt
# cache is opt-in (requests carry cache marks), and behind a llama-cpp-python-like server
# that also takes tool results as user messages and one system message.
PROFILES = {"plain": {}, "cache_marks": {"cache_marks": True},
            "marks_on_merged_system": {"cache_marks": True, "single_system_message": True,
                                       "tool_results_as_user": True}}


@pytest.fixture(params=list(PROFILES))
def recorded_run(request, monkeypatch, sim_profile, django_user_model, client):
    profile = sim_profile
    if PROFILES[request.param]:
        profile = ModelProfile.objects.create(name=f"sim-{request.param}", model="taskos-sim",
                                              context_size=128_000, **PROFILES[request.param])
    transports: list[RawRecordingTransport] = []

    def sim_http_client(scenario, window, summarizer=None, latency_s=0.0):
        transport = RawRecordingTransport(scenario, window, summarizer, latency_s)
        transports.append(transport)
        return (sim_transport.httpx2.Client(transport=transport,
                                            base_url="http://sim.taskos.invalid/v1"), transport)

    monkeypatch.setattr(agents.runner, "sim_http_client", sim_http_client)
    owner = django_user_model.objects.create_user("ivy", password="ivy-secret-42")
    # A small window: the run compacts, so summary calls are exported too.
    session = services.create_session(owner, "", "sales-report", profile, 6000, {})
    run_session.apply(args=[session.pk])
    session.refresh_from_db()
    assert session.status == "finished", session.error
    client.force_login(owner)
    (transport,) = transports
    return session, transport, client


def calls_of(session):
    return list(SessionEvent.objects.filter(session=session, type="MODEL_CALL").order_by("seq")
                .values_list("payload", flat=True))


def test_every_export_is_the_body_the_provider_received(recorded_run):
    session, transport, client = recorded_run
    calls = calls_of(session)
    assert len(calls) == len(transport.raw) > 3
    kinds = {c["kind"] for c in calls}
    assert kinds == {"agent", "summary"}  # both kinds of call are covered
    shared = [c for c in calls if isinstance(c["request"].get("tools"), dict)]
    assert shared  # later calls refer to the tool schemas instead of copying them
    for payload, raw, parsed in zip(calls, transport.raw, transport.requests):
        response = client.get(f"/sessions/{session.pk}/calls/{payload['call']}.json")
        assert response.status_code == 200
        assert response["Content-Type"] == "application/json"
        assert response.content == raw, f"call {payload['call']} differs from what was sent"
        assert marked_parts(parsed) == []
        assert unmarked(json.loads(response.content)) == parsed
        assert payload["kind"] == "summary" or parsed.get("tools")  # schemas compared too
    # The simulated provider's parsed requests hold the text without its marks: the
    # marks are read from the bytes.
    marked = {(c["kind"], bool(marked_parts(json.loads(raw)))) for c, raw in zip(calls, transport.raw)}
    if session.profile.cache_marks:  # the marks of both kinds of call were compared too
        assert {("agent", True), ("summary", True)} <= marked
    else:
        assert not any(has_mark for _, has_mark in marked)


def unmarked(request):
    """`request` with each marked message's text as plain content, as the simulated
    provider keeps it."""
    return {**request, "messages": [
        {**m, "content": "".join(part["text"] for part in m["content"])}
        if isinstance(m.get("content"), list) else m for m in request["messages"]]}


def marked_parts(request) -> list[str]:
    """The texts of a request's messages that carry a cache mark, in order."""
    return [part["text"] for m in request["messages"] if isinstance(m["content"], list)
            for part in m["content"] if "cache_control" in part]


def test_the_inspector_rows_add_up_to_the_input_total(recorded_run):
    session, transport, client = recorded_run
    calls = calls_of(session)
    rewired = session.profile.single_system_message or session.profile.tool_results_as_user
    for payload, raw in zip(calls, transport.raw):
        html = client.get(f"/sessions/{session.pk}/inspect?call={payload['call']}").content.decode()
        parts = [int(n.replace(",", "")) for n in
                 re.findall(r'class="num part-tokens">(-?[\d,]+) tok<', html)]
        assert sum(parts) == payload["input_tokens"], f"call {payload['call']}"
        assert len(parts) >= len(payload["messages"]) + 1  # (tools,) messages, priming
        assert payload["kind"] == "summary" or "tool schemas" in html
        assert "<pre>null</pre>" not in html
        # Counted the provider's way (the simulated model counts as the engine does): no
        # row of difference, and no message of any kind of call shown as costing nothing.
        # (Merged system messages and tool results sent as user text count differently.)
        assert 0 not in parts, f"call {payload['call']}"
        assert rewired or "minus the engine" not in html, f"call {payload['call']}"
        if payload["kind"] == "summary":
            assert "zone-folded" in html and "zone-instructions" in html
        # A row is labelled where its message's text ends a prefix the request marked.
        assert html.count(">cache mark</span>") == len(marked_parts(json.loads(raw))), \
            f"call {payload['call']}"
