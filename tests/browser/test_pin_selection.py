"""Pinning a selection that crosses transcript entries (feature W5's pins): the entries'
labels ("fetch_document result 1,632 tokens · …") are no part of the selection's text,
the pin is one entry's own words, and the form says which part it holds. Before, the
labels and the joined texts went to the server, which answered 422 "not in this
session's transcript".
"""
from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from .stack import Stack
from .test_drawer_live import cancel, start_session

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
expect.set_options(timeout=90_000)

# From inside the first entry's words to the end of the next entry's, across the next
# entry's header; returns what was selected, labels included, and the two entries' texts.
SELECT_ACROSS = """transcript => {
  const texts = [...transcript.querySelectorAll('article .text, article pre.preview')].filter(
    t => t.firstChild && t.firstChild.nodeType === Node.TEXT_NODE
         && t.firstChild.textContent.trim().length > 12);
  const first = texts[0];
  const second = texts.find(t => t.closest('article') !== first.closest('article'));
  if (!first || !second) return null;
  const range = document.createRange();
  range.setStart(first.firstChild, 4);
  range.setEnd(second.lastChild, second.lastChild.textContent.length);
  getSelection().removeAllRanges();
  getSelection().addRange(range);
  return {selected: getSelection().toString(),
          header: second.closest('article').querySelector('header').textContent,
          first: first.textContent, second: second.textContent};
}"""


def flat(text: str) -> str:
    return " ".join(text.split())


def test_a_selection_across_entries_pins_one_entrys_words(page: Page, stack: Stack) -> None:
    pk = start_session(page, stack, "long-1000", window=8000)
    stack.resume("worker")
    expect(page.locator("#transcript article pre.preview").nth(2)).to_be_attached()
    try:
        with stack.worker_held():
            assert stack.scalar("SELECT status FROM runs_session WHERE id = ?", pk) == "running"
            found = page.locator("#transcript").evaluate(SELECT_ACROSS)
            assert found, "no two entries with text on the page"
            assert flat(found["header"]) in flat(found["selected"])  # labels were selected
            page.locator("#transcript").dispatch_event("mouseup")
            pinned = page.input_value("form.pin-sentence input[name=text]")
            assert pinned and flat(found["header"]) not in pinned
            assert pinned in (flat(found["first"])[4:].strip(), flat(found["second"]))
            expect(page.locator("form.pin-sentence .pin-note")).to_contain_text(
                "crossed 2 entries")
            page.click("form.pin-sentence button")
            expect(page.locator("#flash")).to_contain_text("Pinned as a hard constraint")
            assert stack.scalar("SELECT text FROM runs_anchor WHERE session_id = ? AND "
                                "source = 'pin'", pk) == pinned
            expect(page.locator("form.pin-sentence .pin-note")).to_be_hidden()
    finally:
        stack.resume("worker")
        cancel(page)
