"""A tool result in the transcript shows the head of its output; "more" puts the output
as archived in its place (static/js/taskos.js reads its ref's page), in Chromium."""
from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from .pages import finished_session
from .stack import Stack

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
expect.set_options(timeout=90_000)

REF_PAGE_CHARS = 20_000  # taskos/web/exports.py: "more" shows the ref's first page


def test_more_puts_the_archived_output_in_place_of_its_head(page: Page, stack: Stack) -> None:
    finished_session(page, stack)
    entry_id = page.locator("#transcript article.ev-tool_result:has(button.more)").first \
        .get_attribute("id")
    entry = page.locator(f"#{entry_id}")
    ref = entry.locator("header a.ref").text_content()
    head = entry.locator("pre.preview").evaluate("el => el.textContent")
    archived = stack.scalar("SELECT content FROM runs_archivedturn WHERE id = ?",
                            int(ref.split(":")[2]))
    entry.locator("button.more").click()
    expect(entry.locator("button.more")).to_have_count(0)
    shown = entry.locator("pre.preview").evaluate("el => el.textContent")
    assert shown == archived[:REF_PAGE_CHARS] and len(shown) > len(head)
