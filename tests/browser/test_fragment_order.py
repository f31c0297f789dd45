"""How the page applies the drawer's patches (static/js/taskos.js, fragments.js) so that
each one fits: of an element sent whole twice in the messages held back for the next
animation frame, the earlier copy is skipped and so are the patches made for it; and a
patch of an element's own attributes keeps its revision, which the next patch names. A
patch that did not fit would make the page ask for the panel whole."""
from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page, expect

from .pages import finished_session
from .stack import Stack

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

# Three messages arriving within one frame, as a page that fell behind receives them: the
# badge whole at revision 900, a patch of that revision, the badge whole again at 901.
DELIVER = """const deliver = (message) => document.dispatchEvent(new CustomEvent(
      "htmx:wsBeforeMessage", {cancelable: true, detail: {message: message}}));"""
BURST = """() => {
  """ + DELIVER + """
  deliver('<span id="panel-cost-badge" class="badge" hx-swap-oob="true" data-rev="900"><b>first</b></span>');
  deliver('<b hx-swap-oob="path:panel-cost-badge@900/0!b">patched</b>');
  deliver('<span id="panel-cost-badge" class="badge" hx-swap-oob="true" data-rev="901"><b>last</b></span>');
}"""


# The badge whole, then in a later frame a patch of its own attributes and one inside it.
OWN_ATTRIBUTES = """async () => {
  """ + DELIVER + """
  deliver('<span id="panel-cost-badge" class="badge" hx-swap-oob="true" data-rev="902"><b>one</b></span>');
  await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
  deliver('<span hx-swap-oob="attrs:panel-cost-badge@902!span" id="panel-cost-badge" class="badge wide"></span>\\n'
          + '<b hx-swap-oob="path:panel-cost-badge@902/0!b">two</b>');
}"""
NEXT_FRAMES = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"


@pytest.fixture
def asked(page: Page, stack: Stack) -> list[dict]:
    """What the page sends over its websocket, on a finished session's page."""
    sent: list[dict] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda data: sent.append(
        json.loads(data if isinstance(data, str) else data.decode()))))
    finished_session(page, stack)
    expect(page.locator("#ws-state")).to_have_text("finished")
    expect(page.locator("#panel-cost")).to_have_attribute("open", "")
    return sent


def stale_after(page: Page, asked: list[dict], before: int) -> list[dict]:
    page.evaluate(NEXT_FRAMES)  # the frames applied, and what they made the page send
    return [message for message in asked[before:] if message.get("stale")]


def test_patches_of_a_skipped_copy_are_skipped_with_it(page: Page, asked: list[dict]) -> None:
    before = len(asked)
    page.evaluate(BURST)
    badge = page.locator("#panel-cost-badge")
    expect(badge).to_have_text("last")
    expect(badge).to_have_attribute("data-rev", "901")
    assert stale_after(page, asked, before) == []


def test_a_patch_of_an_elements_attributes_keeps_its_revision(page: Page,
                                                              asked: list[dict]) -> None:
    before = len(asked)
    page.evaluate(OWN_ATTRIBUTES)
    badge = page.locator("#panel-cost-badge")
    expect(badge).to_have_text("two")
    expect(badge).to_have_attribute("class", "badge wide")
    expect(badge).to_have_attribute("data-rev", "902")
    assert stale_after(page, asked, before) == []
