"""Parts of the drawer out of view are not laid out (issue 12): a detailed compaction
scrolled out of the drawer is skipped by the browser (content-visibility), and laid out
again as soon as it is scrolled back. The browser reports both through
`contentvisibilityautostatechange` events, noted here from the page's start."""
from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from .pages import finished_session
from .stack import Stack

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
expect.set_options(timeout=90_000)

NOTE_SKIPPED = """
window.skipped = new Map();
document.addEventListener('contentvisibilityautostatechange', (event) => {
  if (event.target.matches('article.compaction')) window.skipped.set(event.target.id, event.skipped);
}, true);
"""


def skipped_is(state: bool) -> str:
    return f"(id) => window.skipped.get(id) === {'true' if state else 'false'}"


def test_a_compaction_out_of_the_drawers_view_is_skipped_until_scrolled_back(
        page: Page, stack: Stack) -> None:
    page.add_init_script(NOTE_SKIPPED)
    finished_session(page, stack, "sales-report", window=6000)
    page.reload()
    newest = page.locator("#compactions-recent article.compaction").first
    expect(newest).to_be_visible()
    newest_id = newest.get_attribute("id")
    newest.scroll_into_view_if_needed()
    page.wait_for_function(skipped_is(False), arg=newest_id)
    # The drawer scrolled to its end (its inspector, hints…): the compaction is far above.
    page.locator("#drawer").evaluate("el => { el.scrollTop = el.scrollHeight; }")
    assert newest.evaluate("el => el.getBoundingClientRect().bottom < 0"), "not out of view"
    page.wait_for_function(skipped_is(True), arg=newest_id)
    newest.scroll_into_view_if_needed()
    page.wait_for_function(skipped_is(False), arg=newest_id)
    # Its zones table: a clear (C20) has no summary diff, and the newest one often is a clear.
    expect(newest.locator("table.zones")).to_be_visible()
