"""A running session's page holds only the newest of its earlier compactions (one line
each): its live updates add new ones on top and the page drops those past LIVE_EARLIER, so
a long run's list stays a few rows instead of hundreds. Opening the list fetches the rest,
and from then on it keeps every row. In Chromium against a real worker, held at known
points by pausing it (stack.py)."""
from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from .stack import Stack, wait_for
from .test_drawer_incremental import held_in_sync
from .test_drawer_live import cancel, count_events, start_session

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
expect.set_options(timeout=90_000)

DETAILED, LIVE_EARLIER = 2, 10  # taskos/drawer/panels/compactions.py
ROWS = "#compactions-older-list > li.compaction-brief"


def shown(page: Page) -> list[int]:
    return page.eval_on_selector_all(ROWS, "els => els.map(e => +e.id.split('-').pop())")


def test_a_live_page_keeps_the_newest_earlier_compactions_and_fetches_the_rest_on_open(
        page: Page, stack: Stack) -> None:
    pk = start_session(page, stack, "long-1000", window=8000)  # the worker is paused
    try:
        stack.resume("worker")
        wait_for(lambda: count_events(stack, pk, "COMPACTION") > DETAILED + LIVE_EARLIER + 5,
                 "more earlier compactions than a live page keeps")
        held_in_sync(page, stack, pk)
        earlier = count_events(stack, pk, "COMPACTION") - DETAILED
        expect(page.locator("#compactions-older-count")).to_have_text(
            f"{earlier} earlier compactions")
        assert shown(page) == list(range(earlier, earlier - LIVE_EARLIER, -1))

        page.click("#compactions-older > summary")
        expect(page.locator(ROWS)).to_have_count(earlier)
        assert shown(page) == list(range(earlier, 0, -1))  # once each, newest first

        # Opened, the list keeps every row: new ones come on top, none leave.
        stack.resume("worker")
        wait_for(lambda: count_events(stack, pk, "COMPACTION") - DETAILED > earlier + 2,
                 "more compactions")
        held_in_sync(page, stack, pk)
        now = count_events(stack, pk, "COMPACTION") - DETAILED
        expect(page.locator(ROWS)).to_have_count(now)
        assert shown(page) == list(range(now, 0, -1))
    finally:
        stack.resume("worker")
        cancel(page)
