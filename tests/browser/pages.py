"""Page steps the browser tests and the browser scripts (drawer bench, screenshots) share."""
from __future__ import annotations

import json
import re

from playwright.sync_api import Locator, Page, expect

from .stack import PASSWORD, USERNAME, Stack


def signed_in_page(context, stack: Stack, timeout_ms: int = 60_000) -> Page:
    """A new page of `context`, signed in as the stack's admin, on the dashboard."""
    context.set_default_timeout(timeout_ms)
    page = context.new_page()
    page.goto(stack.url("/accounts/login/"))
    page.fill("#id_username", USERNAME)
    page.fill("#id_password", PASSWORD)
    page.click("button:has-text('Sign in')")
    page.wait_for_url(stack.url("/"))
    return page


def submit_start_form(page: Page) -> int:
    """Press Start on the filled-in start form; the new session's number, from its page."""
    page.click("button:has-text('Start')")
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    return int(page.url.rstrip("/").rsplit("/", 1)[1])


def expect_one_pending_approval(page: Page, tool: str, in_arguments: str):
    """The drawer's Approvals panel holds one waiting call of `tool`, whose arguments show
    `in_arguments`, and the status header says the session waits for approval."""
    pending = page.locator("#panel-approvals-body .approval-pending")
    expect(pending).to_have_count(1)
    expect(pending).to_contain_text(tool)
    expect(pending.locator(".approval-args")).to_contain_text(in_arguments)
    expect(page.locator("#session-status .status")).to_have_text("waiting_for_approval")
    return pending


def finished_session(page: Page, stack: Stack, scenario: str = "sales-report",
                     window: int | None = None) -> int:
    """Start `scenario` from the form and wait on its page until it has finished."""
    page.goto(stack.url("/sessions/new"))
    page.select_option("#id_scenario", scenario)
    if window is not None:
        page.fill("#id_window", str(window))
    pk = submit_start_form(page)
    expect(page.locator("#session-status .status")).to_have_text("finished")
    return pk


def record_websocket(page: Page) -> tuple[list[str], list[tuple[int, dict]]]:
    """The frames every websocket of `page` receives, and the messages the page sends, each
    with how many frames it had received by then; both lists fill as the page runs."""
    frames: list[str] = []
    asked: list[tuple[int, dict]] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda data: frames.append(
        data if isinstance(data, str) else data.decode())))
    page.on("websocket", lambda ws: ws.on("framesent", lambda data: asked.append(
        (len(frames), json.loads(data if isinstance(data, str) else data.decode())))))
    return frames, asked


def wait_for_first_frame(page: Page, frames: list[str]) -> int:
    """Wait until the first sync's frame arrived (Playwright hands events over during its
    own calls, so this polls through the page); the number of frames then."""
    for _ in range(600):
        if frames:
            break
        page.wait_for_timeout(100)
    assert frames, "the first sync never came"
    return len(frames)


def click_in_view(target: Locator) -> None:
    """Click `target` once it is in view and laid out where it will stay.

    A click scrolls its target into view and presses at once; the drawer's panel bodies and
    detailed compactions are laid out only once in view (content-visibility: auto), so a
    scroll that brings them in can move what is under them a frame later. Seen on a loaded
    machine: the button went down on the anchor change log's summary and came up beside it,
    the click went to the panel's body and the list stayed folded. Scrolled first, the
    click waits until its target has stopped moving (Playwright's "stable")."""
    target.scroll_into_view_if_needed()
    target.click()


# Set once the drawer's <details> with this id has fired its "toggle" event: the page's
# own listener (static/js/taskos.js, there since the page loaded, so it runs first) has
# then sent the consumer which panels are open.
AWAIT_TOGGLE = """(id) => {
  window.toggled = false;
  document.addEventListener('toggle', function seen(event) {
    if (event.target.id !== id) { return; }
    document.removeEventListener('toggle', seen, true);
    window.toggled = true;
  }, true);
}"""
# A patch of the Hints panel's body made for a revision the page never had: it does not
# fit, so the page asks the consumer for that panel whole (static/js/fragments.js askWhole),
# which removes the mark set here when it comes.
ASK_FOR_HINTS = """() => {
  document.getElementById('panel-hints-body').dataset.before = '1';
  document.dispatchEvent(new CustomEvent('htmx:wsBeforeMessage', {cancelable: true,
    detail: {message: '<b hx-swap-oob="path:panel-hints-body@999999/0!b">x</b>'}}));
}"""


def toggle_panel(page: Page, name: str) -> None:
    """Fold (or unfold) the drawer's panel `name` and wait until the session's consumer
    has taken it in: from then on it sends a folded panel nothing.

    The page's message saying so gets no answer, and until the consumer has handled it, it
    sends the panel's updates as before: a worker resumed right after the click can reach
    it first (held back in the page, the fold let one more curve delta in, which the page
    applies by design: fragments already on the way). The consumer handles a page's
    messages one after the other, in the order sent, so once the Hints panel the page asked
    for after it has come, the fold was handled too. With the worker paused, or Hints
    folded: a live update of an open Hints panel could also take the mark away."""
    page.evaluate(AWAIT_TOGGLE, f"panel-{name}")
    click_in_view(page.locator(f"#panel-{name} > summary"))
    page.wait_for_function("window.toggled")
    page.evaluate(ASK_FOR_HINTS)
    expect(page.locator("#panel-hints-body[data-before]")).to_have_count(0)
