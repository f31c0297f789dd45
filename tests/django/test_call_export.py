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
from taskos.runs.models import SessionEvent
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


@pytest.fixture
def recorded_run(monkeypatch, sim_profile, django_user_model, client):
    transports: list[RawRecordingTransport] = []

    def sim_http_client(scenario, window, summarizer=None, latency_s=0.0):
        transport = RawRecordingTransport(scenario, window, summarizer, latency_s)
        transports.append(transport)
        return (sim_transport.httpx2.Client(transport=transport,
                                            base_url="http://sim.taskos.invalid/v1"), transport)

    monkeypatch.setattr(agents.runner, "sim_http_client", sim_http_client)
    owner = django_user_model.objects.create_user("ivy", password="ivy-secret-42")
    # A small window: the run compacts, so summary calls are exported too.
    session = services.create_session(owner, "", "sales-report", sim_profile, 6000, {})
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
        assert json.loads(response.content) == parsed
        assert payload["kind"] == "summary" or parsed.get("tools")  # schemas compared too


def test_the_inspector_rows_add_up_to_the_input_total(recorded_run):
    session, transport, client = recorded_run
    calls = calls_of(session)
    for payload in calls:
        html = client.get(f"/sessions/{session.pk}/inspect?call={payload['call']}").content.decode()
        parts = [int(n.replace(",", "")) for n in
                 re.findall(r'class="num part-tokens">(-?[\d,]+) tok<', html)]
        assert sum(parts) == payload["input_tokens"], f"call {payload['call']}"
        assert len(parts) >= len(payload["messages"]) + 1  # (tools,) messages, priming
        assert payload["kind"] == "summary" or "tool schemas" in html
        assert "<pre>null</pre>" not in html
        # Counted the provider's way (the simulated model counts as the engine does): no
        # row of difference, and no message of any kind of call shown as costing nothing.
        assert "minus the engine" not in html and 0 not in parts, f"call {payload['call']}"
        if payload["kind"] == "summary":
            assert "zone-folded" in html and "zone-instructions" in html
