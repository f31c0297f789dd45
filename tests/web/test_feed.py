"""A live page's panels come from an in-memory feed that reads only what is new (issue 12).

Re-reading every event of a panel's types on each update made a long run quadratic; the
feed must give exactly what a fresh read gives, while reading the database only for the
events after the seq it holds.
"""
from __future__ import annotations

import re

import pytest

from taskos.drawer import feed as feed_module
from taskos.drawer.feed import EventFeed
from taskos.drawer.panels import PANELS
from taskos.drawer.stream import render_update

from .factories import add_events, budget, compaction, model_call

pytestmark = pytest.mark.django_db


def test_updates_from_the_feed_equal_a_fresh_read_at_every_step(session):
    feed = EventFeed(PANELS)
    add_events(session, budget(), model_call(1, 900))
    first = render_update(session, 0, full=True, feed=feed)
    assert feed.loaded and first.last_seq == 2
    steps = [(budget(history=2500), model_call(2, 1900, history=2500)),
             (compaction(before_history=2500, after_history=400),),
             (budget(history=600), model_call(3, 1100, history=600),
              model_call(4, 1300, kind="summary"))]
    after = first.last_seq
    for events in steps:
        add_events(session, *events)
        feed.sent.clear()  # as the consumer does when a page says where it stands
        live = render_update(session, after, full=True, feed=feed)
        fresh = render_update(session, after, full=True)
        assert live.last_seq == fresh.last_seq > after
        assert len(re.findall(r'id="panel-[a-z]+-body"', live.html)) == len(PANELS)
        # A live page's elements sent whole carry their revision (for later patches).
        assert re.sub(r' data-rev="\d+"', "", live.html) == fresh.html
        after = live.last_seq
    assert 'data-calls="4"' in live.html


def test_after_the_first_sync_only_new_events_are_read(session, monkeypatch):
    feed = EventFeed(PANELS)
    add_events(session, *[model_call(n, 900 + n) for n in range(1, 30)])
    after = render_update(session, 0, full=True, feed=feed).last_seq
    reads = []
    real = feed_module.panel_events
    monkeypatch.setattr(feed_module, "panel_events",
                        lambda *args, **kwargs: reads.append(args) or real(*args, **kwargs))
    add_events(session, model_call(30, 2000))
    update = render_update(session, after, feed=feed)
    assert reads == []  # the feed was not re-filled: only the one new event was read
    assert update.last_seq == after + 1 and '>30 calls</span>' in update.html
    # The curve gets the new point only, numbered as the page numbers it (call 30).
    assert '<i data-from="30" data-points="2000"' in update.html


def test_the_feed_keeps_only_what_panels_show(session):
    feed = EventFeed(PANELS)
    add_events(session, budget(history=100), budget(history=200), budget(history=300),
               ("TOOL_RESULT", {"name": "sql_query", "kept_tokens": 10}),
               ("TOOL_RESULT", {"name": "delegate", "kept_tokens": 40, "child": 7}),
               ("TOOL_CALL", {"name": "sql_query", "arguments": "{}"}),
               ("OFFLOAD", {"name": "sql_query", "ref": "r1"}))
    feed.load(session)
    assert [ev.payload["zones"]["history"] for ev in feed.by_type["BUDGET"]] == [300]
    # Every tool result stays: the cost panel sums tokens per tool, the children panel
    # reads the delegates among them. Types no panel shows are not kept at all.
    assert [ev.payload.get("child") for ev in feed.by_type["TOOL_RESULT"]] == [None, 7]
    assert "TOOL_CALL" not in feed.by_type and "OFFLOAD" not in feed.by_type


def test_a_reset_database_refills_the_feed(session):
    feed = EventFeed(PANELS)
    add_events(session, budget(), model_call(1, 900), model_call(2, 950))
    render_update(session, 0, full=True, feed=feed)
    session.events.all().delete()
    add_events(session, model_call(1, 500))
    update = render_update(session, 3, full=True, feed=feed)
    assert update.last_seq == 1 and feed.seq == 1
    assert 'data-calls="1"' in update.html


def test_a_row_appended_again_is_sent_whole_when_it_next_changes():
    """A row the page was sent whole, then removed by a patch of its list and appended
    again (as the inspector's messages shrink at a compaction and grow back), is on the
    page without the revision its note names: its next change must come whole, not as a
    patch the page cannot place (which made the page ask for the inspector whole)."""
    feed = EventFeed(PANELS)
    row = '<li class="msg" id="inspector-msg-5" hx-swap-oob="true"><b>{}</b> tok</li>'
    first = feed.not_sent("inspector", [row.format(10)], skip=True)
    assert 'data-rev="' in first[0]
    patched = feed.not_sent("inspector", [row.format(11)], skip=True)
    assert patched == ['<i hx-swap-oob="text:inspector-msg-5@1">["0!b", "11"]</i>']
    feed.not_sent("inspector", ['<ol hx-swap-oob="beforeend:#inspector-messages">'
                                '<li class="msg" id="inspector-msg-5"><b>11</b> tok</li></ol>'],
                  skip=True)
    again = feed.not_sent("inspector", [row.format(12)], skip=True)
    assert len(again) == 1 and 'id="inspector-msg-5" hx-swap-oob="true" data-rev="2"' in again[0]


def test_a_row_inserted_marked_noted_is_patched_when_it_next_changes():
    """Rows a delta inserts marked data-noted (the inspector's messages) are noted as if
    sent whole: the page gets them with a revision, and their next change is a patch of
    that revision, not the row again (a tool result cleared, a row's zone in a summary
    request). The row new ones are placed beside keeps its note: it did not change."""
    feed = EventFeed(PANELS)
    row = '<li class="msg" id="inspector-msg-tool-{}"{}><b>{}</b> tok</li>'
    after_system = '<ol hx-swap-oob="afterend:#inspector-msg-system-system">{}</ol>'
    first = feed.not_sent("inspector", [after_system.format(row.format("c1", " data-noted", 1600))],
                          skip=True)
    assert first == [after_system.format(row.format("c1", ' data-rev="1"', 1600))]
    after_first = '<ol hx-swap-oob="afterend:#inspector-msg-tool-c1">{}</ol>'
    feed.not_sent("inspector", [after_first.format(row.format("c2", " data-noted", 1500))],
                  skip=True)
    cleared = feed.not_sent("inspector", [row.format("c1", ' hx-swap-oob="true"', 52)], skip=True)
    assert cleared == ['<i hx-swap-oob="text:inspector-msg-tool-c1@1">["0!b", "52"]</i>']
