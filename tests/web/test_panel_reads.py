"""A panel rendered whole (the session page, a live page's first sync) reads only the
events it shows: of a type every panel reading it shows the newest of (the budget, the
recent anchor changes), the older rows are not read, nor the summaries of the earlier
compactions (one line each), and what is rendered is the same."""
from __future__ import annotations

import pytest

from agents import EventType
from taskos.drawer import feed as feed_module
from taskos.drawer import stream
from taskos.drawer.base import panel_events
from taskos.drawer.events import load_events
from taskos.drawer.feed import EventFeed
from taskos.drawer.panels import PANELS
from taskos.drawer.panels.compactions import RECENT
from taskos.drawer.panels.records import CHANGES_SHOWN

from .factories import add_events, budget, compaction, model_call

pytestmark = pytest.mark.django_db

TOOL_CHANGES = CHANGES_SHOWN + 15


def change(n: int, source: str = "tool") -> tuple[str, dict, int]:
    return ("ANCHOR_CHANGED", {"id": n, "tier": 2, "old": None, "new": f"value {n}",
                               "source": source, "action": "added"}, n)


def long_run(session) -> dict[str, list[int]]:
    """Budgets and calls, an admin edit, then many tool changes: the seqs by kind."""
    rows = add_events(session, *[event for turn in range(1, 6)
                                 for event in (budget(history=100 * turn), model_call(turn, 900))],
                      change(0, "admin"), *[change(n) for n in range(1, TOOL_CHANGES + 1)],
                      *[compaction(summary_before=f"## Goal\n- step {n}",
                                   summary_after=f"## Goal\n- step {n + 1}",
                                   fallback=n == 1, probe={"rate": 0.5, "recovered": 1, "asked": 2})
                        for n in range(RECENT + 3)])
    seqs: dict[str, list[int]] = {}
    for row in rows:
        seqs.setdefault(row.type, []).append(row.seq)
    return seqs


def test_only_the_newest_budget_and_the_recent_and_people_s_anchor_changes_are_read(session):
    seqs = long_run(session)
    read = panel_events(session, PANELS)
    by_type = {kind: [ev.seq for ev in read if ev.type == kind] for kind in seqs}
    assert by_type[EventType.BUDGET] == seqs[EventType.BUDGET][-1:]
    changes = seqs[EventType.ANCHOR_CHANGED]
    # The admin's edit, older than the recent ones, is read: the panel lists it apart.
    assert by_type[EventType.ANCHOR_CHANGED] == [changes[0]] + changes[-CHANGES_SHOWN:]
    assert by_type[EventType.MODEL_CALL] == seqs[EventType.MODEL_CALL]  # every call
    # Every compaction, the earlier ones without their summaries (shown in full: the newest).
    compactions = [ev for ev in read if ev.type == EventType.COMPACTION]
    assert [ev.seq for ev in compactions] == seqs[EventType.COMPACTION]
    assert [bool(ev.summary_after) for ev in compactions] == [False] * (RECENT + 2) + [True]
    assert compactions[1].fallback and compactions[0].before["history"] == 5000


def test_the_page_and_a_first_sync_render_as_from_every_event(session, monkeypatch):
    long_run(session)
    page, synced = stream.render_drawer(session), stream.render_update(
        session, 0, full=True, feed=EventFeed(PANELS)).html
    every = lambda session, panels: load_events(  # noqa: E731
        session, {t for panel in panels for t in panel.event_types})
    monkeypatch.setattr(stream, "panel_events", every)
    assert page == stream.render_drawer(session)
    assert "Edits by people" in page and f"value {TOOL_CHANGES}" in page
    monkeypatch.setattr(feed_module, "panel_events", every)
    assert synced == stream.render_update(session, 0, full=True, feed=EventFeed(PANELS)).html


def tool_result(n: int, **extra) -> tuple[str, dict, int]:
    return ("TOOL_RESULT", {"call_id": f"c{n}", "name": "fetch_document" if n % 2 else "read_ref",
                            "kept_tokens": 100 + n, "original_tokens": 200 + n,
                            "preview": f"document {n} " * 40, **extra}, n)


def test_tool_results_are_read_without_their_previews_and_render_the_same(session, monkeypatch):
    """The cost panel sums tool results and the sub-agents panel lists answers: of ~1 000
    results on a finished long-1000 page neither reads the preview (or any other key)."""
    add_events(session, model_call(1, 900), *[tool_result(n) for n in range(1, 8)],
               tool_result(8, error="no such file"),
               tool_result(9, child=41, child_status="finished", child_input_tokens=5000,
                           reused=True))
    results = [ev for ev in panel_events(session, PANELS) if ev.type == EventType.TOOL_RESULT]
    assert len(results) == 9 and not any(ev.preview for ev in results)
    assert results[-1].child == 41 and results[-2].error == "no such file"
    page = stream.render_drawer(session)
    every = lambda session, panels: load_events(  # noqa: E731
        session, {t for panel in panels for t in panel.event_types})
    monkeypatch.setattr(stream, "panel_events", every)
    assert page == stream.render_drawer(session)
    assert "fetch_document" in page and "#41" in page
