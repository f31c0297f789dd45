"""A finished session's page leaves its earlier compactions (one line each, folded) to be
fetched when that list is opened; a running session's page holds them, as live updates
add to them."""
from __future__ import annotations

import re

import pytest

from taskos.drawer.panels.compactions import DETAILED

from .factories import add_events, compaction

pytestmark = pytest.mark.django_db

EARLIER = 5


def older_list(html: str) -> str:
    found = re.search(r'<ol class="log brief" id="compactions-older-list">(.*?)</ol>', html, re.S)
    assert found, html
    return found.group(1)


def with_compactions(session, status: str):
    session.status = status
    session.save(update_fields=["status"])
    add_events(session, *[compaction(summary_after=f"## Goal\nstep {i}")
                          for i in range(DETAILED + EARLIER)])
    return session


def test_a_finished_page_fetches_its_earlier_compactions_when_opened(session, ann_client):
    with_compactions(session, "finished")
    page = ann_client.get(f"/sessions/{session.pk}/").content.decode()
    url = f"/sessions/{session.pk}/compactions/older"
    assert older_list(page) == ""
    assert f'{EARLIER} earlier compactions' in page
    assert re.search(rf'<details class="older" id="compactions-older" hx-get="{url}" '
                     r'hx-trigger="toggle once" hx-target="#compactions-older-list">', page)
    # The newest compactions are on the page in full, as before.
    shown = re.findall(r'<article class="compaction" id="compaction-(\d+)"', page)
    assert shown == [str(DETAILED + EARLIER - n) for n in range(DETAILED)]

    rows = ann_client.get(url).content.decode()
    numbers = [int(n) for n in re.findall(r'<li class="compaction-brief" id="compaction-brief-(\d+)"',
                                          rows)]
    assert numbers == list(range(EARLIER, 0, -1))  # newest first, as the live page lists them


def test_a_running_page_holds_its_earlier_compactions(session, ann_client):
    with_compactions(session, "running")
    page = ann_client.get(f"/sessions/{session.pk}/").content.decode()
    assert older_list(page).count('class="compaction-brief"') == EARLIER
    assert "hx-get" not in re.search(r'<details class="older"[^>]*>', page).group(0)


def test_only_the_owner_reads_the_earlier_compactions(session, client, django_user_model):
    with_compactions(session, "finished")
    client.force_login(django_user_model.objects.create_user("eve", password="eve-secret-42"))
    assert client.get(f"/sessions/{session.pk}/compactions/older").status_code == 404
