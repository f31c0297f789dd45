"""Messages the page holds back for the next animation frame (static/js/taskos.js): of an
element sent whole twice, the earlier copy is skipped, and so are the patches made for it;
applied to the element as the page shows it, they would not fit, and the page would ask
for the panel whole."""
from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page, expect

from .pages import finished_session
from .stack import Stack

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

# Three messages arriving within one frame, as a page that fell behind receives them: the
# badge whole at revision 900, a patch of that revision, the badge whole again at 901.
BURST = """() => {
  const deliver = (message) => document.dispatchEvent(new CustomEvent(
      "htmx:wsBeforeMessage", {cancelable: true, detail: {message: message}}));
  deliver('<span id="panel-cost-badge" class="badge" hx-swap-oob="true" data-rev="900"><b>first</b></span>');
  deliver('<b hx-swap-oob="path:panel-cost-badge@900/0!b">patched</b>');
  deliver('<span id="panel-cost-badge" class="badge" hx-swap-oob="true" data-rev="901"><b>last</b></span>');
}"""


def test_patches_of_a_skipped_copy_are_skipped_with_it(page: Page, stack: Stack) -> None:
    sent: list[dict] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda data: sent.append(
        json.loads(data if isinstance(data, str) else data.decode()))))
    finished_session(page, stack)
    expect(page.locator("#ws-state")).to_have_text("finished")
    expect(page.locator("#panel-cost")).to_have_attribute("open", "")
    asked_before = len(sent)
    page.evaluate(BURST)
    badge = page.locator("#panel-cost-badge")
    expect(badge).to_have_text("last")
    expect(badge).to_have_attribute("data-rev", "901")
    # The page's own acknowledgement that it applied the frame, then what it sent.
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => "
                  "requestAnimationFrame(done)))")
    stale = [message for message in sent[asked_before:] if message.get("stale")]
    assert stale == [], f"the page asked for panels whole: {stale}"
