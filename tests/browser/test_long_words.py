"""A word longer than the drawer (an anchor of one 20,000-character "word") wraps inside its
panel: the drawer does not grow sideways, at a desktop width nor at 360 px, so the panels'
badges and headings stay in view. An anchor like that made the drawer ~959,000 px wide."""
from __future__ import annotations

import json
import sqlite3

import pytest
from playwright.sync_api import Page, expect

from .pages import finished_session, signed_in_page
from .stack import Stack

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
expect.set_options(timeout=90_000)

WORD = "x" * 20_000
DESKTOP = {"width": 1500, "height": 1000}
PHONE = {"width": 360, "height": 780}

# Every element of the drawer wider than the drawer's client width, named.
WIDE = """drawer => [...drawer.querySelectorAll('*')].filter(el => el.getBoundingClientRect().width >
  drawer.clientWidth + 1).slice(-6).map(el => el.tagName + '.' + el.className + '#' + el.id + ' '
  + Math.round(el.getBoundingClientRect().width))"""


def add_long_words(stack: Stack, pk: int) -> None:
    """An active anchor of WORD, a person's edit naming it (Edits by people, Recent
    changes), a task whose subject is a word as long as a subject goes, and a follow-up of
    WORD in the transcript."""
    with sqlite3.connect(stack.db_path, timeout=30) as db:
        db.execute("INSERT INTO runs_anchor (session_id, tier, text, key, source, active, turn, "
                   "created_at, updated_at) VALUES (?, 1, ?, '', 'admin', 1, 1, "
                   "datetime('now'), datetime('now'))", (pk, WORD))
        db.execute("INSERT INTO runs_task (session_id, task_id, subject, description, state, "
                   "owner, blocks, blocked_by, metadata, created_at, updated_at) VALUES "
                   "(?, 'long', ?, '', 'pending', '', '[]', '[]', '{}', datetime('now'), "
                   "datetime('now'))", (pk, WORD[:500]))
        seq, turn = db.execute("SELECT max(seq), max(turn) FROM runs_sessionevent "
                               "WHERE session_id = ?", (pk,)).fetchone()
        columns = [row[1] for row in db.execute("PRAGMA table_info(runs_sessionevent)")
                   if row[1] != "id"]
        for n, (kind, payload) in enumerate([
                ("ANCHOR_CHANGED", {"id": 9999, "tier": 1, "old": WORD, "new": WORD + "y",
                                    "source": "admin", "action": "edited"}),
                ("USER_MESSAGE", {"text": WORD, "source": "user"})], 1):
            template = db.execute(f"SELECT {', '.join(columns)} FROM runs_sessionevent "
                                  "WHERE session_id = ? ORDER BY seq LIMIT 1", (pk,)).fetchone()
            row = dict(zip(columns, template))
            row.update(seq=seq + n, type=kind, payload=json.dumps(payload), turn=turn)
            db.execute(f"INSERT INTO runs_sessionevent ({', '.join(row)}) VALUES "
                       f"({', '.join('?' * len(row))})", list(row.values()))


def drawer_widths(page: Page) -> tuple[int, int]:
    return page.locator("#drawer").evaluate("d => [d.scrollWidth, d.clientWidth]")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "360px"])
def test_a_long_word_keeps_the_drawer_its_own_width(browser, stack: Stack, viewport) -> None:
    context = browser.new_context(viewport=viewport)
    try:
        page = signed_in_page(context, stack)
        pk = finished_session(page, stack)
        add_long_words(stack, pk)
        page.reload()
        if viewport is PHONE:
            page.locator(".drawer-tab").click()
        expect(page.locator("#anchors-active")).to_contain_text(WORD[:100])
        page.evaluate("() => document.querySelectorAll('#drawer details')"
                      ".forEach(d => { d.open = true; })")
        page.wait_for_timeout(500)
        scroll, client = drawer_widths(page)
        assert scroll <= client, (f"the drawer is {scroll} px wide in {client} px: "
                                  f"{page.locator('#drawer').evaluate(WIDE)}")
        wide = page.evaluate("""() => [...document.querySelectorAll('#drawer .panel-body, #drawer .panel, #drawer .panel > summary')]
            .filter(b => b.scrollWidth > b.clientWidth + 1)
            .map(b => b.className + '#' + b.id + ' ' + b.scrollWidth + '/' + b.clientWidth)""")
        assert not wide, f"panels wider than the drawer: {wide}"
        expect(page.locator("#drawer .task")).to_contain_text(WORD[:100])
        for badge in ("#panel-anchors > summary", "#anchors-active li:first-child .source"):
            box = page.locator(badge).bounding_box()
            assert box["x"] + box["width"] <= viewport["width"], f"{badge} is off screen: {box}"
        width, inner = page.evaluate("() => [document.documentElement.scrollWidth,"
                                     " document.documentElement.clientWidth]")
        assert width <= inner, f"the page is {width} px wide in a {inner} px window"
    finally:
        context.close()
