"""The status header comes as the figures that changed, and never drifts from a fresh load.

In Chromium against a real worker: while long-1000 runs, the header (status, turns,
tokens, peak, compactions, cost) is sent whole once, at the first sync, and then only as
patches of what changed in it; after hundreds of them it is what a fresh load of the page
renders. A header the page holds in another form than the one the patches were made for
(sent whole over HTTP, as an approval's answer does) is asked for whole and set right.
The session is held at known points by pausing the worker; nothing waits a fixed time.
"""
from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from .pages import record_websocket, wait_for_first_frame
from .stack import Stack, wait_for
from .test_drawer_incremental import held_in_sync
from .test_drawer_live import cancel, count_events, start_session

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]
expect.set_options(timeout=120_000)

STATUS_WHOLE = 'id="session-status" class="status-bar" hx-swap-oob="true"'
STATUS_PATCH = ":session-status@"
# The header as the page shows it, without the revision live patches need.
HEADER = """() => {
  const header = document.getElementById('session-status').cloneNode(true);
  header.removeAttribute('data-rev');
  return header.outerHTML.replace(/>\\s+</g, '><').replace(/\\s+/g, ' ');
}"""


def fresh_header(page: Page, stack: Stack, pk: int, held: int) -> str:
    fresh = page.context.new_page()
    fresh.goto(stack.url(f"/sessions/{pk}/"))
    expect(fresh.locator("#last-seq")).to_have_value(str(held))
    header = fresh.evaluate(HEADER)
    fresh.close()
    return header


def run_until(page: Page, stack: Stack, pk: int, calls: int) -> int:
    """Let the worker go until `calls` model calls are stored; the seq the page then holds."""
    stack.resume("worker")
    wait_for(lambda: count_events(stack, pk, "MODEL_CALL") >= calls, f"{calls} model calls")
    return held_in_sync(page, stack, pk)


def test_the_status_header_comes_as_its_changed_figures_and_matches_a_fresh_load(
        page: Page, stack: Stack) -> None:
    frames, asked = record_websocket(page)
    pk = start_session(page, stack, "long-1000", window=8000)
    try:
        first_sync = wait_for_first_frame(page, frames)
        # 60 calls at the stack's 100 ms each: several of the drawer's refreshes.
        held = run_until(page, stack, pk, 60)
        live = frames[first_sync:]
        assert len(live) > 3, f"only {len(live)} live frames"
        whole = sum(frame.count(STATUS_WHOLE) for frame in live)
        patched = sum(frame.count(STATUS_PATCH) for frame in live)
        # Sent whole, the header came with every one of the live frames.
        assert whole == 0, f"the header came whole in {whole} of {len(live)} live frames"
        assert patched > 0, "no patch of the header"
        assert not any("status" in (message.get("refresh") or ()) for _, message in asked)
        expect(page.locator("#session-status .status")).to_have_text("running")
        assert page.evaluate(HEADER) == fresh_header(page, stack, pk, held)

        # The header replaced by one without a revision (as an approval's HTTP answer
        # sends it): the next patch does not fit it, the page asks for it, gets it whole.
        page.evaluate("() => document.getElementById('session-status')"
                      ".removeAttribute('data-rev')")
        sent_before = len(frames)
        held = run_until(page, stack, pk, 75)
        assert any("status" in (message.get("refresh") or ()) for _, message in asked), \
            "the page did not ask for the header it could not patch"
        expect(page.locator("#session-status[data-rev]")).to_have_count(1)
        assert any(STATUS_WHOLE in frame for frame in frames[sent_before:])
        assert page.evaluate(HEADER) == fresh_header(page, stack, pk, held)
    finally:
        stack.resume("worker")
        cancel(page)
