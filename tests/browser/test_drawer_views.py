"""Issue 12's points that are about what the drawer shows and how it behaves, in Chromium:
folded panels are not updated and catch up when unfolded, the transcript is windowed
with older entries a click away, the inspector's parts add up, the curve's full-window
choice, zones over budget, the tier legend, the grouped anchor changes and the start form.

Sessions are held at known points by pausing the worker (stack.py); nothing waits a
fixed time and nothing is timed.
"""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from .pages import toggle_panel
from .stack import Stack, wait_for
from .test_drawer_live import TRANSCRIPT_TYPES as TRANSCRIPT
from .test_drawer_live import count_events, last_seq, start_session

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
expect.set_options(timeout=90_000)

CURVE = "#panel-curve-body svg.curve"
ENTRIES = ("USER_MESSAGE", "ASSISTANT_MESSAGE", "TOOL_CALL", "TOOL_RESULT", "COMPACTION")
PAGE = 60  # transcript entries per page (taskos/drawer/stream.py TRANSCRIPT_PAGE)


def test_a_folded_panel_waits_and_unfolding_brings_it_up_to_date(page: Page, stack: Stack) -> None:
    pk = start_session(page, stack, "long-1000", window=8000)  # the worker is paused
    try:
        toggle_panel(page, "curve")  # fold the curve before the first call
        expect(page.locator("#panel-curve")).not_to_have_attribute("open", "")
        stack.resume("worker")
        # Three calls, and more than two transcript pages for the windowing below.
        wait_for(lambda: count_events(stack, pk, "MODEL_CALL") >= 3
                 and count_events(stack, pk, *ENTRIES) > 2 * PAGE, "three model calls")
        stack.pause("worker")
        held = last_seq(stack, pk)
        expect(page.locator("#last-seq")).to_have_value(str(held))  # the page is up to date…
        # …except the folded panel, which was not re-rendered meanwhile.
        expect(page.locator("#panel-curve-body")).to_contain_text("No model calls yet")
        page.click("#panel-curve > summary")  # unfold: brought up to date at once
        expect(page.locator(CURVE)).to_have_attribute(
            "data-calls", str(count_events(stack, pk, "MODEL_CALL")))

        # The transcript is windowed: the newest entries first, older ones a click away.
        page.reload()
        entries = page.locator("#transcript > article.ev")
        oldest = int(entries.last.get_attribute("id")[3:])
        assert oldest > 1 and entries.count() == PAGE
        page.click("#transcript > .older-button")
        # A page loaded; the button that came with it loads the next one by itself when it
        # lands in view ("intersect once"), so more may follow: whatever is shown must be
        # the newest stored entries, newest first, none missing or twice.
        page.wait_for_function(f"document.querySelectorAll('#transcript > article.ev')"
                               f".length >= {2 * PAGE}")
        assert int(entries.last.get_attribute("id")[3:]) < oldest
        ids = page.eval_on_selector_all("#transcript > article", "els => els.map(e => +e.id.slice(3))")
        marks = ",".join("?" * len(TRANSCRIPT))
        stored = [seq for (seq,) in stack.query(
            f"SELECT seq FROM runs_sessionevent WHERE session_id = ? AND type IN ({marks}) "
            "ORDER BY seq DESC", pk, *TRANSCRIPT)]
        assert ids == stored[:len(ids)]
    finally:
        stack.resume("worker")
        # Never leave a long session running: the next test needs the one worker.
        page.click("form.cancel button")
        expect(page.locator("#session-status .status")).to_have_text("cancelled")


def test_finished_drawer_explains_its_numbers(page: Page, stack: Stack) -> None:
    pk = start_session(page, stack, "sales-report", window=6000)
    stack.resume("worker")
    expect(page.locator("#session-status .status")).to_have_text("finished")
    page.reload()

    # Inspector: the request's parts (tools, messages, priming) add up to the header.
    inspector = page.locator("#panel-inspector-body .inspector")
    total = int(re.sub(r"\D", "", inspector.locator(".input-total").text_content()))
    assert int(inspector.locator("ol.messages").get_attribute("data-parts-total")) == total
    expect(inspector.locator("li.part-tools")).to_contain_text("tok")
    # An assistant turn that only called tools shows its calls, not a literal "null".
    for preview in inspector.locator("li.role-assistant summary q").all_text_contents():
        assert preview.strip() and preview.strip() != "null"

    # The system zone (1 957 tokens of tool schemas and prompt, default share 375) is no
    # compaction's to change: shown as fixed with its size, not flagged over budget; zones
    # over their budget are flagged each with a one-line reason. The tiers are explained.
    system = page.locator("#panel-budget-body table.zones tbody tr").first
    expect(system).to_contain_text("fixed")
    expect(system.locator(".flag-bad")).to_have_count(0)
    for row in page.locator("#panel-budget-body tr.over").all():
        expect(row).to_contain_text("over budget")
    reasons = page.locator("#panel-budget-body p.over-reason").all_text_contents()
    assert all(":" in reason and not reason.startswith("system") for reason in reasons)
    expect(page.locator("#panel-anchors-body .legend.tiers")).to_contain_text("T1")

    # Anchor changes: folded by default, grouped by turn.
    changes = page.locator("#panel-anchors-body details.changes-box")
    expect(changes).not_to_have_attribute("open", "")
    changes.locator("summary").click()
    expect(changes.locator("h4").first).to_contain_text("turn")

    # Curve: fitted to the data, the full window one tick away, remembered on reload.
    fitted = page.locator(f"{CURVE} g.scale-fitted")
    full = page.locator(f"{CURVE} g.scale-full")
    expect(fitted).to_be_visible()
    expect(full).to_be_hidden()
    page.check("[data-curve-full]")
    expect(full).to_be_visible()
    expect(fitted).to_be_hidden()
    page.reload()
    expect(page.locator(f"{CURVE} g.scale-full")).to_be_visible()
    page.uncheck("[data-curve-full]")
    expect(page.locator(f"{CURVE} g.scale-fitted")).to_be_visible()
    assert count_events(stack, pk, "MODEL_CALL") == int(page.locator(CURVE).get_attribute("data-calls"))


def test_start_form_checkboxes_read_on_one_line_above_the_start_button(page: Page,
                                                                         stack: Stack) -> None:
    page.goto(stack.url("/sessions/new"))
    page.click("details.knobs > summary")
    line = page.evaluate("() => parseFloat(getComputedStyle(document.body).lineHeight)")
    start = page.locator("button:has-text('Start')").bounding_box()
    checks = page.locator(".field.check")
    assert checks.count() >= 2
    for index in range(checks.count()):
        label = checks.nth(index).locator("label").bounding_box()
        assert label["height"] < 1.8 * line, f"checkbox label {index} wraps"
        box = checks.nth(index).bounding_box()
        assert box["y"] + box["height"] <= start["y"], f"checkbox field {index} runs over Start"
