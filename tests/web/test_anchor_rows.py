"""The anchors panel lists a tool's newest conclusion among the active anchors and the
earlier ones in a folded list: a long run's conclusions replace each other every turn or
two, and a live page is sent the rows of a folded list only once it is opened."""
from __future__ import annotations

import re

import pytest

from taskos.drawer.feed import EventFeed
from taskos.drawer.panels import PANELS
from taskos.drawer.panels.records import AnchorsPanel
from taskos.drawer.stream import render_named_panels, render_update
from taskos.runs.models import Anchor

from .factories import add_events
from .test_panels import panel_view

pytestmark = pytest.mark.django_db


def conclude(session, *texts: str, turn: int) -> list[tuple]:
    """Tool conclusions as the engine adds them: a row each and its change event."""
    for text in texts:
        Anchor.objects.create(session=session, tier=2, text=text, source="tool", turn=turn)
    return [("ANCHOR_CHANGED", {"id": 0, "tier": 2, "old": None, "new": text,
                                "source": "tool", "action": "added"}, turn) for text in texts]


def listed(html: str, list_id: str) -> list[str]:
    found = re.search(rf'<ul class="anchors" id="{list_id}"[^>]*>(.*?)</ul>', html, re.S)
    return re.findall(r'<span class="text">([^<]*)</span>', found.group(1)) if found else []


def test_the_newest_tool_conclusion_is_listed_and_the_earlier_ones_are_folded(session):
    Anchor.objects.create(session=session, tier=1, text="the report has a table", source="user")
    Anchor.objects.create(session=session, tier=2, text="edited by a person", source="admin")
    conclude(session, "fact 1", "fact 2", "fact 3", turn=1)
    context, html = panel_view(AnchorsPanel(), session)
    assert listed(html, "anchors-active") == ["the report has a table", "fact 3",
                                              "edited by a person"]
    assert listed(html, "anchors-earlier-rows") == ["fact 2", "fact 1"]
    assert re.search(r'<details class="older" id="anchors-earlier" '
                     r'data-part="anchors-earlier-rows"><summary>2 earlier conclusions', html)
    assert panel_view(AnchorsPanel(), session)[0]["active"] == 5  # the badge counts them all


def test_a_live_page_is_sent_the_newest_conclusion_only_while_the_earlier_are_folded(session):
    feed = EventFeed(PANELS)
    add_events(session, *conclude(session, "fact 1", "fact 2", turn=1))
    after = render_update(session, 0, full=True, feed=feed).last_seq
    add_events(session, *conclude(session, "fact 2b", turn=1))
    after = render_update(session, after, feed=feed).last_seq  # anchors-state sent whole
    feed.open_parts = set()  # the page said: no list in a panel open
    # A turn concludes two facts that replace the two before (long-1000, every turn).
    Anchor.objects.filter(session=session, text__in=["fact 1", "fact 2"]).update(active=False)
    add_events(session, *conclude(session, "fact 3", "fact 4", turn=2))
    update = render_update(session, after, feed=feed)
    rows = re.findall(r'<li hx-swap-oob="insert:anchors-state@[^"]*"[^>]*>.*?</li>',
                      update.html, re.S)
    assert len(rows) == 1 and "fact 4" in rows[0]  # not "fact 3": it went to the folded list
    assert "fact 3" not in update.html
    # Opened, the folded list comes with the panel whole.
    feed.open_parts = {"anchors-earlier-rows"}
    feed.forget({"anchors"})
    whole = render_named_panels(session, {"anchors"}, feed=feed)
    assert listed(whole, "anchors-earlier-rows") == ["fact 3", "fact 2b"]
