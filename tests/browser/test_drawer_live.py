"""The dashboard and the drawer in Chromium, against a real worker, Redis and daphne.

Nothing here waits a fixed time: each step waits for a condition on the page or in the
database, and sessions are held at known points by pausing a process (see stack.py).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from .stack import ROOT, Stack

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
expect.set_options(timeout=90_000)

TRANSCRIPT_TYPES = ("USER_MESSAGE", "ASSISTANT_MESSAGE", "TOOL_CALL", "TOOL_RESULT",
                    "COMPACTION", "ERROR", "SESSION_FINISHED")
SCREENSHOT = ROOT / "docs" / "drawer.png"

# Records every distinct state the budget bar and the curve showed, as a person would
# have seen them, from before the worker starts until the session ends.
WATCH = """() => {
  window.seen = {budget: [], calls: []};
  const note = () => {
    const budget = document.querySelector('#panel-budget-body .budget');
    const curve = document.querySelector('#panel-curve-body svg.curve');
    const b = budget && budget.dataset.turn + ':' + budget.dataset.inputTokens;
    if (b && window.seen.budget.at(-1) !== b) window.seen.budget.push(b);
    const c = curve && curve.dataset.calls;
    if (c && window.seen.calls.at(-1) !== c) window.seen.calls.push(c);
  };
  new MutationObserver(note).observe(document.body, {childList: true, subtree: true});
}"""


def start_session(page: Page, stack: Stack, scenario: str, window: int) -> int:
    """Submit the form with the worker paused; return once the page's socket is live."""
    stack.pause("worker")
    page.goto(stack.url("/sessions/new"))
    page.select_option("#id_scenario", scenario)
    page.fill("#id_window", str(window))
    page.click("button:has-text('Start')")
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    expect(page.locator("#ws-state")).to_have_text("live")
    expect(page.locator("#session-status .status")).to_have_text("queued")
    return int(page.url.rstrip("/").rsplit("/", 1)[1])


def count_events(stack: Stack, pk: int, *types: str) -> int:
    marks = ",".join("?" * len(types))
    return int(stack.scalar(f"SELECT count(*) FROM runs_sessionevent WHERE session_id = ? "
                            f"AND type IN ({marks})", pk, *types))


def assert_page_matches_database(page: Page, stack: Stack, pk: int) -> None:
    """What live updates built equals what the database holds: no gap, no duplicate."""
    last = int(stack.scalar("SELECT max(seq) FROM runs_sessionevent WHERE session_id = ?", pk))
    expect(page.locator("#last-seq")).to_have_value(str(last))
    ids = page.eval_on_selector_all("#transcript > article", "els => els.map(e => e.id)")
    assert len(ids) == len(set(ids)) == count_events(stack, pk, *TRANSCRIPT_TYPES)
    assert ids == sorted(ids, key=lambda i: int(i.split("-")[1]))
    calls = count_events(stack, pk, "MODEL_CALL")
    expect(page.locator("#panel-curve-body svg.curve")).to_have_attribute("data-calls", str(calls))
    compactions = count_events(stack, pk, "COMPACTION")
    expect(page.locator("#panel-compactions-body article.compaction")).to_have_count(compactions)


def test_sales_report_streams_into_the_drawer(page: Page, stack: Stack) -> None:
    pk = start_session(page, stack, "sales-report", window=6000)
    expect(page.locator("#panel-budget-body")).to_contain_text("No budget yet")
    page.evaluate(WATCH)
    stack.resume("worker")

    expect(page.locator("#panel-compactions-body article.compaction").first).to_be_visible()
    expect(page.locator("#session-status .status")).to_have_text("finished")
    seen = page.evaluate("window.seen")
    assert len(seen["budget"]) >= 2, f"the budget bar never changed: {seen['budget']}"
    assert len(seen["calls"]) >= 2, f"the curve never grew: {seen['calls']}"

    row = page.locator("#panel-compactions-body article.compaction").first
    expect(row.locator(".diff .add").first).to_be_visible()
    expect(row.locator("table.zones")).to_contain_text("history")
    expect(page.locator("#panel-curve-body polygon.summary").first).to_be_attached()
    expect(page.locator("#panel-budget-body .seg.zone-history")).to_be_attached()
    assert_page_matches_database(page, stack, pk)

    page.evaluate("window.scrollTo(0, 0)")
    page.locator("#drawer").screenshot(path=str(SCREENSHOT))
    assert SCREENSHOT.stat().st_size > 20_000
