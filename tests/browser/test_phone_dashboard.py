"""Small screens and fonts, in Chromium: the dashboard on a phone (390 px) lists sessions as
compact cards, the curve's labels never overlap, and Chinese text is drawn with a CJK font.

Layout only: every wait is for a condition on the page, no speed is measured.
"""
from __future__ import annotations

import os
import re

import pytest
from playwright.sync_api import Page, expect

from .pages import finished_session, signed_in_page
from .stack import ROOT, Stack

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
expect.set_options(timeout=90_000)

PHONE = {"width": 390, "height": 844}
DASHBOARD_SCREENSHOT = ROOT / "docs" / "dashboard-phone.png"
# A goal as people write them: long, and partly Chinese.
GOALS = ["季度销售报告：汇总每个地区的收入，找出增长最快的三个产品，并写一段给管理层的摘要。"
         " Keep the totals exact and cite the source files.",
         "Read every log file of last week's outage, list the errors by service with their "
         "first and last time, and propose the three fixes that would have prevented most of it.",
         "調査: compare the two pricing tables and say which customers pay more under the new one."]


def queued_sessions(page: Page, stack: Stack, count: int) -> None:
    """`count` sessions started from the form with a held worker: they stay queued."""
    for index in range(count):
        page.goto(stack.url("/sessions/new"))
        page.fill("#id_goal", GOALS[index % len(GOALS)])
        page.select_option("#id_scenario", "sales-report")
        page.click("button:has-text('Start')")
        page.wait_for_url(re.compile(r"/sessions/\d+/$"))


ROW_HEIGHTS = """() => Array.from(document.querySelectorAll('tr[data-session]'), (row) => ({
  row: row.getBoundingClientRect().height,
  goal: row.querySelector('.goal-cell').getBoundingClientRect().height,
  line: parseFloat(getComputedStyle(document.body).lineHeight)}))"""


def test_phone_dashboard_lists_sessions_as_compact_cards(browser, stack: Stack) -> None:
    context = browser.new_context(viewport=PHONE, has_touch=True, is_mobile=True,
                                  device_scale_factor=2)
    try:
        phone = signed_in_page(context, stack)
        stack.pause("worker")
        try:
            queued_sessions(phone, stack, 6)
        finally:
            stack.resume("worker")
        finished_session(phone, stack)  # one with figures: turns, tokens, cost
        phone.goto(stack.url("/"))
        expect(phone.locator("tr[data-session]")).to_have_count(7)
        width, inner = phone.evaluate("() => [document.documentElement.scrollWidth, innerWidth]")
        assert width <= inner, f"the dashboard is {width} px wide in a {inner} px window"
        rows = phone.evaluate(ROW_HEIGHTS)
        for row in rows:
            # One line for the goal (cut with an ellipsis), one for the figures: two lines
            # and the card's padding (a table row was 282 px: the goal one word a line).
            assert row["goal"] < 1.6 * row["line"], rows
            assert row["row"] < 3.4 * row["line"], rows
        # The figures that stay are labelled: numbers alone would not say what they count.
        expect(phone.locator("tr[data-session] td.num[data-label='input']").first).to_be_visible()
        if os.environ.get("TASKOS_UPDATE_SCREENSHOT") == "1":
            phone.screenshot(path=str(DASHBOARD_SCREENSHOT))
    finally:
        context.close()


def rendered_fonts(page: Page, selector: str) -> list[str]:
    """The fonts Chromium drew the element's text with (not the ones the CSS asks for)."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument")["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    return [font["familyName"] for font in fonts]


def test_chinese_text_is_drawn_with_the_cjk_font_the_page_names(page: Page, stack: Stack) -> None:
    stack.pause("worker")
    try:
        queued_sessions(page, stack, 1)
    finally:
        stack.resume("worker")
    family = page.evaluate("() => getComputedStyle(document.body).fontFamily")
    assert "Noto Sans CJK SC" in family and family.rstrip().endswith("sans-serif"), family
    mono = page.evaluate("() => getComputedStyle(document.body).getPropertyValue('--mono')")
    assert "CJK" in mono, mono
    page.goto(stack.url("/"))
    fonts = rendered_fonts(page, "tr[data-session] .goal-cell a")
    assert any("CJK" in name for name in fonts), (
        f"the Chinese goal was drawn with {fonts}: install fonts-noto-cjk (scripts/test.sh does)")


# Every label of the curve's shown scale: its box in the SVG's own units.
LABEL_BOXES = """() => {
  const svg = document.querySelector('#panel-curve-body svg.curve');
  const full = document.body.classList.contains('curve-full');
  const texts = Array.from(svg.querySelectorAll('text')).filter((t) =>
    t.getAttribute('visibility') !== 'hidden' && !t.closest(full ? 'g.scale-fitted' : 'g.scale-full'));
  return texts.map((t) => { const b = t.getBBox();
    return {text: t.textContent, x: b.x, y: b.y, w: b.width, h: b.height}; });
}"""
# Draws the curve as a live update would (static/js/curve.js) from the given series.
REDRAW = """([series, windowTokens, trigger]) => {
  const svg = document.querySelector('#panel-curve-body svg.curve');
  svg.dataset.series = series; svg.dataset.window = windowTokens; svg.dataset.trigger = trigger;
  window.TaskOSCurve.draw(svg);
}"""


def overlaps(boxes: list[dict]) -> list[tuple[str, str]]:
    found = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            if (a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"]
                    and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]):
                found.append((a["text"], b["text"]))
    return found


# Series where the window and trigger lines, and their labels, meet: the peak right under
# the trigger with the window above the fitted scale (the labels were 2 px apart), the
# lines a few pixels apart, a run over its window, a tiny peak under a large window.
CROWDED = [(" ".join(["2900", "3100", "3000s", "3150"] * 5), 4000, 3200),
           (" ".join(["3900", "3950", "3980s"] * 5), 4000, 3950),
           (" ".join(["4100o", "3900", "4300so"] * 5), 4000, 3200),
           (" ".join(["1200", "1500s"] * 10), 128000, 1600)]


def test_curve_labels_never_overlap(page: Page, stack: Stack) -> None:
    pk = finished_session(page, stack, window=4000)
    checked = 0
    for full in (False, True):
        page.goto(stack.url(f"/sessions/{pk}/"))  # as the server drew it
        page.evaluate("(full) => document.body.classList.toggle('curve-full', full)", full)
        assert overlaps(page.evaluate(LABEL_BOXES)) == [], "as the server drew it"
        for series, window_tokens, trigger in CROWDED:
            page.evaluate(REDRAW, [series, window_tokens, trigger])
            boxes = page.evaluate(LABEL_BOXES)
            assert any(b["text"].startswith("trigger") for b in boxes)
            assert overlaps(boxes) == [], (series, window_tokens, trigger, full)
            checked += 1
    assert checked == 2 * len(CROWDED)
