"""A summary call in the inspector is broken down as exactly as an agent call: every
message of the request (the agent's head, the previous summary, each folded message, the
instructions) with its own tokens, the rows adding up to the provider's count with no
"difference" row, read in Chromium from a finished run's drawer.

`TASKOS_UPDATE_SCREENSHOT=1` writes the README's picture docs/inspector-summary.png.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from .pages import finished_session
from .stack import ROOT, Stack

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
expect.set_options(timeout=90_000)

README_SCREENSHOT = ROOT / "docs" / "inspector-summary.png"

READ = """() => {
  const body = document.querySelector('#panel-inspector .panel-body');
  const numbers = (el) => +el.textContent.replace(/[^0-9-]/g, '');
  return {
    call: +body.querySelector('.inspector').dataset.call,
    kind: body.querySelector('.inspector-head .tag').textContent.trim(),
    total: numbers(body.querySelector('.inspector-head .input-total')),
    rows: Array.from(body.querySelectorAll('ol.messages > li')).map((li) => ({
      cls: li.className,
      zone: (li.querySelector('.zone') || {textContent: ''}).textContent.trim(),
      tokens: numbers(li.querySelector('.part-tokens')),
    })),
  };
}"""


def test_a_summary_calls_rows_add_up_to_its_total(page: Page, stack: Stack,
                                                   tmp_path: Path) -> None:
    pk = finished_session(page, stack, "sales-report", window=6000)
    # Followed live to its end: the connection label no longer says "live".
    expect(page.locator("#ws-state")).to_have_text("finished")
    summaries = [int(n) for (n,) in stack.query(
        "SELECT json_extract(payload, '$.call') FROM runs_sessionevent WHERE session_id = ? "
        "AND type = 'MODEL_CALL' AND json_extract(payload, '$.kind') = 'summary' ORDER BY seq",
        pk)]
    assert summaries, "sales-report at 6 000 tokens made no summary call"
    for number in summaries:
        page.select_option("#panel-inspector .inspector-bar select", str(number))
        expect(page.locator("#panel-inspector .panel-body .inspector")).to_have_attribute(
            "data-call", str(number))
        # Swapped in, the new picker answers a change only once htmx has processed it, a
        # settle (20 ms, longer on a busy machine) later: picked sooner, the next call was
        # never asked for (a fresh-clone run failed so).
        expect(page.locator("#panel-inspector .htmx-added")).to_have_count(0)
        shown = page.evaluate(READ)
        assert shown["kind"] == "summary"
        messages = [row for row in shown["rows"] if "role-" in row["cls"]]
        assert messages and all(row["tokens"] > 0 for row in messages), shown
        assert not [row for row in shown["rows"] if "part-difference" in row["cls"]], shown
        assert sum(row["tokens"] for row in shown["rows"]) == shown["total"], shown
        zones = {row["zone"] for row in messages}
        assert {"system", "folded", "instructions"} <= zones, zones
    # The last one folds into the summary the first wrote: it is shown as the previous one.
    assert "previous-summary" in zones or len(summaries) == 1, zones

    screenshot = (README_SCREENSHOT if os.environ.get("TASKOS_UPDATE_SCREENSHOT") == "1"
                  else tmp_path / "inspector-summary.png")
    page.locator("#panel-inspector").screenshot(path=str(screenshot))
    assert screenshot.stat().st_size > 10_000
