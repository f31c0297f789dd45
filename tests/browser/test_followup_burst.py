"""Follow-ups sent in quick succession are all stored, and text typed while one is being
sent stays in the box. htmx dropped a Send while the previous one was in flight, and the
first answer's reset emptied the box of what had been typed since (20 sent, 13 stored)."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from .stack import Stack
from .test_drawer_live import start_session

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
expect.set_options(timeout=90_000)

SENT = 8
BOX = "form.followup textarea[name=text]"


def cancel(page: Page) -> None:
    """Cancel the session, which the resumed worker may or may not have started yet."""
    page.click("form.cancel button")
    expect(page.locator("#flash")).to_contain_text(
        re.compile("Cancel requested|Cancelled before it started"))
    expect(page.locator("#session-status .status")).to_have_text("cancelled")


def test_follow_ups_sent_in_quick_succession_are_all_stored(page: Page, stack: Stack) -> None:
    pk = start_session(page, stack, "sales-report", window=8000)  # queued, worker paused
    try:
        # Every request takes 400 ms or more: each Send is pressed while others are in flight.
        cdp = page.context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.send("Network.emulateNetworkConditions", {
            "offline": False, "latency": 400, "downloadThroughput": -1, "uploadThroughput": -1})
        texts = [f"follow-up number {n}" for n in range(1, SENT + 1)]
        for text in texts:
            page.fill(BOX, text)
            page.click("form.followup button")
        page.locator(BOX).press_sequentially("typed meanwhile", delay=20)
        for _ in range(200):
            stored = [row[0] for row in stack.query(
                "SELECT text FROM runs_pendingmessage WHERE session_id = ? ORDER BY id", pk)]
            if len(stored) >= SENT:
                break
            page.wait_for_timeout(100)
        page.wait_for_timeout(1500)  # any answer still on its way has come by now
        stored = [row[0] for row in stack.query(
            "SELECT text FROM runs_pendingmessage WHERE session_id = ? ORDER BY id", pk)]
        assert stored == texts
        expect(page.locator(BOX)).to_have_value("typed meanwhile")
        expect(page.locator("#flash")).to_contain_text("Message sent")
        cdp.send("Network.emulateNetworkConditions", {
            "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    finally:
        stack.resume("worker")
    cancel(page)  # a run left going would hold the next test's start


def test_a_refused_follow_up_comes_back_to_the_box(page: Page, stack: Stack) -> None:
    pk = start_session(page, stack, "sales-report", window=8000)
    try:
        page.fill(BOX, "   ")  # only spaces: "required" lets it go, the server refuses it
        page.click("form.followup button")
        expect(page.locator("#flash")).to_contain_text("The message is empty.")
        expect(page.locator(BOX)).to_have_value("   ")
        assert stack.scalar("SELECT count(*) FROM runs_pendingmessage WHERE session_id = ?",
                            pk) == 0
    finally:
        stack.resume("worker")
    cancel(page)
