"""A tool source through the real pages in Chromium (T10): staff add the example MCP
server in the admin with a per-tool limit, a task ticks it on the start form, the worker
starts the server and the simulated model calls its tools, and the drawer's cost panel
lists the tokens per source and per tool."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from .pages import submit_start_form
from .stack import ROOT, Stack, running_stack

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]
README_SCREENSHOT = ROOT / "docs" / "tool-sources.png"
SLOW_MS = 300_000  # the worker starts a Python MCP server: seconds on a busy machine


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    yield from running_stack(tmp_path_factory)


def test_a_source_added_in_the_admin_serves_a_task(page: Page, stack: Stack, tmp_path: Path):
    screenshot = (README_SCREENSHOT if os.environ.get("TASKOS_UPDATE_SCREENSHOT") == "1"
                  else tmp_path / "tool-sources.png")
    page.goto(stack.url("/admin/runs/toolsource/add/"))
    page.fill("#id_name", "workspace")
    page.fill("#id_command", sys.executable)
    page.fill("#id_args", '["-m", "taskos.mcp_servers.workspace_tools"]')
    page.fill("#id_start_timeout_s", "300")
    page.fill("#id_tool_settings-0-tool_name", "column_total")
    page.fill("#id_tool_settings-0-max_result_length", "400")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")

    page.goto(stack.url("/sessions/new"))
    page.select_option("#id_scenario", "workspace-tools")
    page.check("fieldset.tool-sources input[type=checkbox]")
    pk = submit_start_form(page)
    expect(page.locator("#session-status .status")).to_have_text("finished", timeout=SLOW_MS)

    costs = page.locator("#panel-cost-body table.tool-costs")
    expect(costs.locator("tr.tool-source", has_text="workspace")).to_contain_text("2")
    expect(costs).to_contain_text("workspace__column_total")
    expect(costs).to_contain_text("workspace__calculate")
    page.locator("#panel-cost").scroll_into_view_if_needed()
    page.locator("#panel-cost").screenshot(path=str(screenshot))
    results = stack.query("SELECT tool_name, content FROM runs_archivedturn WHERE "
                          "session_id = ? AND tool_name LIKE 'workspace__%' ORDER BY id", pk)
    assert results == [("workspace__column_total",
                        "revenue: total 35875839.05 over 456 rows (4 empty or not numbers)"),
                       ("workspace__calculate", "8.24")]
