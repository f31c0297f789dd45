"""Live updates bring a panel the page holds current with only what changed (issue 12):
new rows of its logs as appends, small parts sent whole to be merged in place. A panel
the page does not hold current (first sync, folded meanwhile) is sent whole.
"""
from __future__ import annotations

import re

import pytest
from django.template.loader import render_to_string

from taskos.drawer.events import load_events
from taskos.drawer.feed import EventFeed
from taskos.drawer.panels import PANELS
from taskos.drawer.stream import render_named_panels, render_update
from taskos.runs.models import Anchor

from .factories import add_events, compaction, model_call

pytestmark = pytest.mark.django_db


def change(text: str, turn: int) -> tuple[str, dict, int]:
    return ("ANCHOR_CHANGED", {"id": 1, "tier": 2, "old": None, "new": text,
                               "source": "tool", "action": "added"}, turn)


def hint(text: str) -> tuple[str, dict]:
    return ("HINT_BLOCK", {"kind": "progress", "text": text})


def plain(html: str) -> str:
    """A live update without the revisions of elements sent whole (for later patches)."""
    return re.sub(r' data-rev="\d+"', "", html)


def synced(session, *events) -> tuple[EventFeed, int]:
    feed = EventFeed(PANELS)
    add_events(session, *events)
    return feed, render_update(session, 0, full=True, feed=feed).last_seq


def test_new_anchor_changes_go_on_top_of_their_turn_group_or_a_new_group(session):
    feed, after = synced(session, change("first", 1))
    add_events(session, change("second", 1), change("third", 2), change("fourth", 2))
    html = plain(render_update(session, after, feed=feed).html)
    assert 'id="panel-anchors-body"' not in html  # the body is not sent again
    same = re.search(r'<div hx-swap-oob="afterbegin:#anchor-changes-turn-1">(.*?)</div>',
                     html, re.S).group(1)
    assert "second" in same and "third" not in same and "<h4>" not in same
    groups = re.search(r'<div hx-swap-oob="afterbegin:#anchor-changes">(.*?)</div>',
                       html, re.S).group(1)
    assert groups.count("<h4>turn 2</h4>") == 1 and "second" not in groups
    assert groups.index("fourth") < groups.index("third")  # newest first, as on the page
    assert '<span id="anchor-changes-count" hx-swap-oob="true">4 recent changes' in html
    assert '<div id="anchors-state" hx-swap-oob="true">' in html


def test_an_edit_by_a_person_reaches_the_page_in_the_anchor_rows_part(session):
    feed, after = synced(session, change("first", 1))
    add_events(session, ("ANCHOR_CHANGED", {"id": 1, "tier": 2, "old": "first", "new": "edited",
                                            "source": "admin", "action": "changed"}, 2))
    html = plain(render_update(session, after, feed=feed).html)
    state = re.search(r'<div id="anchors-state" hx-swap-oob="true">(.*?)</div>\n', html + "\n",
                      re.S).group(1)
    assert "Edits by people" in state and "<ins>edited</ins>" in state


def test_the_first_change_brings_the_anchors_panel_from_its_empty_state(session):
    feed, after = synced(session, ("BUDGET", {"window": 8000}))
    add_events(session, change("first", 1))
    html = plain(render_update(session, after, feed=feed).html)
    # No list to add rows to yet: the body is patched from the empty state it showed.
    assert 'hx-swap-oob="insert:panel-anchors-body@' in html and "first" in html
    assert "afterbegin:" not in html


def test_a_folded_panel_is_brought_up_to_date_when_unfolded_and_appended_to_after(session):
    feed, after = synced(session, hint("one"), hint("two"))
    add_events(session, hint("three"))
    update = render_update(session, after, feed=feed, open_panels={"budget"})
    assert "hints" not in update.html  # folded: nothing sent
    # Unfolded: what came while it was folded, as the panel's delta (the new row on top).
    caught_up = render_named_panels(session, {"hints"}, feed=feed)
    assert 'hx-swap-oob="afterbegin:#hints-list"' in caught_up
    assert "three" in caught_up and "two" not in caught_up and "panel-hints-body" not in caught_up
    assert render_named_panels(session, {"hints"}, feed=feed) == ""  # nothing came since
    # A page that skipped fragments while it was folded gets it whole.
    feed.forget({"hints"})
    whole = render_named_panels(session, {"hints"}, feed=feed)
    assert 'id="panel-hints-body" class="panel-body" hx-swap-oob="true"' in whole
    add_events(session, hint("four"))
    html = plain(render_update(session, update.last_seq, feed=feed, open_panels={"hints"}).html)
    rows = re.search(r'<div hx-swap-oob="afterbegin:#hints-list">(.*?)</div>', html, re.S).group(1)
    assert "four" in rows and "three" not in rows
    assert '<p class="muted" id="hints-kinds" hx-swap-oob="true">' in html
    assert 'id="panel-hints-body"' not in html


def test_a_new_compaction_comes_as_its_line_on_top_of_the_newest(session):
    feed, after = synced(session, compaction(), compaction(), compaction())
    first_seq = 1
    add_events(session, compaction(),
               ("AUDIT", {"compaction_seq": first_seq, "ok": False, "call": 9,
                          "missing_statements": ["keep EUR"]}))
    html = plain(render_update(session, after, feed=feed).html)
    assert 'id="panel-compactions-body"' not in html
    came = re.search(r'<div hx-swap-oob="afterbegin:#compactions-recent">(.*?)</div>\n',
                     html, re.S).group(1)
    # Its line only: the detail is fetched when it is opened, and the line leaving the
    # newest is moved to the earlier ones by the page, not sent again.
    assert re.findall(r'id="compaction-brief-(\d+)"', came) == ["4"]
    assert 'id="compaction-4"' not in html and "<table" not in html
    assert "compactions-older-list" not in html
    # The audit of a row already in the earlier list replaces that row alone.
    assert re.search(r'<li class="compaction-brief" id="compaction-brief-1" [^>]*'
                     r'hx-swap-oob="true">.*audit failed', html, re.S)
    assert '<span id="compactions-older-count" hx-swap-oob="true"><span>2</span> earlier' in html


def test_a_full_sync_sends_every_panel_whole_again(session):
    feed, after = synced(session, hint("one"))
    add_events(session, hint("two"))
    feed.sent.clear()  # as the consumer does when a page says where it stands
    html = plain(render_update(session, after, full=True, feed=feed).html)
    assert len(re.findall(r'id="panel-[a-z]+-body" class="panel-body"', html)) == len(PANELS)
    assert "afterbegin:" not in html


def test_a_part_the_page_already_shows_is_not_sent_again(session):
    feed, after = synced(session, change("first", 1))
    add_events(session, change("second", 1))
    first = render_update(session, after, feed=feed)
    assert '<div id="anchors-state" hx-swap-oob="true">' in plain(first.html)
    add_events(session, change("third", 1))
    second = plain(render_update(session, first.last_seq, feed=feed).html)
    assert 'id="anchors-state"' not in second  # the anchor rows did not change
    assert "third" in second and 'id="anchor-changes-count" hx-swap-oob="true">3 recent' in second
    # Sent whole again (a reconnect), the page is brought up to date in full.
    feed.sent.clear()  # as the consumer does when a page says where it stands
    again = plain(render_update(session, first.last_seq, full=True, feed=feed).html)
    assert 'id="panel-anchors-body" class="panel-body" hx-swap-oob="true"' in again


def message(n: int, text: str) -> dict:
    return {"role": "user" if n % 2 else "assistant", "zone": "history", "tokens": 10 + n,
            "content": text}


SYSTEM = {"role": "system", "zone": "system", "tokens": 300, "content": "You are TaskOS."}


def row_ids(html: str) -> list[str]:
    return re.findall(r'id="inspector-msg-([^"]+)"', html)


def test_the_inspector_following_live_gets_only_the_messages_that_changed(session):
    first = [SYSTEM, message(1, "load sales.csv"), message(2, "loaded 120 rows")]
    feed, after = synced(session, model_call(1, 500, messages=first))
    grown = first + [message(3, "now the totals")]
    add_events(session, model_call(2, 520, messages=grown))
    update = render_update(session, after, feed=feed)
    html = update.html
    assert 'id="panel-inspector-body"' not in html  # the body is not sent again
    assert "You are TaskOS." not in html and "loaded 120 rows" not in html
    # Its figures as the attributes that change with a call, set alone.
    assert '<div id="inspector-detail" hx-swap-oob="attributes" data-call="2"></div>' in html
    assert '<ol id="inspector-messages" hx-swap-oob="attributes" data-parts-total="520">' in html
    # A new row goes after the row it follows (the tail after it stays).
    last = row_ids(plain(render_update(session, 0, full=True).html))[2]
    appended = re.search(rf'<ol hx-swap-oob="afterend:#inspector-msg-{last}">(.*?)</ol>',
                         html, re.S).group(1)
    assert len(row_ids(appended)) == 1 and "now the totals" in appended
    assert "reply priming" not in html and 'hx-swap-oob="delete' not in html
    # The bar names no call while following: it is not sent again for a new one.
    assert "inspector-bar" not in html.split("inspector-calls", 1)[0]
    # A compaction: the conversation shrinks to a summary; the rows that left go in one
    # fragment, the new one is inserted after the row that stays.
    shrunk = [SYSTEM, {**message(1, "summary: 120 rows loaded"), "zone": "summary"}]
    last_before = row_ids(render_update(session, 0, full=True).html)
    add_events(session, model_call(3, 400, messages=shrunk))
    html = plain(render_update(session, update.last_seq, feed=feed).html)
    ids = row_ids(render_update(session, 0, full=True).html)
    assert re.findall(r'<li id="inspector-msg-([^"]+)" hx-swap-oob="([^"]+)">', html) == [
        (last_before[1], f"delete-through:#inspector-msg-{row_ids(appended)[0]}")]
    assert ids == ["system-system", "user-summary"]
    assert re.search(r'<ol hx-swap-oob="afterend:#inspector-msg-system-system">.*'
                     r'summary: 120 rows loaded', html, re.S)
    assert "You are TaskOS." not in html and "reply priming" not in html


def test_rows_a_compaction_drops_in_the_middle_leave_alone_and_those_after_stay(session):
    """Rows are named by their message, not by their place: a compaction that drops
    messages in the middle of a request sends their removal only, not the rows after
    them again (on a position each of those would have changed)."""
    tools = [({"role": "assistant", "zone": "history", "tokens": 30, "content": None,
               "tool_calls": [{"id": f"call_{n}", "type": "function", "function": {
                   "name": "fetch_document", "arguments": f'{{"n": {n}}}'}}]},
              {"role": "tool", "zone": "history", "tokens": 1600, "tool_call_id": f"call_{n}",
               "content": f"document {n}"}) for n in range(6)]
    since = {"role": "user", "zone": "since", "tokens": 40, "content": "changes: none"}
    kept = [SYSTEM, *tools[0], *tools[4], *tools[5], since]
    feed, after = synced(session, model_call(1, 10_000, messages=[
        SYSTEM, *[m for pair in tools for m in pair], since]))
    add_events(session, model_call(2, 5_000, messages=kept))
    html = plain(render_update(session, after, feed=feed).html)
    # call_1 to call_3, both messages each: six rows in one fragment, nothing else.
    assert re.findall(r'<li id="inspector-msg-([^"]+)" hx-swap-oob="([^"]+)">', html) == [
        ("assistant-call_1", "delete-through:#inspector-msg-tool-call_3")]
    assert "document 4" not in html and "document 5" not in html and "fetch_document" not in html
    assert "changes: none" not in html  # no row is sent again, in place or inserted
    assert not re.search(r'<li class="msg[^"]*" id="inspector-msg-[^"]+" hx-swap-oob="true"',
                         html) and 'hx-swap-oob="afterend' not in html
    assert row_ids(render_update(session, 0, full=True).html) == [
        "system-system", "assistant-call_0", "tool-call_0", "assistant-call_4", "tool-call_4",
        "assistant-call_5", "tool-call_5", "user-since"]


def test_a_pinned_inspector_carries_no_ids_that_live_updates_target(session):
    add_events(session, model_call(1, 500), model_call(2, 520))
    panel = next(p for p in PANELS if p.name == "inspector")
    context = panel.get_context(session, load_events(session, panel.event_types), pinned=1)
    html = render_to_string(panel.template, {**context, "session": session})
    assert 'data-call="1"' in html and 'id="inspector-' not in html


def test_folded_lists_in_the_anchors_panel_get_no_rows_until_opened(session):
    """The retired anchors and the change log are folded lists (data-part): while the
    page has them folded, their rows are not sent, only what shows outside them (the
    counts in their summaries, the active anchors); opened, the panel comes whole."""
    Anchor.objects.create(session=session, tier=2, text="gone first", active=False)
    feed, after = synced(session, change("first", 1))
    add_events(session, change("second", 1))
    after = render_update(session, after, feed=feed).last_seq  # anchors-state sent whole
    feed.open_parts = set()  # the page said: no list open
    Anchor.objects.create(session=session, tier=2, text="retired since", active=False)
    Anchor.objects.create(session=session, tier=2, text="active since")
    add_events(session, change("third", 1), change("fourth", 2))
    update = render_update(session, after, feed=feed)
    html = plain(update.html)
    assert "third" not in html and "fourth" not in html  # no change rows
    assert "retired since" not in html  # no retired anchor rows
    assert "active since" in html and "2 retired anchors" in html
    assert 'id="anchor-changes-count" hx-swap-oob="true">4 recent changes' in html
    assert 'id="panel-anchors-body"' not in html

    # The page opens the change log: it asks for the panel whole (stale) and gets both
    # lists as they are now, the one still folded included.
    feed.open_parts = {"anchor-changes"}
    feed.forget({"anchors"})
    whole = plain(render_named_panels(session, {"anchors"}, feed=feed))
    assert 'id="panel-anchors-body" class="panel-body" hx-swap-oob="true"' in whole
    assert "third" in whole and "fourth" in whole and "retired since" in whole
    # From then on the open list gets its rows; the folded one none (once its part of the
    # panel, sent whole with the body, was sent whole again to be patched after).
    add_events(session, change("fifth", 2))
    after = render_update(session, update.last_seq, feed=feed).last_seq
    Anchor.objects.create(session=session, tier=2, text="retired later", active=False)
    add_events(session, change("sixth", 2))
    later = plain(render_update(session, after, feed=feed).html)
    assert "sixth" in later and 'afterbegin:#anchor-changes-turn-2' in later
    assert "retired later" not in later and "3 retired anchors" in later
