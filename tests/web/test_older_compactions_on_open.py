"""The earlier compactions, one line each under a folded list: a finished session's page
holds none of them and a running session's page the newest LIVE_EARLIER, which its live
updates keep to that many (the page moves the lines leaving the newest RECENT there);
opening the list fetches the rest (below the last row shown)."""
from __future__ import annotations

import re

import pytest

from taskos.drawer.feed import EventFeed
from taskos.drawer.panels import PANELS
from taskos.drawer.panels.compactions import LIVE_EARLIER, RECENT
from taskos.drawer.stream import render_named_panels, render_update

from .factories import add_events, compaction

pytestmark = pytest.mark.django_db

EARLIER = LIVE_EARLIER + 5


def older_list(html: str) -> tuple[str, str]:
    """The earlier compactions' list: its attributes after the id, and its rows."""
    found = re.search(r'<ol class="log brief" id="compactions-older-list"([^>]*)>(.*?)</ol>',
                      html, re.S)
    assert found, html
    return found.group(1), found.group(2)


def numbers(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<li class="compaction-brief" id="compaction-brief-(\d+)"',
                                       html)]


def with_compactions(session, status: str):
    session.status = status
    session.save(update_fields=["status"])
    add_events(session, *[compaction(summary_after=f"## Goal\nstep {i}")
                          for i in range(RECENT + EARLIER)])
    return session


def test_a_finished_page_fetches_its_earlier_compactions_when_opened(session, ann_client):
    with_compactions(session, "finished")
    page = ann_client.get(f"/sessions/{session.pk}/").content.decode()
    url = f"/sessions/{session.pk}/compactions/older"
    assert older_list(page) == ("", "")
    assert f'<span>{EARLIER}</span> earlier compactions' in page
    assert f'<details class="older" id="compactions-older" data-earlier-url="{url}">' in page
    # The newest compactions are in view, one line each, the newest in full.
    recent = page.split('id="compactions-recent"', 1)[1].split("</ol>", 1)[0]
    assert numbers(recent) == [RECENT + EARLIER - n for n in range(RECENT)]
    shown = re.findall(r'<article class="compaction" id="compaction-(\d+)"', page)
    assert shown == [str(RECENT + EARLIER)]

    rows = ann_client.get(url).content.decode()
    assert numbers(rows) == list(range(EARLIER, 0, -1))  # newest first, as the page lists them


def test_a_running_page_holds_the_newest_earlier_compactions_and_fetches_the_rest(
        session, ann_client):
    with_compactions(session, "running")
    page = ann_client.get(f"/sessions/{session.pk}/").content.decode()
    attributes, rows = older_list(page)
    # The page drops rows past data-keep as live updates add new ones on top.
    assert attributes == f' data-keep="{LIVE_EARLIER}"'
    held = numbers(rows)
    assert held == list(range(EARLIER, EARLIER - LIVE_EARLIER, -1))
    assert f'<span>{EARLIER}</span> earlier compactions' in page
    rest = ann_client.get(f"/sessions/{session.pk}/compactions/older?before={held[-1]}")
    assert numbers(rest.content.decode()) == list(range(held[-1] - 1, 0, -1))
    bad = ann_client.get(f"/sessions/{session.pk}/compactions/older?before=x")
    assert bad.status_code == 400


def test_a_live_page_sent_the_panel_whole_gets_the_newest_earlier_compactions_only(session):
    with_compactions(session, "running")
    feed = EventFeed(PANELS)
    update = render_update(session, 0, full=True, feed=feed)
    body = update.html.split('id="panel-compactions-body"', 1)[1]
    attributes, rows = older_list(body)
    assert attributes == f' data-keep="{LIVE_EARLIER}"'
    assert len(numbers(rows)) == LIVE_EARLIER
    # A compaction that arrives comes as its line on top of the newest; the page itself
    # moves the one leaving those to the earlier ones and trims them (data-keep-into).
    add_events(session, compaction())
    html = render_update(session, update.last_seq, feed=feed).html
    came = re.search(r'<div hx-swap-oob="afterbegin:#compactions-recent">(.*?)</div>',
                     html, re.S).group(1)
    assert numbers(came) == [RECENT + EARLIER + 1] and "compactions-older-list" not in html
    assert '<ol class="log brief" id="compactions-recent" data-keep="2" ' \
           'data-keep-into="compactions-older-list"' in update.html
    # Sent whole again (the page lost track of it): the newest LIVE_EARLIER as well.
    feed.forget({"compactions"})
    whole = render_named_panels(session, {"compactions"}, feed=feed)
    assert numbers(older_list(whole)[1]) == list(range(EARLIER + 1, EARLIER + 1 - LIVE_EARLIER, -1))


def test_an_opened_line_fetches_its_compaction_in_full(session, ann_client):
    with_compactions(session, "running")
    url = f"/sessions/{session.pk}/compactions/detail"
    html = ann_client.get(f"{url}?number=3").content.decode()
    assert html.startswith('<article class="compaction" id="compaction-3"')
    assert '<table class="zones compact">' in html and '<span class="add">+ step 2</span>' in html
    assert f"/sessions/{session.pk}/refs/arc:1:2" in html
    assert ann_client.get(f"{url}?number=x").status_code == 400
    assert ann_client.get(f"{url}?number={RECENT + EARLIER + 1}").status_code == 404
    assert ann_client.get(url).status_code == 404


def test_only_the_owner_reads_the_earlier_compactions(session, client, django_user_model):
    with_compactions(session, "finished")
    client.force_login(django_user_model.objects.create_user("eve", password="eve-secret-42"))
    assert client.get(f"/sessions/{session.pk}/compactions/older").status_code == 404
    assert client.get(f"/sessions/{session.pk}/compactions/detail?number=1").status_code == 404
