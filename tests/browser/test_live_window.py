"""A long run followed live stays light (issue 12), in Chromium against a real worker.

The transcript reads newest first: a page left where it opened keeps only the newest
entries while the run goes on (the oldest leave at the bottom), and scrolling down to the
end loads the older ones back, exactly the entries that left, in order. Sessions are held
at known points by pausing the worker (stack.py); nothing waits a fixed time.
"""
from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from .stack import Stack, wait_for
from .test_drawer_live import TRANSCRIPT_TYPES, cancel, count_events, last_seq, start_session

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
expect.set_options(timeout=90_000)

KEEP, MOST = 60, 120  # entries a followed page keeps (static/js/taskos.js)
PAGE = 60  # entries per older page (taskos/drawer/stream.py TRANSCRIPT_PAGE)
ENTRIES = "#transcript > article.ev"


def stored_entries(stack: Stack, pk: int) -> list[int]:
    """The session's transcript entries in the database, newest first."""
    marks = ",".join("?" * len(TRANSCRIPT_TYPES))
    return [seq for (seq,) in stack.query(
        f"SELECT seq FROM runs_sessionevent WHERE session_id = ? AND type IN ({marks}) "
        "ORDER BY seq DESC", pk, *TRANSCRIPT_TYPES)]


def shown_entries(page: Page) -> list[int]:
    return page.eval_on_selector_all(ENTRIES, "els => els.map(e => +e.dataset.seq)")


def test_a_followed_run_keeps_the_newest_entries_and_scrolling_down_loads_older_ones(
        page: Page, stack: Stack) -> None:
    pk = start_session(page, stack, "long-1000", window=8000)  # the worker is paused
    try:
        stack.resume("worker")
        wait_for(lambda: count_events(stack, pk, *TRANSCRIPT_TYPES) > 3 * MOST,
                 "three windows of transcript entries")
        stack.pause("worker")
        expect(page.locator("#last-seq")).to_have_value(str(last_seq(stack, pk)))
        stored = stored_entries(stack, pk)
        shown = shown_entries(page)
        # Bounded while followed: the newest entries only, newest first, none missing.
        assert KEEP <= len(shown) <= MOST < len(stored), (len(shown), len(stored))
        assert shown == stored[:len(shown)]
        assert page.evaluate("window.scrollY") == 0  # followed without scrolling

        # Scrolling down to the end brings back the entries that left, page by page.
        older = page.locator("#transcript > .older-button")
        expect(older).to_have_count(1)
        older.scroll_into_view_if_needed()
        expect(page.locator(ENTRIES)).to_have_count(len(shown) + PAGE)
        assert shown_entries(page) == stored[:len(shown) + PAGE]
    finally:
        stack.resume("worker")
        cancel(page)
