"""`select`: events with only some keys of their payloads read, as the drawer charts a long
run's calls. The fields asked for are what the whole row gives; on PostgreSQL each row's
payload is read once, however many keys are asked for."""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents import ModelCall
from taskos.drawer.events import CALL_KEYS, load_events
from taskos.runs.models import SessionEvent
from taskos.store.stored_events import select, stored_event

from .factories import add_events, model_call

pytestmark = pytest.mark.django_db


def whole(row: SessionEvent) -> ModelCall:
    return stored_event(row.type, row.payload, seq=row.seq, turn=row.turn,
                        at=row.at)  # type: ignore[return-value]  # a MODEL_CALL row


def test_selected_keys_read_as_the_whole_row_gives_them(session):
    kind, payload = model_call(1, 900, over=True, cost=0.25)
    # A JSON null and a key the row lacks both read as the field's default.
    payload = {**payload, "refused": None, "count_source": "server"}
    del payload["latency_ms"]
    rows = add_events(session, (kind, payload), model_call(2, 1200, kind="summary"))
    keys = ("call", "kind", "zones", "over_window", "cost", "refused", "count_source",
            "latency_ms")
    selected = sorted(select(SessionEvent.objects.filter(session=session), ModelCall, keys),
                      key=lambda ev: ev.seq)
    assert [ev.seq for ev in selected] == [row.seq for row in rows]
    for ev, row in zip(selected, rows):
        full = whole(row)
        assert {key: getattr(ev, key) for key in keys} == {key: getattr(full, key) for key in keys}
        assert (ev.turn, ev.at) == (full.turn, full.at)
        assert ev.messages == [] and ev.input_tokens == 0  # not asked for: at the default
    assert selected[0].over_window is True and selected[0].refused is None
    assert selected[0].latency_ms == ModelCall().latency_ms
    assert selected[0].zones["history"] == 350 and selected[1].kind == "summary"


@pytest.mark.skipif(connection.vendor != "postgresql",
                    reason="the payload is stored compressed on PostgreSQL only")
def test_postgresql_reads_each_payload_once_for_many_keys(session):
    # A payload of a few KB is stored compressed; each key read on its own decompressed
    # it again (23 times per call for the drawer's figures of a call).
    add_events(session, model_call(1, 900), model_call(2, 1200))
    with CaptureQueriesContext(connection) as queries:
        calls = select(SessionEvent.objects.filter(session=session), ModelCall, CALL_KEYS)
    assert len(calls) == 2 and len(CALL_KEYS) > 10
    (statement,) = [q["sql"] for q in queries.captured_queries]
    assert statement.count('"runs_sessionevent"."payload"') == 1


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's reading of many keys")
def test_sqlite_reads_the_keys_asked_for_as_one_value_a_row(session):
    # A lookup per key was a value Django decoded on its own, 23 per call: most of a
    # finished long-1000 page's server time on SQLite.
    add_events(session, model_call(1, 900), model_call(2, 1200))
    with CaptureQueriesContext(connection) as queries:
        calls = select(SessionEvent.objects.filter(session=session), ModelCall, CALL_KEYS)
    assert len(calls) == 2 and len(CALL_KEYS) > 10
    (statement,) = [q["sql"] for q in queries.captured_queries]
    assert statement.count('"runs_sessionevent"."payload"') == 1
    # One key asked for reads as it does among many (json_extract of one path gives
    # false as 0).
    add_events(session, model_call(3, 1300, over=True))
    flags = select(SessionEvent.objects.filter(session=session), ModelCall, ("over_window",))
    read = [ev.over_window for ev in sorted(flags, key=lambda ev: ev.seq)]
    assert read == [False, False, True] and all(isinstance(flag, bool) for flag in read)


def test_panels_read_no_timestamps(session):
    """No panel shows when an event happened: the drawer's reads leave `at` out of the
    query (converting ~2 600 of them was ~15 % of a finished long-1000 page's server time)."""
    add_events(session, model_call(1, 900), ("HINT_BLOCK", {"kind": "progress", "text": "go"}))
    with CaptureQueriesContext(connection) as queries:
        events = load_events(session)
    assert [ev.type for ev in events] == ["MODEL_CALL", "HINT_BLOCK"]
    assert [ev.at for ev in events] == ["", ""] and events[0].input_tokens == 900
    assert not any('"runs_sessionevent"."at"' in q["sql"] for q in queries.captured_queries)
    dated = select(SessionEvent.objects.filter(session=session), ModelCall, ("call",))
    assert dated[0].at != ""  # other readers still get it
