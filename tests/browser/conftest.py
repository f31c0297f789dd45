"""Browser fixtures: one private TaskOS stack and one Chromium for the whole module."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from .pages import signed_in_page
from .stack import running_stack

CHROMIUM = os.environ.get("TASKOS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    yield from running_stack(tmp_path_factory)


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
