"""Counts read as English on every page: "1 compaction", "2 compactions" (the status bar
used to say "1 compactions"), and the same for turns and calls."""
from __future__ import annotations

import re

import pytest

from taskos.drawer.panels import CompactionsPanel
from taskos.drawer.panels.compactions import RECENT

from .factories import add_events, compaction
from .test_panels import panel_view

pytestmark = pytest.mark.django_db


def words(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))


@pytest.mark.parametrize("count, compactions, turns", [
    (1, "1 compaction ", "1 turn "), (2, "2 compactions", "2 turns")])
def test_the_status_bar_counts_in_english(make_session, ann, ann_client, count, compactions,
                                          turns):
    session = make_session(owner=ann, status="finished", compactions=count, turns=count)
    page = words(ann_client.get(f"/sessions/{session.pk}/").content.decode())
    assert compactions in page and turns in page
    dashboard = words(ann_client.get("/").content.decode())
    assert turns in dashboard


def test_one_earlier_compaction_is_singular(session):
    add_events(session, *[compaction(summary_after=f"## Goal\nstep {i}")
                          for i in range(RECENT + 1)])
    _, html = panel_view(CompactionsPanel(), session)
    assert re.search(r'id="compactions-older-count"[^>]*><span>1</span> earlier compaction<', html), html
