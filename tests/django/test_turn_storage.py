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
from agents.context.working import ANNOTATIONS
from taskos.drawer.events import call_payload
from taskos.replays.compare import agent_requests
from taskos.runs import services
from taskos.runs.models import SessionEvent
from taskos.worker.execute import execute_session

from .conftest import sent_statements

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("channels_redis_url")]


def run_recording_bodies(sim_profile, monkeypatch, scenario, window=None, settings=None):
    """Run a session through the worker path; return it with every body the simulated
    provider received, in order."""
    transports = []
    original = agents.runner.sim_http_client

    def recording(*args, **kwargs):
        client, transport = original(*args, **kwargs)
        transports.append(transport)
        return client, transport

    monkeypatch.setattr(agents.runner, "sim_http_client", recording)
    session = services.create_session(None, "", scenario, sim_profile, window, settings or {})
    report = execute_session(session)
    assert report["status"] == "finished"
    return session, transports[0].requests


def sent(messages):
    return [{k: v for k, v in m.items() if k not in ANNOTATIONS} for m in messages]


@pytest.mark.parametrize("clearing", [False, True], ids=["summaries", "clears"])
def test_every_stored_call_rebuilds_the_exact_body_the_provider_received(sim_profile,
                                                                         monkeypatch, clearing):
    # A small window: compactions, and agent calls that only add to the previous request,
    # occur. With clearing off they are summaries whose requests reuse the agent's prefix;
    # with it on, old tool results are cleared from the requests and no summary is needed.
    session, bodies = run_recording_bodies(sim_profile, monkeypatch, "retrieval-6x1600",
                                           window=4000,
                                           settings={"clear_tool_results": clearing})
    rows = list(SessionEvent.objects.filter(session=session, type="MODEL_CALL")
                .order_by("seq").values_list("payload", flat=True))
    assert len(rows) == len(bodies) > 5
    kinds = {row["kind"] for row in rows}
    assert kinds == ({"agent"} if clearing else {"agent", "summary"})
    compactions = {payload["kind"] for payload in SessionEvent.objects.filter(
        session=session, type="COMPACTION").values_list("payload", flat=True)}
    assert ("clear" in compactions) == clearing
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
    # A tool result sent as archived is stored as its archive row, not copied (issue 8).
    by_ref = [m for row in rows for m in row["messages"] if "content_ref" in m]
    assert by_ref and all("content" not in m for m in by_ref)
    assert {m["role"] for m in by_ref} >= {"tool"}


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
    sql = sent_statements(queries)
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


def test_the_engine_state_is_saved_in_pieces_each_written_once(sim_profile):
    from taskos.runs.models import EngineStateChunk, Session
    from taskos.store.django_store import DjangoStore

    session = services.create_session(None, "", "sales-report", sim_profile, None, {})
    store = DjangoStore()
    sid = str(session.pk)
    history = [{"data": {"role": "user", "content": f"message {i}", "name": "n"},
                "tokens": 9, "turn": i, "ref": f"arc:{sid}:{i}"} for i in range(6)]
    # Keys out of the engine's usual order stay as they were (the inspector rebuilds bytes).
    history[2]["data"] = {"content": "odd order", "role": "tool", "tool_call_id": "c1"}
    state = {"turn": 6, "events_seq": 40,
             "context": {"history": history, "summary": {"task_overview": ["goal"]},
                         "summary_text": "<summary>goal</summary>", "person": [],
                         "window": 128000},
             "companions": {"audit": {"known": ["1", "2"]}, "report": {"sums": {"calls": 6}}},
             "handoff": {}}
    store.save_state(sid, state)
    assert store.load_state(sid) == state
    assert list(store.load_state(sid)["context"]["history"][2]["data"]) == \
        ["content", "role", "tool_call_id"]
    head = Session.objects.get(pk=session.pk).engine_state
    assert head["turn"] == 6 and "odd order" not in json.dumps(head)  # pieces are apart
    assert head["companions"]["report"] == {"sums": {"calls": 6}}  # read by the comparison

    # The next turn appends a message: only that piece and the head are written.
    state["context"]["history"] = history + [{"data": {"role": "assistant", "content": "ok"},
                                              "tokens": 5, "turn": 6, "ref": ""}]
    state["turn"] = 7
    with CaptureQueriesContext(connection) as queries:
        store.save_state(sid, state)
    inserts = [q["sql"] for q in queries.captured_queries
               if q["sql"].startswith('INSERT INTO "runs_enginestatechunk"')]
    assert "ON CONFLICT" in inserts[0]  # a piece another save already wrote is no error
    assert len(inserts) == 1 and inserts[0].count('"ok"') == 1 and "message 1" not in inserts[0]
    # A new process (a resume) reads the same state back.
    assert DjangoStore().load_state(sid) == state
    # 7 messages; the summary, its text, the audit and the audit's figures.
    assert EngineStateChunk.objects.filter(session=session).count() == 7 + 4


def test_a_turn_writes_the_audits_small_part_not_its_figures_or_the_summary(sim_profile,
                                                                             monkeypatch):
    """The audit changes every turn (the refs it has yet to read) but its figures and the
    summary only per compaction: a turn's save writes the small part alone, and dumps
    neither the figures nor the summary again while they are the same objects. Before,
    every turn wrote the whole audit anew (24 kB a turn on long-200) and dumped the
    summary twice (~50 kB of JSON)."""
    from taskos.runs.models import EngineStateChunk
    from taskos.store import state_chunks
    from taskos.store.django_store import DjangoStore

    session = services.create_session(None, "", "sales-report", sim_profile, None, {})
    store, sid = DjangoStore(), str(session.pk)
    known = [f"{n}.5" for n in range(2000)]
    summary = {"important_discoveries": ["revenue rose 12.5 %"] * 50}
    state = {"turn": 1, "context": {"history": [], "summary": summary,
                                    "summary_text": "<summary>" + "x" * 5000 + "</summary>"},
             "companions": {"audit": {"unread": [["arc:1:1", "raw"]], "known": known}}}
    store.save_state(sid, state)
    dumped: list[str] = []
    real_dump = state_chunks._dump
    monkeypatch.setattr(state_chunks, "_dump", lambda value: dumped.append(
        str(value)[:40]) or real_dump(value))
    state = {**state, "turn": 2, "companions": {"audit": {
        "unread": [["arc:1:1", "raw"], ["arc:1:2", "raw"]], "known": known}}}
    with CaptureQueriesContext(connection) as queries:
        store.save_state(sid, state)
    pieces = " ".join(q["sql"] for q in queries.captured_queries
                      if q["sql"].startswith('INSERT INTO "runs_enginestatechunk"'))
    assert "arc:1:2" in pieces and "1999.5" not in pieces and "revenue" not in pieces
    assert [d for d in dumped if "1999.5" in d or "revenue" in d or "xxx" in d] == []
    assert DjangoStore().load_state(sid) == state
    # New figures (a compaction read the archive): a new list, stored once more.
    state["companions"]["audit"]["known"] = known + ["7.25"]
    store.save_state(sid, state)
    assert DjangoStore().load_state(sid) == state
    assert EngineStateChunk.objects.filter(session=session, key__startswith="known:").count() == 2


def test_the_reports_summary_figures_leave_the_head_and_are_written_when_they_grow(
        sim_profile):
    """The report changes every turn (its sums) and stays in the head; the figures every
    summary wrote grow per compaction only, so they are a piece of their own."""
    from taskos.runs.models import EngineStateChunk, Session
    from taskos.store.django_store import DjangoStore

    session = services.create_session(None, "", "sales-report", sim_profile, None, {})
    store, sid = DjangoStore(), str(session.pk)
    figures = sorted(f"{n}.25 GWh" for n in range(1500))
    state = {"turn": 1, "context": {"history": []},
             "companions": {"report": {"sums": {"calls": 1}, "summary_figures": figures}}}
    store.save_state(sid, state)
    for turn in (2, 3):
        state = {**state, "turn": turn, "companions": {"report": {
            "sums": {"calls": turn}, "summary_figures": figures}}}
        store.save_state(sid, state)
        head = Session.objects.get(pk=session.pk).engine_state
        assert "1499.25 GWh" not in json.dumps(head) and '"calls": %d' % turn in json.dumps(head)
        assert DjangoStore().load_state(sid) == state
    pieces = EngineStateChunk.objects.filter(session=session, key__startswith="figures:")
    assert pieces.count() == 1
    state["companions"]["report"]["summary_figures"] = figures + ["7.5 %"]  # a new summary
    store.save_state(sid, state)
    assert pieces.count() == 2 and DjangoStore().load_state(sid) == state


def test_a_state_save_dumps_only_the_messages_it_has_not_dumped(sim_profile, monkeypatch):
    """The history's messages are dumped and hashed once (state_chunks.MessageMemo): a
    turn's save costs its new messages, and a message replaced by another dict or with
    other figures is dumped again."""
    from taskos.store import state_chunks
    from taskos.store.django_store import DjangoStore

    session = services.create_session(None, "", "sales-report", sim_profile, None, {})
    store, sid = DjangoStore(), str(session.pk)
    history = [{"data": {"role": "user", "content": f"message {i}"}, "tokens": 4, "turn": i,
                "ref": ""} for i in range(5)]
    state = {"turn": 5, "context": {"history": history}}
    store.save_state(sid, state)
    dumped: list[str] = []
    real_dump = state_chunks._dump
    monkeypatch.setattr(state_chunks, "_dump", lambda value: dumped.append(
        str(value)[:60]) or real_dump(value))
    # A new turn: fresh wrappers around the same message dicts (Msg.to_state), one new.
    history = [dict(m) for m in history] + [{"data": {"role": "assistant", "content": "ok"},
                                             "tokens": 3, "turn": 5, "ref": ""}]
    history[1]["tokens"] = 7  # figures changed: dumped again
    history[2] = {**history[2], "data": {"role": "user", "content": "cut"}}  # a new dict
    state = {"turn": 6, "context": {"history": history}}
    store.save_state(sid, state)
    assert [d for d in dumped if "'data'" in d] == [str(history[i])[:60] for i in (1, 2, 5)]
    assert DjangoStore().load_state(sid) == state


def test_pieces_no_head_names_are_deleted_with_a_later_save(sim_profile):
    from taskos.runs.models import EngineStateChunk
    from taskos.store import django_store as store_module

    session = services.create_session(None, "", "sales-report", sim_profile, None, {})
    store, sid = store_module.DjangoStore(), str(session.pk)
    for turn in range(store_module.STALE_CHUNKS + 10):
        message = {"data": {"role": "user", "content": f"turn {turn}"}, "tokens": 4,
                   "turn": turn, "ref": ""}
        store.save_state(sid, {"turn": turn, "context": {"history": [message]}})
    assert EngineStateChunk.objects.filter(session=session).count() <= \
        store_module.STALE_CHUNKS + 2
    assert store.load_state(sid)["context"]["history"][0]["data"]["content"] == \
        f"turn {store_module.STALE_CHUNKS + 9}"


def test_a_turn_reads_what_people_asked_for_in_one_statement(sim_profile):
    session = services.create_session(None, "", "sales-report", sim_profile, None, {})
    with CaptureQueriesContext(connection) as queries:
        report = execute_session(session)
    assert report["status"] == "finished"
    sql = sent_statements(queries)
    polls = [s for s in sql if s.startswith('SELECT "cancel_requested"')]
    assert len(polls) >= report["turns"]
    assert all('"runs_pendingmessage"' in s and '"compact_request" IS NOT NULL' in s
               for s in polls)
    # Nothing pending: no separate look for messages, compaction requests or notes.
    assert not [s for s in sql if s.startswith('SELECT 1 AS "a" FROM "runs_pendingmessage"')]
    assert not [s for s in sql if s.startswith('SELECT 1 AS "a" FROM "runs_session"')]
    # Notes are read alone only after a commit point (by a tool, or a compaction's handoff).
    notes = [s for s in sql if s.startswith('SELECT "runs_session"."notes"')]
    assert len(notes) <= report["turns"] // 4


def test_a_message_and_a_compaction_request_left_before_a_turn_are_taken(sim_profile):
    from taskos.runs.models import PendingMessage, Session
    from taskos.store.django_store import DjangoStore

    session = services.create_session(None, "", "sales-report", sim_profile, None, {})
    store, sid = DjangoStore(), str(session.pk)
    assert store.cancel_requested(sid) is False
    assert store.take_user_messages(sid) == [] and store.take_compaction_request(sid) is None
    PendingMessage.objects.create(session=session, text="also plot it")
    Session.objects.filter(pk=session.pk).update(compact_request="keep the totals",
                                                 notes={"n": 1})
    assert store.cancel_requested(sid) is False  # the turn's poll sees both
    assert store.load_notes(sid) == {"n": 1}
    assert store.take_user_messages(sid, turn=2) == ["also plot it"]
    assert store.take_compaction_request(sid) == "keep the totals"
    store.commit_batch()  # a model call: the next answers are read anew
    assert store.take_user_messages(sid) == [] and store.take_compaction_request(sid) is None


def test_read_refs_reads_own_rows_in_one_statement_and_others_like_read_ref(sim_profile):
    from taskos.store.django_store import DjangoStore

    session = services.create_session(None, "", "sales-report", sim_profile, None, {})
    other = services.create_session(None, "", "sales-report", sim_profile, None, {})
    store, sid = DjangoStore(), str(session.pk)
    refs = [store.archive(sid, 0, "tool", f"row {i}: 12 units") for i in range(5)]
    foreign = store.archive(str(other.pk), 0, "tool", "not yours")
    with CaptureQueriesContext(connection) as queries:
        texts = store.read_refs(sid, refs)
    assert len(queries.captured_queries) == 1
    assert texts == {ref: store.read_ref(sid, ref) for ref in refs}
    assert store.read_refs(sid, [foreign, "arc:x"]) == {foreign: None, "arc:x": None}
