"""Ask before a tool acts (feature T11) in Chromium: a denial and an approval clicked in the
drawer's Approvals panel, against a real worker, Redis and daphne.

sales-report reads a file early and writes its report last; both tools are ticked
"Ask before" on the start form. The read is denied with a reason, the write (its diff
shown) approved; the session then finishes, its report on disk, the denial in what the
model read. Each step waits for a condition on the page or in the database.
`TASKOS_UPDATE_SCREENSHOT=1` writes the README's picture docs/approvals.png.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from .pages import expect_one_pending_approval, submit_start_form
from .stack import ROOT, Stack, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
expect.set_options(timeout=90_000)

REASON = "read the CSV with the csv tools instead"
README_SCREENSHOT = ROOT / "docs" / "approvals.png"


def test_deny_then_approve_in_the_drawer(page: Page, stack: Stack, tmp_path: Path):
    screenshot = (README_SCREENSHOT if os.environ.get("TASKOS_UPDATE_SCREENSHOT") == "1"
                  else tmp_path / "approvals.png")
    page.goto(stack.url("/sessions/new"))
    page.select_option("#id_scenario", "sales-report")
    page.locator("details", has=page.locator("fieldset.tools-ask-first")).evaluate(
        "d => d.open = true")
    page.check("fieldset.tools-ask-first input[value=read_file]")
    page.check("fieldset.tools-ask-first input[value=write_file]")
    pk = submit_start_form(page)

    # The read waits: the panel shows the call and its arguments, the status says so.
    pending = expect_one_pending_approval(page, "read_file", '"path"')
    # No worker holds it: the run ended and let its lease go.
    wait_for(lambda: stack.scalar("SELECT lease_owner FROM runs_session WHERE id = ?", pk) == "",
             "the lease given back")

    pending.locator("form.deny input[name=reason]").fill(REASON)
    pending.locator("form.deny button").click()
    expect(page.locator("#flash")).to_contain_text("Denied")

    # The session goes on to its write, which waits with the diff it would make.
    write = page.locator("#panel-approvals-body .approval-pending", has_text="write_file")
    expect(write).to_have_count(1)
    expect(write.locator(".approval-diff .diff-add").first).to_be_visible()
    page.locator("#panel-approvals").screenshot(path=str(screenshot))
    write.locator("form.approve button").click()
    expect(page.locator("#flash")).to_contain_text("Approved")

    expect(page.locator("#session-status .status")).to_have_text("finished")
    decided = page.locator("#panel-approvals-body table.approvals")
    expect(decided.locator("tr.approval-denied")).to_contain_text(REASON)
    expect(decided.locator("tr.approval-approved")).to_contain_text("write_file")
    rows = stack.query("SELECT tool, status, reason FROM runs_toolapproval WHERE session_id = ? "
                       "ORDER BY id", pk)
    assert rows == [("read_file", "denied", REASON), ("write_file", "approved", "")]
    wait_for(lambda: stack.scalar("SELECT count(*) FROM runs_sessionevent WHERE session_id = ? "
                                  "AND type = 'APPROVAL_DECIDED'", pk) == 2, "decided events")
    denial = stack.scalar("SELECT payload FROM runs_sessionevent WHERE session_id = ? AND "
                          "type = 'TOOL_RESULT' AND payload LIKE '%read_file%' ORDER BY seq "
                          "LIMIT 1", pk)
    assert REASON in denial
    assert stack.scalar("SELECT count(*) FROM runs_archivedturn WHERE session_id = ? AND "
                        "role = 'approval'", pk) == 2
