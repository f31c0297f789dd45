"""Page steps the browser tests and the browser scripts (drawer bench, screenshots) share."""
from __future__ import annotations

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


def finished_session(page: Page, stack: Stack, scenario: str = "sales-report",
                     window: int | None = None) -> int:
    """Start `scenario` from the form and wait on its page until it has finished."""
    page.goto(stack.url("/sessions/new"))
    page.select_option("#id_scenario", scenario)
    if window is not None:
        page.fill("#id_window", str(window))
    page.click("button:has-text('Start')")
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    expect(page.locator("#session-status .status")).to_have_text("finished")
    return int(page.url.rstrip("/").rsplit("/", 1)[1])
