"""The short chaos run (issue 9): real workers and a real Redis killed, nothing lost or doubled.

Three Celery worker processes and a private redis-server run four sessions against the test
database (one waits in the queue, and idle workers appear as sessions end, so a duplicate
message would be run at once); a seeded schedule SIGKILLs two busy workers and Redis twice.
The workers' own sweeper and the lease must bring every session to the same end as an
uninterrupted run. Without the sweeper the run ends with sessions still running or queued;
without the lease it reports double executions and duplicated turns.
"""
from __future__ import annotations

import socket

import pytest

from django.utils import timezone

from taskos.ops.chaos.compare import compare, fingerprint
from taskos.ops.chaos.pages import chaos_owner, check_pages
from taskos.ops.chaos.report import FAILURES, summarize, summary_text
from taskos.ops.chaos.run import ChaosPlan, kill_schedule, run_chaos, worker_env
from taskos.ops.chaos.scenario import write_chaos_scenario
from taskos.ops.chaos.stack import Stack
from taskos.ops.chaos.this_process import database_url, using_redis

pytestmark = pytest.mark.django_db(transaction=True)

PLAN = ChaosPlan(sessions=4, kills=4, workers=3, seed=10, timeout_s=240)
TURNS = 24


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_seeded_schedule_kills_workers_and_redis_mid_run():
    kills = kill_schedule(PLAN)
    assert [k.target for k in kills] == ["worker", "redis", "worker", "redis"]
    assert kills == kill_schedule(PLAN)  # the same seed, the same kills
    assert all(PLAN.progress[0] <= k.at_share <= PLAN.progress[1] for k in kills)


def stored(session, *events):
    for seq, (kind, turn, payload) in enumerate(events, start=1):
        session.events.create(seq=seq, type=kind, turn=turn, payload=payload, at=timezone.now())
    return session


def run_with_compaction_at(make_session, turn):
    """A finished run of four turns that compacts before the agent call of `turn`."""
    events = [("SESSION_STARTED", 0, {"goal": "g"})]
    for n in range(1, 5):
        events.append(("TURN_STARTED", n, {"turn": n}))
        if n == turn:
            events += [("COMPACTION_STARTED", n, {"trigger": "rolling"}),
                       ("MODEL_CALL", n, {"call": 10 * n, "kind": "summary"}),
                       ("COMPACTION", n, {"trigger": "rolling"})]
        events.append(("MODEL_CALL", n, {"call": 10 * n + 1, "kind": "agent",
                                         "finish_reason": "tool_calls"}))
        if n == turn:  # the source audit of the first request after the compaction
            events.append(("AUDIT", n, {"compaction_turn": n, "ok": True}))
    session = make_session(status="finished", turns=4)
    return stored(session, *events, ("SESSION_FINISHED", 4, {"status": "finished"}))


def test_an_audit_that_moves_with_its_compaction_is_no_difference(make_session):
    """Issue 25 item 11: the resume note's tokens fired the trigger a turn early; the AUDIT
    of the request after the compaction moved with it, and nothing was lost."""
    baseline = fingerprint(run_with_compaction_at(make_session, 3))
    found = compare(run_with_compaction_at(make_session, 2), baseline)
    assert found["differs_in"] == [] and found["compactions_moved"] == 1
    assert not found["lost_turns"] and not found["duplicated_turns"]


def calls_offering_tools(make_session):
    tools = '[{"type": "function", "function": {"name": "read_file", "parameters": {}}}]'
    request = {"model": "taskos-sim", "messages": "<messages>", "max_tokens": 500}
    return stored(make_session(owner=chaos_owner(), status="finished"),
                  ("SESSION_STARTED", 0, {"goal": "g"}),
                  ("MODEL_CALL", 1, {"call": 1, "request": {**request, "tools": tools}}),
                  ("MODEL_CALL", 2, {"call": 2, "request": {**request,
                                                            "tools": {"tools_of_call": 1}}}))


def test_the_page_check_opens_every_page_and_counts_what_fails(make_session, monkeypatch):
    found = check_pages(calls_offering_tools(make_session))
    # The page, resync, transcript, inspector, archive, the websocket's first sync, and
    # for each call its inspector, record and request export.
    assert found == {"requests": 6 + 2 * 3, "page_errors": 0, "failed": []}

    from taskos.drawer.panels import inspector
    from taskos.web import exports
    real = inspector.read_call_detail

    def broken(session, number):
        if number == 2:
            raise KeyError("tools")
        return real(session, number)

    monkeypatch.setattr(inspector, "read_call_detail", broken)
    monkeypatch.setattr(exports, "request_body", lambda session, number: (
        b'{"model": "taskos-sim", "tools": {"tools_of_call": 1}}'))
    found = check_pages(calls_offering_tools(make_session))
    # Call 2 is the latest: the page, the resync, the following inspector and its own fail,
    # the websocket's sync raises; both exports serve a marker for schemas.
    assert found["page_errors"] == 4 + 1 + 2
    assert found["failed"][:3] == ["/: HTTP 500", "/events?after=0: HTTP 500",
                                   "/inspect: HTTP 500"]
    assert found["failed"][3] == "websocket sync: KeyError: 'tools'"
    assert found["failed"][4].startswith('calls/1.json: tools are {"tools_of_call": 1}')
    assert len(found["failed"]) == 5  # the report lists a few; the count is exact


def test_a_page_error_fails_the_run():
    result = {"status": "finished", "differs_in": [], "lost_turns": [],
              "duplicated_turns": [], "lost_archive_rows": 0, "duplicated_archive_rows": 0,
              "duplicated_call_numbers": 0, "double_executions": 0, "call_numbers_ok": True,
              "resumes": 1, "compactions_moved": 0, "compactions": (1, 1),
              "discarded_events": 3, "session": 7, "turns": 4, "requests": 40,
              "page_errors": 1, "failed": ["/inspect?call=5: HTTP 500"]}
    report = summarize(PLAN, 1, [result], [{"target": "worker"}] * PLAN.kills, 1.0, "")
    assert not report["ok"] and report["totals"]["page_errors"] == 1
    text = summary_text(report)
    assert "page_errors" in text and "session 7 page /inspect?call=5: HTTP 500" in text
    assert summarize(PLAN, 1, [{**result, "page_errors": 0, "failed": []}],
                     [{"target": "worker"}] * PLAN.kills, 1.0, "")["ok"]


def test_a_short_chaos_run_loses_and_doubles_nothing(sim_profile, tmp_path):
    try:
        database = database_url()
    except ValueError as exc:
        pytest.skip(f"worker processes cannot share this test database: {exc}")
    scenario = write_chaos_scenario(tmp_path, TURNS)
    stack = Stack(run_dir=tmp_path, redis_url=f"redis://127.0.0.1:{free_port()}/0",
                  workers=PLAN.workers, env=worker_env(PLAN, tmp_path / "workspaces", database))
    with using_redis(stack.redis_url, PLAN.lease_s):
        report = run_chaos(PLAN, scenario, stack, say=print)
    print(summary_text(report))
    totals = report["totals"]
    assert {name: totals[name] for name in FAILURES} == dict.fromkeys(FAILURES, 0)
    assert [k["target"] == "redis" for k in report["kills"]] == [False, True, False, True]
    assert all(r["status"] == "finished" and not r["differs_in"] for r in report["sessions"])
    assert report["ok"]
