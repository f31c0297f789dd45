"""The person's own files and tools, walked as a new user would in Chromium (T9, T10, T11):
a CSV of their own and a plain-text brief uploaded on the start form, the example MCP
server that ships with TaskOS added as a tool source by staff in the admin (its tools ask
first), a task started with both on the simulated model, the source's column_total call
approved and its calculate call denied in the drawer, and the report the agent wrote
downloaded from the workspace listing. Real daphne, worker, Redis, PostgreSQL and MCP
server process; each step waits for a condition on the page or in the database.
`TASKOS_UPDATE_SCREENSHOT=1` writes the README's picture docs/own-files-walk.png."""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from .pages import expect_one_pending_approval, submit_start_form
from .stack import ROOT, Stack, running_stack, wait_for
from .test_workspace_uploads import listed, payload, writer

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]
expect.set_options(timeout=300_000)  # the worker starts a Python MCP server: slow when busy

README_SCREENSHOT = ROOT / "docs" / "own-files-walk.png"
EXPENSES = b"team,amount\nDesign,1200.50\nResearch,830.25\nSupport,415\n"
BRIEF = b"Total the amount column of expenses.csv and write the total to report.md.\n"
REASON = "no shares, the total is all I need"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    yield from running_stack(tmp_path_factory)


def test_own_files_and_an_mcp_source_with_an_approval_and_a_denial(page: Page, stack: Stack,
                                                                  tmp_path: Path):
    screenshot = (README_SCREENSHOT if os.environ.get("TASKOS_UPDATE_SCREENSHOT") == "1"
                  else tmp_path / "own-files-walk.png")
    # Staff add the example server as a tool source whose every tool asks first.
    page.goto(stack.url("/admin/runs/toolsource/add/"))
    page.fill("#id_name", "workspace")
    page.fill("#id_command", sys.executable)
    page.fill("#id_args", '["-m", "taskos.mcp_servers.workspace_tools"]')
    page.fill("#id_start_timeout_s", "300")
    page.check("#id_ask_first")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")

    # The person's own CSV and brief on the start form, with the source ticked.
    page.goto(stack.url("/sessions/new"))
    page.select_option("#id_scenario", "own-files-and-tools")
    page.set_input_files("#id_files", [payload("expenses.csv", EXPENSES, "text/csv"),
                                       payload("brief.txt", BRIEF)])
    page.check("fieldset.tool-sources input[type=checkbox]")
    pk = submit_start_form(page)

    # The source's column_total over the person's file waits; approved in the drawer.
    pending = expect_one_pending_approval(page, "workspace__column_total", "expenses.csv")
    pending.locator("form.approve button").click()
    expect(page.locator("#flash")).to_contain_text("Approved")

    # Its calculate call waits next; denied with a reason the model reads.
    calculate = page.locator("#panel-approvals-body .approval-pending",
                             has_text="workspace__calculate")
    expect(calculate).to_have_count(1)
    calculate.locator("form.deny input[name=reason]").fill(REASON)
    calculate.locator("form.deny button").click()
    expect(page.locator("#flash")).to_contain_text("Denied")
    expect(page.locator("#session-status .status")).to_have_text("finished")

    decided = page.locator("#panel-approvals-body table.approvals")
    expect(decided.locator("tr.approval-approved")).to_contain_text("workspace__column_total")
    expect(decided.locator("tr.approval-denied")).to_contain_text(REASON)
    assert stack.query("SELECT tool, status, reason FROM runs_toolapproval WHERE "
                       "session_id = ? ORDER BY id", pk) == [
        ("workspace__column_total", "approved", ""),
        ("workspace__calculate", "denied", REASON)]
    # The agent read the person's brief, and the MCP server totalled the person's CSV.
    results = dict(stack.query("SELECT tool_name, content FROM runs_archivedturn WHERE "
                               "session_id = ? AND role <> 'approval' AND tool_name IN "
                               "('read_file', 'workspace__column_total')", pk))
    assert results["read_file"] == BRIEF.decode()
    assert results["workspace__column_total"] == \
        "amount: total 2445.75 over 3 rows (0 empty or not numbers)"
    wait_for(lambda: REASON in (stack.scalar(
        "SELECT payload FROM runs_sessionevent WHERE session_id = ? AND type = 'TOOL_RESULT' "
        "AND payload LIKE '%workspace__calculate%' ORDER BY seq LIMIT 1", pk) or ""),
        "the denial as the calculate call's result")

    # The workspace lists both uploads as the person's and the report as the agent's.
    page.reload()
    assert {"brief.txt", "expenses.csv", "report.md"} <= set(listed(page))
    assert writer(page, "expenses.csv") == "you (ann), at the start"
    assert re.fullmatch(r"agent, turn \d+", writer(page, "report.md"))
    page.locator("#workspace").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshot), full_page=False)
    with page.expect_download() as download:
        page.click('#workspace tr[data-path="report.md"] a:has-text("download")')
    assert download.value.suggested_filename == "report.md"
    report = Path(download.value.path()).read_text(encoding="utf-8")
    # The figure the report states is the one the MCP server computed from the upload.
    assert report.startswith("# Expenses report") and "2445.75 over 3 rows" in report
