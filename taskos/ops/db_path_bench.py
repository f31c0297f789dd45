"""The engine's turn on the configured database against the same turn in memory (issue 8).

`measure(runs)` runs long-200 the way `runtask` does (a session row, the Django store,
the event log, the channel layer) and the way `bench` does (MemoryStore), alternately,
`runs` times each, and reports each run's median engine ms per turn with the ratio of
the medians. Alternating keeps both sides on the same machine load; the figures are wall
time, so they follow it anyway. It also counts what a turn sends the database:
statements (transaction control left out), the queries carrying them (fewer on
PostgreSQL, which sends a batch's writes together) and commits. The sessions it made are
deleted.
"""
from __future__ import annotations

import statistics
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from django.db import connection

from agents import run_once
from taskos.runs.models import ModelProfile, Session
from taskos.runs.services import create_session
from taskos.worker.execute import execute_tree

SCENARIO, WINDOW = "long-200", 128_000
CONTROL = ("BEGIN", "SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK TO SAVEPOINT")


@contextmanager
def _counted() -> Iterator[dict[str, int]]:
    """Statements, the queries that carried them and commits sent on this thread's
    connection meanwhile. On PostgreSQL a batch's kept writes (taskos/store/batch_writes.py)
    are statements sent together in one query."""
    counts = {"statements": 0, "queries": 0, "commits": 0}

    def count(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        control = sql.lstrip().upper().startswith(CONTROL)
        counts["statements"] += not control and not context.get("flush")
        counts["queries"] += not control and not context.get("kept")
        return result

    def commit():
        counts["commits"] += 1
        return real_commit()

    real_commit = connection.commit  # what a transaction.atomic() block ends with
    connection.commit = commit
    try:
        with connection.execute_wrapper(count):
            yield counts
    finally:
        del connection.commit


def _database_run(profile: ModelProfile) -> dict[str, Any]:
    session = create_session(owner=None, goal="", scenario=SCENARIO, profile=profile,
                             window=WINDOW, context_settings={})
    try:
        with _counted() as counts:
            report = execute_tree(session)
        turns = max(1, int(report.get("turns") or 0))
        return {"median_ms": report["engine_ms_per_turn_median"], "status": report["status"],
                "statements_per_turn": round(counts["statements"] / turns, 1),
                "queries_per_turn": round(counts["queries"] / turns, 1),
                "commits_per_turn": round(counts["commits"] / turns, 1)}
    finally:
        Session.objects.filter(pk=session.pk).delete()


def measure(runs: int = 3, out: Callable[[str], None] = print) -> dict[str, Any]:
    profile = ModelProfile.objects.filter(name="sim").first()
    if profile is None:
        raise LookupError("No model profile 'sim' (the migrations create it): migrate first.")
    memory, database = [], []
    for number in range(1, runs + 1):
        memory.append(run_once(SCENARIO, WINDOW, managed=True).report["engine_ms_per_turn_median"])
        database.append(_database_run(profile))
        out(f"  run {number}: in memory {memory[-1]:.2f} ms, {connection.vendor} "
            f"{database[-1]['median_ms']:.2f} ms per turn (median)")
    ratio = statistics.median(d["median_ms"] for d in database) / statistics.median(memory)
    return {"vendor": connection.vendor, "scenario": SCENARIO, "runs": runs,
            "memory_median_ms": memory, "database_median_ms": [d["median_ms"] for d in database],
            "ratio": round(ratio, 2),
            "statements_per_turn": database[-1]["statements_per_turn"],
            "queries_per_turn": database[-1]["queries_per_turn"],
            "commits_per_turn": database[-1]["commits_per_turn"],
            "statuses": sorted({d["status"] for d in database})}
