"""Browser fixtures: one private TaskOS stack and one Chromium for the whole module."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from .stack import PASSWORD, USERNAME, Stack

CHROMIUM = os.environ.get("TASKOS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    running = Stack(tmp_path_factory.mktemp("stack"))
    try:
        running.start()
    except Exception:
        running.stop()
        print(running.logs())
        raise
    yield running
    running.stop()


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: install it (apt-get install -y "
                    "chromium) or point TASKOS_CHROMIUM at a Chromium binary.")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def signed_in_page(context, stack):
    """A new page of `context`, signed in as the stack's admin, on the dashboard."""
    context.set_default_timeout(60_000)
    page = context.new_page()
    page.goto(stack.url("/accounts/login/"))
    page.fill("#id_username", USERNAME)
    page.fill("#id_password", PASSWORD)
    page.click("button:has-text('Sign in')")
    page.wait_for_url(stack.url("/"))
    return page


@pytest.fixture
def page(browser, stack, request):
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    page = signed_in_page(context, stack)
    yield page
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        print(stack.logs())
    context.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.rep_call = report
