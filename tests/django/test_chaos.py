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

from taskos.ops.chaos.report import FAILURES, summary_text
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
