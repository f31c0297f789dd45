"""The drawer's reads of a few event types go through the (session, type, seq) index.

Ordered by seq, or bounded above by seq twice, SQLite read a handful of types (the
approvals', the errors', the people's anchor edits before the recent ones) through the
(session, seq) index instead: every event of the session, ~10 000 rows on a finished
long-1000 page, for ~100 it kept."""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from taskos.drawer.base import panel_events
from taskos.drawer.events import load_events
from taskos.drawer.panels import PANELS
from taskos.drawer.panels.records import CHANGES_SHOWN

from .factories import add_events, budget, model_call

pytestmark = [pytest.mark.django_db,
              pytest.mark.skipif(connection.vendor != "sqlite",
                                 reason="SQLite's choice of index (no statistics: by the query)")]

SEQ_INDEX = "sqlite_autoindex_runs_sessionevent_1"  # the unique (session, seq)


def anchor_change(n: int, source: str) -> tuple[str, dict, int]:
    return ("ANCHOR_CHANGED", {"id": n, "tier": 2, "old": None, "new": f"value {n}",
                               "source": source, "action": "added"}, n)


def plans(queries) -> list[tuple[str, str]]:
    """(statement, how SQLite reads it) of each query that picks event types."""
    found = []
    with connection.cursor() as cursor:
        for query in queries.captured_queries:
            if '"runs_sessionevent"."type"' not in query["sql"].split(" WHERE ", 1)[-1]:
                continue  # the newest seq: by (session, seq), as it should
            cursor.execute("EXPLAIN QUERY PLAN " + query["sql"])
            found.append((query["sql"], " ".join(str(row[-1]) for row in cursor.fetchall())))
    return found


def test_the_page_s_reads_of_event_types_use_the_type_index(session):
    add_events(session, budget(history=100), model_call(1, 900),
               ("HINT_BLOCK", {"kind": "progress", "text": "go"}), anchor_change(0, "admin"),
               *[anchor_change(n, "tool") for n in range(1, CHANGES_SHOWN + 5)],
               ("ERROR", {"code": "x", "message": "y"}))
    with CaptureQueriesContext(connection) as queries:
        read = panel_events(session, PANELS)
    assert {ev.type for ev in read} >= {"MODEL_CALL", "HINT_BLOCK", "ANCHOR_CHANGED", "ERROR"}
    found = plans(queries)
    # the calls, the types read whole, and the newest and the people's earlier anchor edits
    assert len(found) >= 4
    for statement, plan in found:
        assert SEQ_INDEX not in plan and "runs_event_type" in plan, (statement, plan)


def test_a_read_of_named_types_uses_the_type_index(session):
    add_events(session, model_call(1, 900), ("HINT_BLOCK", {"kind": "progress", "text": "go"}))
    with CaptureQueriesContext(connection) as queries:
        read = load_events(session, {"HINT_BLOCK", "ERROR", "MODEL_CALL"})
    assert [ev.type for ev in read] == ["MODEL_CALL", "HINT_BLOCK"]
    for statement, plan in plans(queries):
        assert SEQ_INDEX not in plan, (statement, plan)
