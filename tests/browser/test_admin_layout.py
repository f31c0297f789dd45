"""The admin at a normal desktop width (issue 12): the session change page fits the window
with its anchor and task inlines, and the anchor list gives its Text column room to read.
"""
from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from .pages import finished_session, signed_in_page
from .stack import Stack

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
expect.set_options(timeout=90_000)

DESKTOP = {"width": 1280, "height": 900}
WIDTHS = "() => [document.documentElement.scrollWidth, window.innerWidth]"


@pytest.fixture
def desktop(browser, stack: Stack):
    context = browser.new_context(viewport=DESKTOP)
    yield signed_in_page(context, stack)
    context.close()



def test_admin_session_page_and_anchor_list_fit_a_desktop(desktop: Page, stack: Stack) -> None:
    pk = finished_session(desktop, stack)
    anchors = int(stack.scalar("SELECT count(*) FROM runs_anchor WHERE session_id = ?", pk))
    assert anchors >= 3, "the scenario should leave anchors to lay out"

    desktop.goto(stack.url(f"/admin/runs/session/{pk}/change/"))
    expect(desktop.locator("#anchors-group")).to_be_visible()
    width, inner = desktop.evaluate(WIDTHS)
    assert width <= inner, f"session change page is {width} px wide in a {inner} px window"

    desktop.goto(stack.url(f"/admin/runs/anchor/?session__id__exact={pk}"))
    text = desktop.locator("#result_list td.field-short_text").first
    expect(text).to_be_visible()
    width, inner = desktop.evaluate(WIDTHS)
    assert width <= inner, f"anchor list is {width} px wide in a {inner} px window"
    # One word per line was the bug: the column gets a readable width, and a long anchor
    # wraps onto a few lines, not dozens.
    column = desktop.locator("#result_list th.column-short_text").bounding_box()
    assert column["width"] >= 320, f"the Text column is {column['width']:.0f} px wide"
    longest = desktop.evaluate("""() => Math.max(...[...document.querySelectorAll(
        '#result_list td.field-short_text')].map(td => {
          const lines = td.getBoundingClientRect().height / parseFloat(getComputedStyle(td).lineHeight);
          const words = td.textContent.trim().split(/\\s+/).length;
          return words >= 8 ? lines / words : 0; }))""")
    assert longest < 0.5, f"an anchor's text wraps at almost every word ({longest:.2f} lines/word)"
