"""The database path of a turn (issue 8): MODEL_CALL rows store what is new in a request
and still rebuild the exact body; a turn's events are stored in batches, with one durable
commit (the state save) per turn."""
from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import agents.runner
from taskos.drawer.events import call_payload
from taskos.runs import services
from taskos.runs.compare import agent_requests
from taskos.runs.models import SessionEvent
from taskos.runs.tasks import execute_session

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("channels_redis_url")]


def run_recording_bodies(sim_profile, monkeypatch, scenario, window=None):
    """Run a session through the worker path; return it with every body the simulated
    provider received, in order."""
    transports = []
    original = agents.runner.sim_http_client

    def recording(*args, **kwargs):
        client, transport = original(*args, **kwargs)
        transports.append(transport)
        return client, transport

    monkeypatch.setattr(agents.runner, "sim_http_client", recording)
    session = services.create_session(None, "", scenario, sim_profile, window, {})
    report = execute_session(session)
    assert report["status"] == "finished"
    return session, transports[0].requests


def sent(messages):
    return [{k: v for k, v in m.items() if k not in ("zone", "tokens")} for m in messages]


def test_every_stored_call_rebuilds_the_exact_body_the_provider_received(sim_profile,
                                                                         monkeypatch):
    # A small window: compactions, summary requests that reuse the agent's prefix, and
    # agent calls that only add to the previous request all occur.
    session, bodies = run_recording_bodies(sim_profile, monkeypatch, "retrieval-6x1600",
                                           window=4000)
    rows = list(SessionEvent.objects.filter(session=session, type="MODEL_CALL")
                .order_by("seq").values_list("payload", flat=True))
    assert len(rows) == len(bodies) > 5
    kinds = {row["kind"] for row in rows}
    assert kinds == {"agent", "summary"}
    for row, body in zip(rows, bodies):
        rebuilt = call_payload(session, row["call"])
        assert sent(rebuilt["messages"]) == body["messages"], row["call"]
        assert all("zone" in m and "tokens" in m for m in rebuilt["messages"])
        assert "message_parts" not in rebuilt and "message_meta" not in rebuilt
    # Stored as what is new: most rows hold fewer messages than their request had.
    partial = [row for row, body in zip(rows, bodies)
               if len(row["messages"]) < len(body["messages"])]
    assert len(partial) >= len(rows) // 2
    stored = sum(len(json.dumps(row["messages"])) for row in rows)
    whole = sum(len(json.dumps(body["messages"])) for body in bodies)
    assert stored < 0.7 * whole


def test_the_call_export_and_the_replay_comparison_read_whole_requests(sim_profile,
                                                                       monkeypatch, client,
                                                                       django_user_model):
    session, bodies = run_recording_bodies(sim_profile, monkeypatch, "sales-report")
    user = django_user_model.objects.create_user("owner", password="pw-12345678")
    session.owner = user
    session.save(update_fields=["owner"])
    client.force_login(user)
    last = SessionEvent.objects.filter(session=session, type="MODEL_CALL").count()
    exported = client.get(f"/sessions/{session.pk}/calls/{last}.json").json()
    assert sent(exported["messages"]) == bodies[last - 1]["messages"]
    agent_bodies = [b["messages"] for b in bodies if b.get("tool_choice") != "none"]
    assert [messages for _, _, messages in agent_requests(session)] == agent_bodies


def test_a_turn_stores_its_events_in_batches_and_commits_durably_once(sim_profile):
    session = services.create_session(None, "", "sales-report", sim_profile, None, {})
    with CaptureQueriesContext(connection) as queries:
        report = execute_session(session)
    turns = report["turns"]
    sql = [q["sql"] for q in queries.captured_queries]
    events = SessionEvent.objects.filter(session=session).count()
    inserts = [s for s in sql if s.startswith('INSERT INTO "runs_sessionevent"')]
    # Events are inserted in bulk at the commit points (before and after each model call,
    # before each tool, before the state save), not one statement each.
    assert events > 6 * turns
    assert len(inserts) <= 0.6 * events
    if connection.vendor == "postgresql":
        # The state save is the only commit per turn that waits for the disk.
        durable = [s for s in sql if re.match(r"SET LOCAL synchronous_commit TO ON", s)]
        assert len(durable) == turns
        assert sum(1 for s in sql if s == "SET synchronous_commit TO OFF") == 1
