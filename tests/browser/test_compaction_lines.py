"""A live page gets each new compaction as its line (li.compaction-brief): its detail
(zones, summary diff, audit, refs) is fetched when the line is opened, and the line that
leaves the newest RECENT is moved to the earlier ones by the page itself, open as it was.
In Chromium against a real worker, held at known points by pausing it (stack.py)."""
from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from .stack import Stack, wait_for
from .test_drawer_incremental import held_in_sync
from .test_drawer_live import cancel, count_events, start_session

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
expect.set_options(timeout=90_000)

RECENT = 2  # taskos/drawer/panels/compactions.py


def test_a_compaction_s_line_opens_to_its_detail_and_keeps_it_when_it_moves_down(
        page: Page, stack: Stack) -> None:
    pk = start_session(page, stack, "long-1000", window=8000)  # the worker is paused
    try:
        stack.resume("worker")
        # Past the ones a render of the whole panel showed (the first compactions, the
        # newest when the list of earlier ones began, all in one frame on a slow page).
        wait_for(lambda: count_events(stack, pk, "COMPACTION") >= RECENT + 2,
                 "a list of earlier compactions")
        held_in_sync(page, stack, pk)
        whole = count_events(stack, pk, "COMPACTION")
        stack.resume("worker")
        wait_for(lambda: count_events(stack, pk, "COMPACTION") >= whole + 2,
                 "compactions that came as lines")
        held_in_sync(page, stack, pk)
        newest = count_events(stack, pk, "COMPACTION")
        line = page.locator(f"#compactions-recent > li#compaction-brief-{newest}")
        expect(line).to_have_count(1)
        # Lines only: the compactions that came since carry no detail.
        shown_in_full = page.eval_on_selector_all(
            "#panel-compactions-body article.compaction", "els => els.map(e => +e.id.split('-').pop())")
        assert all(n <= whole for n in shown_in_full), (shown_in_full, whole)
        expect(line.locator("table.zones")).to_have_count(0)

        line.locator("summary").first.click()
        detail = line.locator(f"article#compaction-{newest}")
        expect(detail.locator("table.zones")).to_contain_text("history")
        expect(detail.locator("p.left a").first).to_be_attached()  # what left, to read back
        page.evaluate("(id) => { window.opened = document.getElementById(id); }",
                      f"compaction-brief-{newest}")

        # Newer compactions push it past the newest RECENT: the page moves it (the same
        # element, still open with its detail) to the top of the earlier ones.
        stack.resume("worker")
        wait_for(lambda: count_events(stack, pk, "COMPACTION") >= newest + RECENT,
                 "newer compactions")
        held_in_sync(page, stack, pk)
        moved = page.locator(f"#compactions-older-list > li#compaction-brief-{newest}")
        expect(moved).to_have_count(1)
        assert moved.evaluate("(el) => el === window.opened")
        expect(moved.locator("details").first).to_have_attribute("open", "")
        expect(moved.locator("table.zones")).to_contain_text("history")
        now = count_events(stack, pk, "COMPACTION")
        recent = page.eval_on_selector_all(
            "#compactions-recent > li", "els => els.map(e => +e.id.split('-').pop())")
        assert recent == [now, now - 1]
    finally:
        stack.resume("worker")
        cancel(page)
