"""No database transaction is open while the engine waits (issue 25 item 1).

On SQLite a transaction is the database's one write lock (IMMEDIATE mode takes it at
BEGIN). The loop re-opened its batch right after a failed model call and then slept in
the retry backoff, so every other session, the lease heartbeats and the sweeper waited
for the lock — 320 s in the operator's run. Here one session waits in its backoff while a
second one runs whole: on the old code the second session's first write waited for the
lock until the busy timeout and failed with "database is locked".

The suite runs on PostgreSQL when it answers (row locks: the stall cannot show there), so
the SQLite case re-runs this file under SQLite in a child pytest when needed.
"""
from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.db import connection

import agents
from agents.loop.retry import RetryBudget
from taskos.runs import services
from taskos.runs.models import ModelProfile, Session
from tests.engine.fake_provider import FakeProvider

ROOT = Path(__file__).resolve().parents[2]


def run_beside_a_backoff(sim_profile) -> dict:
    """Session A meets a provider error and waits to retry; during that one wait session B
    (the simulated sales-report, 14 model calls) runs from start to end on its own thread.
    Returns what was seen."""
    from taskos.worker.execute import execute_session

    seen: dict = {"a_in_transaction": [], "b_status": None, "b_error": None}
    healthy = services.create_session(None, "Sales report", "sales-report", sim_profile,
                                      None, {})

    def run_healthy() -> None:
        try:
            started = time.perf_counter()
            seen["b_report"] = execute_session(Session.objects.get(pk=healthy.pk))
            seen["b_seconds"] = time.perf_counter() - started
        except Exception as exc:  # noqa: BLE001 - what the assertion reports
            seen["b_error"] = f"{type(exc).__name__}: {exc}"
        finally:
            connection.close()

    def backoff(seconds: float) -> None:
        # The engine's thread, inside its retry wait: is its connection in a transaction?
        seen["a_in_transaction"].append(connection.in_atomic_block)
        if seen["b_status"] is None:
            worker = threading.Thread(target=run_healthy, daemon=True)
            worker.start()
            worker.join(300)
            seen["b_status"] = Session.objects.get(pk=healthy.pk).status

    real_run = agents.run_session
    with FakeProvider(script=["500"], default="ok") as provider:
        profile = ModelProfile.objects.create(
            name="flaky", model="m", base_url=provider.base_url, api_key_env="", local=True,
            context_size=16_000)
        waiting = services.create_session(None, "Say hello.", "", profile, None, {})
        budget = RetryBudget(300, sleep=backoff, rng=lambda: 0.0)
        agents.run_session = functools.partial(real_run, retries=budget)
        try:
            report = execute_session(Session.objects.get(pk=waiting.pk))
        finally:
            agents.run_session = real_run
    seen["a_status"] = report["status"]
    return seen


@pytest.mark.django_db(transaction=True)
def test_a_session_in_retry_backoff_holds_no_transaction(channels_redis_url, sim_profile):
    seen = run_beside_a_backoff(sim_profile)
    assert seen["a_status"] == "finished"
    assert seen["a_in_transaction"] and not any(seen["a_in_transaction"])
    assert seen["b_error"] is None, seen["b_error"]
    assert seen["b_status"] == "finished"  # all its turns while the other one waited
    print(f"\nhealthy session beside a backoff: {len(seen['b_report']['model_calls'])} calls "
          f"in {seen['b_seconds']:.2f} s")


@pytest.mark.django_db(transaction=True)
def test_on_sqlite_a_session_in_backoff_stalls_no_other(channels_redis_url):
    if connection.vendor == "sqlite":
        from taskos.worker.execute import execute_session
        sim = ModelProfile.objects.get_or_create(
            name="sim", defaults={"model": "taskos-sim", "context_size": 128_000})[0]
        warm_up = services.create_session(None, "Sales report", "sales-report", sim, None, {})
        execute_session(warm_up)  # imports and caches: not what is compared
        solo = services.create_session(None, "Sales report", "sales-report", sim, None, {})
        started = time.perf_counter()
        calls = len(execute_session(solo)["model_calls"])
        solo_rate = calls / (time.perf_counter() - started)
        seen = run_beside_a_backoff(sim)
        assert seen["b_error"] is None, seen["b_error"]
        assert seen["b_status"] == "finished" and seen["a_status"] == "finished"
        # A figure for the note, not an assertion: timing is not deterministic here.
        beside_rate = len(seen["b_report"]["model_calls"]) / seen["b_seconds"]
        print(f"\nSQLite turn rate of a healthy session: alone {solo_rate:.1f} calls/s, "
              f"beside a session in retry backoff {beside_rate:.1f} calls/s "
              f"({beside_rate / solo_rate:.0%} of alone)")
        return
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
         f"{Path(__file__).relative_to(ROOT)}::test_on_sqlite_a_session_in_backoff_stalls_no_other"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-2000:]
    assert "1 passed" in child.stdout
    print(child.stdout.strip().splitlines()[0] if child.stdout.strip() else "")
