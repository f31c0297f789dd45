"""Page steps the browser tests and the browser scripts (drawer bench, screenshots) share."""
from __future__ import annotations

import json
import re

from playwright.sync_api import Page, expect

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
