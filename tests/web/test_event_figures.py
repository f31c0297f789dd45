"""A MODEL_CALL's, a compaction's and a tool result's figures are kept beside their
payloads (SessionEvent.figures) and the drawer reads them there: a finished long-1000 page
charts ~1 000 calls whose payloads (messages, request, reply) are ~5 MB to parse for ~23
figures a call. A row stored before the column existed is read from its payload."""
from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents import Compaction, ModelCall, ToolResult
from taskos.drawer.base import panel_events
from taskos.drawer.events import CALL_KEYS
from taskos.drawer.panels import PANELS
from taskos.runs.models import SessionEvent, event_figures
from taskos.store.event_log import EventLog
from taskos.store.stored_events import select, stored_event

from .factories import add_events, compaction, model_call

pytestmark = pytest.mark.django_db

COMPACTION_KEYS = ("trigger", "before", "after", "refs", "audit")
RESULT_KEYS = ("name", "error", "kept_tokens", "original_tokens", "child", "reused")
fill_figures = importlib.import_module("taskos.runs.migrations.0025_sessionevent_figures"
                                       ).fill_figures
fill_result_figures = importlib.import_module(
    "taskos.runs.migrations.0026_tool_result_figures").fill_figures


def tool_result(name: str, kept: int, **extra) -> tuple[str, dict]:
    return ("TOOL_RESULT", {"call_id": f"c-{name}", "name": name, "original_chars": 4 * kept,
                            "kept_chars": 4 * kept, "original_tokens": kept,
                            "kept_tokens": kept, "truncated": False, "preview": "x" * 300,
                            "conclusions": ["sales up"], **extra})


def read(session, cls, keys):
    return sorted(select(SessionEvent.objects.filter(session=session), cls, keys),
                  key=lambda ev: ev.seq)


def whole(row: SessionEvent):
    return stored_event(row.type, row.payload, seq=row.seq, turn=row.turn, at=row.at)


def test_a_call_s_a_compaction_s_and_a_result_s_figures_are_stored_without_bulk(session):
    call, squeeze, budget_row, result = add_events(
        session, model_call(1, 900), compaction(), ("BUDGET", {"window": 8000}),
        tool_result("read_file", 40))
    for row in (call, squeeze, budget_row, result):
        row.refresh_from_db()
    assert result.figures["kept_tokens"] == 40 and "preview" not in result.figures
    assert call.figures["input_tokens"] == 900 and call.figures["zones"]["history"] == 350
    assert "messages" not in call.figures and "messages" in call.payload
    assert "summary_after" not in squeeze.figures and squeeze.figures["trigger"] == "rolling"
    assert budget_row.figures is None  # no bulk: read from its payload


def test_the_figures_are_read_and_never_the_payload(session):
    add_events(session, model_call(1, 900, cost=0.25), compaction(after_history=700),
               tool_result("fetch_document", 250))
    # A payload changed behind the figures' back (an update skips `save`): what is read
    # is the figures', so the payloads were not.
    for row in SessionEvent.objects.filter(session=session):
        SessionEvent.objects.filter(pk=row.pk).update(
            payload={**row.payload, "input_tokens": 1, "trigger": "manual", "kept_tokens": 2})
    (call,) = read(session, ModelCall, CALL_KEYS)
    assert (call.call, call.input_tokens, call.cost, call.messages) == (1, 900, 0.25, [])
    (squeeze,) = read(session, Compaction, COMPACTION_KEYS)
    assert squeeze.trigger == "rolling" and squeeze.after["history"] == 700
    (result,) = read(session, ToolResult, RESULT_KEYS)
    assert (result.name, result.kept_tokens, result.preview) == ("fetch_document", 250, "")


def test_a_page_s_call_and_compaction_reads_select_no_payload_of_a_row_with_figures(session):
    add_events(session, model_call(1, 900), compaction(), model_call(2, 1000),
               tool_result("fetch_document", 250), tool_result("delegate", 90, child="7"))
    with CaptureQueriesContext(connection) as queries:
        panel_events(session, PANELS)
    # Every call, and the compactions and tool results before the newest (read whole).
    reads = [q["sql"] for q in queries.captured_queries
             if any(f"'{kind}'" in q["sql"] for kind in ("MODEL_CALL", "COMPACTION",
                                                          "TOOL_RESULT"))
             and " LIMIT " not in q["sql"]]
    assert len(reads) == 3
    for statement in reads:
        # What is selected: the payload only where the figures are NULL (a row stored
        # before them). (The children panel's filter on a result's child is or-ed with
        # the cost panel's every row: SQLite and PostgreSQL stop at the first.)
        selected = statement.split(' FROM "runs_sessionevent"')[0]
        assert '"runs_sessionevent"."figures"' in selected, statement
        assert selected.count('"runs_sessionevent"."payload"') == 1, statement
        assert 'WHEN "runs_sessionevent"."figures" IS NULL THEN' in selected, statement


@pytest.mark.parametrize("cls, keys", [(ModelCall, CALL_KEYS), (Compaction, COMPACTION_KEYS),
                                       (ToolResult, RESULT_KEYS)])
def test_rows_stored_before_the_figures_read_as_the_whole_row_gives_them(session, cls, keys):
    kind, payload = model_call(1, 900, over=True)
    rows = add_events(session, (kind, {**payload, "refused": None}), model_call(2, 1200),
                      compaction(), compaction("anchor", after_history=650),
                      tool_result("read_file", 40, error=None),
                      tool_result("delegate", 90, child="7", reused=True))
    with_figures = read(session, cls, keys)
    for row in rows[1::2]:  # the second of each type
        SessionEvent.objects.filter(pk=row.pk).update(figures=None)
    selected = read(session, cls, keys)
    wholes = [whole(row) for row in rows if row.type == cls.TYPE]
    assert len(selected) == len(wholes) == 2
    for ev, full, figured in zip(selected, wholes, with_figures):
        expected = {key: getattr(full, key) for key in keys}
        assert {key: getattr(ev, key) for key in keys} == expected
        assert {key: getattr(figured, key) for key in keys} == expected


def test_the_event_log_stores_the_figures_of_a_batch_and_of_a_single_event(session):
    log = EventLog(session, announce=lambda event, wait: None)
    log.hold()
    log.emit(ModelCall(call=1, kind="agent", input_tokens=700, zones={"history": 300},
                       messages=[{"role": "user", "content": "go"}]))
    log.emit(Compaction(trigger="rolling", summary_after="## Progress"))
    log.release()
    log.emit(ModelCall(call=2, kind="summary", input_tokens=900, cost=0.5))
    rows = list(SessionEvent.objects.filter(session=session).order_by("seq"))
    assert [row.type for row in rows] == ["MODEL_CALL", "COMPACTION", "MODEL_CALL"]
    for row in rows:
        assert row.figures == event_figures(row.type, row.payload)
    assert rows[0].figures["input_tokens"] == 700 and rows[2].figures["cost"] == 0.5
    assert "messages" not in rows[0].figures and "summary_after" not in rows[1].figures


def test_the_migrations_fill_the_figures_of_rows_stored_before_them(session):
    rows = add_events(session, model_call(1, 900), compaction(), ("BUDGET", {"window": 1}),
                      tool_result("read_file", 40))
    SessionEvent.objects.filter(session=session).update(figures=None)
    fill_figures(apps, SimpleNamespace(connection=connection))
    fill_result_figures(apps, SimpleNamespace(connection=connection))
    for row in rows:
        row.refresh_from_db()
        assert row.figures == event_figures(row.type, row.payload)
    assert rows[0].figures is not None and rows[2].figures is None
