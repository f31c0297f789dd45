"""Replay with… and the comparison view in Chromium, end to end (feature E2).

From a finished session's page: open the replay form, submit it with a smaller window, land
on the comparison, and see the replay's row fill in once the real worker has run it. Then
the same comparison on a 390 px phone: nothing scrolls sideways. Every wait is for a
condition on the page.
"""
from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from .pages import finished_session, signed_in_page
from .stack import Stack

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
expect.set_options(timeout=90_000)

OVERFLOW = "() => [document.documentElement.scrollWidth, window.innerWidth]"


def test_replay_from_a_session_page_then_compare_on_desktop_and_phone(
        page: Page, stack: Stack, browser) -> None:
    source = finished_session(page, stack, window=16000)

    page.reload()  # the replay links show on a finished session's page
    page.click(".replay-links a:has-text('Replay with')")
    page.wait_for_url(stack.url(f"/sessions/{source}/replay"))
    expect(page.locator("#id_window")).to_have_value("16000")  # the recorded settings
    page.fill("#id_window", "8000")
    page.click("button:has-text('Start replay')")
    page.wait_for_url(stack.url(f"/sessions/{source}/compare"))
    rows = page.locator("table.compare-table tbody tr")
    expect(rows).to_have_count(2)
    replay = int(rows.nth(1).get_attribute("data-session"))
    assert replay != source
    assert stack.scalar("SELECT replay_of_id FROM runs_session WHERE id = ?", replay) == source

    # The page reloads itself while the replay runs; its row then has figures and links
    # to the inspector at the first call where the two contexts differ.
    row = page.locator(f"tr[data-session='{replay}']")
    expect(row.locator("a[href*='/calls/']")).to_have_count(2)
    expect(row).to_contain_text("window=8000")
    expect(row).to_contain_text("finished")
    expect(page.locator("svg.curve.overlay polyline")).to_have_count(2)
    points = page.eval_on_selector_all("svg.curve.overlay polyline",
                                       "ps => ps.map(p => p.getAttribute('points').length)")
    assert all(n > 0 for n in points)  # both curves drawn, not empty lines
    compactions = [int(stack.scalar("SELECT compactions FROM runs_session WHERE id = ?", pk))
                   for pk in (source, replay)]
    assert compactions[1] > compactions[0]  # half the window compacts more
    # Simulated runs cost nothing: the money shown is at a named price table.
    expect(row.locator("td.cost")).to_contain_text("at openai-like prices")
    page.select_option("form.prices select", "anthropic-like")
    expect(row.locator("td.cost")).to_contain_text("at anthropic-like prices")
    # The link opens the call inside the styled page (the stylesheet applied), not a
    # bare fragment.
    href = row.locator("a[href*='/calls/']").last.get_attribute("href")
    page.goto(stack.url(href))
    assert page.url.startswith(stack.url(f"/sessions/{replay}/calls/"))
    expect(page.locator("h1")).to_contain_text("Call")
    expect(page.locator("#panel-inspector .inspector .input-total")).to_be_visible()
    assert page.evaluate("document.styleSheets.length") >= 1

    # The replay's own page leads back to the comparison.
    page.goto(stack.url(f"/sessions/{replay}/"))
    page.click(".replay-links a:has-text('compare with the recording')")
    page.wait_for_url(stack.url(f"/sessions/{source}/compare"))

    context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True,
                                  is_mobile=True, device_scale_factor=2)
    try:
        phone = signed_in_page(context, stack)
        for path in (f"/sessions/{source}/compare", f"/sessions/{source}/replay"):
            phone.goto(stack.url(path))
            expect(phone.locator("h1")).to_be_visible()
            width, inner = phone.evaluate(OVERFLOW)
            assert width <= inner, f"{path}: {width} px wide in a {inner} px window"
        phone.goto(stack.url(f"/sessions/{source}/compare"))
        table = phone.locator(".compare .table-scroll")
        assert table.evaluate("t => t.scrollWidth > t.clientWidth")  # it scrolls in its card
        svg = phone.locator("svg.curve.overlay").bounding_box()
        assert svg is not None and svg["x"] >= 0 and svg["x"] + svg["width"] <= 390
    finally:
        context.close()
