"""A long run followed live stays light (issue 12), in Chromium against a real worker.

The transcript reads newest first: a page left where it opened keeps only the newest
entries while the run goes on (the oldest leave at the bottom), and scrolling down to the
end loads the older ones back, exactly the entries that left, in order. The curve is sent
once, then only the new calls' points: the page draws what the server would have.
Sessions are held at known points by pausing the worker (stack.py); nothing waits a
fixed time.
"""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from .stack import Stack, wait_for
from .test_drawer_live import TRANSCRIPT_TYPES, cancel, count_events, last_seq, start_session

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
expect.set_options(timeout=90_000)

KEEP, MOST = 60, 80  # entries a followed page keeps (static/js/taskos.js)
PAGE = 60  # entries per older page (taskos/drawer/stream.py TRANSCRIPT_PAGE)
ENTRIES = "#transcript > article.ev"


def stored_entries(stack: Stack, pk: int) -> list[int]:
    """The session's transcript entries in the database, newest first."""
    marks = ",".join("?" * len(TRANSCRIPT_TYPES))
    return [seq for (seq,) in stack.query(
        f"SELECT seq FROM runs_sessionevent WHERE session_id = ? AND type IN ({marks}) "
        "ORDER BY seq DESC", pk, *TRANSCRIPT_TYPES)]


def shown_entries(page: Page) -> list[int]:
    return page.eval_on_selector_all(ENTRIES, "els => els.map(e => +e.id.slice(3))")


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


CURVE = "#panel-curve-body svg.curve"
# Counts the messages that brought the curve's drawing whole (before the page applies them):
# in its body sent whole, or as the patch that puts it in the body.
COUNT_CURVE_BODIES = """() => {
  window.curveBodies = 0;
  document.addEventListener('htmx:wsBeforeMessage', (event) => {
    if (/<svg [^>]*class="curve"/.test(event.detail.message)) window.curveBodies += 1;
  }, true);
}"""
# The curve as drawn: every element with its attributes (not the data) and its own text.
DRAWING = """(selector) => {
  const svg = document.querySelector(selector);
  const own = (el) => Array.from(el.childNodes).filter((n) => n.nodeType === 3).map((n) => n.data).join('');
  const lines = Array.from(svg.querySelectorAll('*'), (el) => el.tagName + ' ' +
    Array.from(el.attributes).filter((a) => !a.name.startsWith('data-'))
      .map((a) => a.name + '=' + a.value).sort().join(' ') + ' :' + own(el).trim());
  const legend = svg.parentNode.querySelector('.legend');
  return {series: svg.dataset.series, calls: svg.dataset.calls, lines,
          legend: legend.querySelector('.curve-peak').textContent + ' / ' +
                  (legend.querySelector('.curve-over').hidden ? '' : legend.querySelector('.curve-over').textContent)};
}"""
NUMBER = re.compile(r"(-?\d+(?:\.\d+)?(?:e-?\d+)?)")


def same_drawing(live: list[str], served: list[str]) -> bool:
    """Equal but for the last digit of a rounded coordinate (JS and Python round halves
    differently)."""
    if len(live) != len(served):
        return False
    for a, b in zip(live, served):
        parts_a, parts_b = NUMBER.split(a), NUMBER.split(b)
        if len(parts_a) != len(parts_b):
            return False
        for i, (x, y) in enumerate(zip(parts_a, parts_b)):
            if i % 2 == 0 and x != y or i % 2 == 1 and abs(float(x) - float(y)) > 0.11:
                return False
    return True


def test_the_curve_grows_from_points_and_draws_what_the_server_draws(
        page: Page, stack: Stack) -> None:
    pk = start_session(page, stack, "long-1000", window=8000)  # the worker is paused
    try:
        page.evaluate(COUNT_CURVE_BODIES)
        stack.resume("worker")
        # Past the first call (the drawing comes whole once) and past 150 calls, where
        # only summary and over-window calls keep a marker.
        wait_for(lambda: count_events(stack, pk, "MODEL_CALL") > 160, "161 model calls")
        stack.pause("worker")
        expect(page.locator("#last-seq")).to_have_value(str(last_seq(stack, pk)))
        calls = count_events(stack, pk, "MODEL_CALL")
        expect(page.locator(CURVE)).to_have_attribute("data-calls", str(calls))
        assert page.evaluate("window.curveBodies") == 1  # the first call's, then only points
        live = page.evaluate(DRAWING, CURVE)
        assert len(live["series"].split()) == calls

        # A delta sent again after a resync (its first two points already drawn) adds
        # only the point the curve lacks: the reconnect test once saw 1–2 calls too many.
        # Done before the reload below: after it, the socket's catch-up redraws the curve
        # whole, at a moment the test cannot see, and wiped the added point (1 in 3 runs
        # on a loaded machine).
        first = int(page.locator(CURVE).get_attribute("data-first-call"))
        held = live["series"].split()
        page.evaluate("""([from, points]) => {
          const inbox = document.getElementById('curve-inbox');
          inbox.insertAdjacentHTML('beforeend',
            `<i data-from="${from}" data-points="${points}" data-window="8000" data-trigger="6400"></i>`);
          window.TaskOSCurve.take(inbox);
        }""", [first + calls - 2, " ".join(held[-2:] + ["1234"])])
        expect(page.locator(CURVE)).to_have_attribute("data-calls", str(calls + 1))
        assert page.evaluate(DRAWING, CURVE)["series"].split() == held + ["1234"]

        page.reload()  # the server draws the same curve
        expect(page.locator(CURVE)).to_have_attribute("data-calls", str(calls))
        served = page.evaluate(DRAWING, CURVE)
        assert live["series"] == served["series"] and live["legend"] == served["legend"]
        assert same_drawing(live["lines"], served["lines"]), "\n".join(
            f"{a}\n{b}" for a, b in zip(live["lines"], served["lines"]) if a != b)
    finally:
        stack.resume("worker")
        cancel(page)
