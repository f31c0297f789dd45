"""The inspector following a run live shows exactly what a fresh read shows (issue 12).

Live, it gets only the messages that differ from the call it showed before (new ones
appended, changed ones merged, the rest removed after a compaction) and its figures as
attributes; after any number of such updates it must equal the body the server renders
for the latest call from scratch.
"""
from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from .pages import finished_session
from .stack import Stack, wait_for
from .test_drawer_incremental import held_in_sync
from .test_drawer_live import cancel, count_events, start_session

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
expect.set_options(timeout=90_000)

# What the inspector shows, read the same way from the page and from a fresh render.
READ = """(root) => ({
  call: root.querySelector('.inspector').dataset.call,
  total: root.querySelector('ol.messages').dataset.partsTotal,
  head: root.querySelector('.inspector-head').textContent.replace(/\\s+/g, ' '),
  bar: root.querySelector('.inspector-bar select').textContent.replace(/\\s+/g, ' '),
  rows: Array.from(root.querySelectorAll('ol.messages > li')).map(
    (li) => li.className + ' ' + li.textContent.replace(/\\s+/g, ' ')),
})"""
FRESH = """async ([url, read]) => {
  const holder = document.createElement('div');
  holder.innerHTML = await (await fetch(url)).text();
  return eval(read)(holder);
}"""


def shown_and_fresh(page: Page, stack: Stack, pk: int) -> tuple[dict, dict]:
    shown = page.evaluate(f"() => ({READ})(document.getElementById('panel-inspector-body'))")
    fresh = page.evaluate(FRESH, [stack.url(f"/sessions/{pk}/inspect"), READ])
    return shown, fresh


def test_the_live_inspector_equals_a_fresh_render_through_growth_and_compaction(
        page: Page, stack: Stack) -> None:
    pk = start_session(page, stack, "long-1000", window=8000)
    try:
        stack.resume("worker")
        wait_for(lambda: count_events(stack, pk, "MODEL_CALL") >= 3, "three model calls")
        held_in_sync(page, stack, pk)
        shown, fresh = shown_and_fresh(page, stack, pk)
        assert shown == fresh
        calls = int(shown["call"])

        stack.resume("worker")
        wait_for(lambda: count_events(stack, pk, "COMPACTION") >= 1, "a compaction")
        compacted = count_events(stack, pk, "MODEL_CALL")
        wait_for(lambda: count_events(stack, pk, "MODEL_CALL") >= compacted + 2,
                 "two calls after it")
        held_in_sync(page, stack, pk)
        shown, fresh = shown_and_fresh(page, stack, pk)
        assert int(shown["call"]) > calls
        assert shown == fresh

        # A row's text is not sent with it: opened, the row fetches it.
        row = page.locator("#inspector-messages > li.role-tool details[data-text]").last
        assert row.locator("pre").count() == 0
        row.locator("summary").click()
        expect(row.locator("pre").first).to_contain_text("energy source")

        # Its export links name the newest call (the bar then need not change with each
        # call); clicked, they name the call it shows.
        record = page.locator("#inspector-bar a.link[download]")
        assert record.get_attribute("href") == f"/sessions/{pk}/calls/latest/record.json"
        with page.expect_download() as download:
            call, href = record.evaluate("""(link) => {
              const call = document.getElementById('inspector-detail').dataset.call;
              link.click();
              return [call, link.getAttribute('href')];
            }""")
        assert href.endswith(f"/sessions/{pk}/calls/{call}/record.json")
        assert download.value.suggested_filename == f"taskos-session-{pk}-call-{call}.json"
    finally:
        stack.resume("worker")
        cancel(page)


MESSAGE_ROWS = "() => Array.from(document.querySelectorAll('#inspector-messages > li'), (li) => li.id)"
DELIVER = """async (message) => {
  document.dispatchEvent(new CustomEvent("htmx:wsBeforeMessage",
                                         {cancelable: true, detail: {message: message}}));
  await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
}"""


def test_rows_named_by_their_message_leave_and_arrive_among_the_rows_that_stay(
        page: Page, stack: Stack) -> None:
    """A compaction drops rows in the middle of the list: they leave in one fragment
    (from the first to the last), a new row is placed after the row it follows, and the
    rows after them stay the same elements. Applied twice (a reconnect replays a batch),
    nothing more changes; a range whose end is not after its start removes nothing."""
    finished_session(page, stack)
    expect(page.locator("#ws-state")).to_have_text("finished")
    shown = page.evaluate(MESSAGE_ROWS)
    rows = [dom_id for dom_id in shown if dom_id.startswith("inspector-msg-")]
    assert len(rows) >= 5
    page.evaluate("(id) => { window.stayed = document.getElementById(id); }", rows[3])
    message = "\n".join([
        f'<li id="{rows[1]}" hx-swap-oob="delete-through:#{rows[2]}"></li>',
        f'<ol hx-swap-oob="afterend:#{rows[0]}"><li class="msg role-user" '
        'id="inspector-msg-user-new"><details data-text="0"><summary>new</summary>'
        '</details></li></ol>',
        f'<li id="{rows[4]}" hx-swap-oob="delete-through:#{rows[3]}"></li>'])
    expected = [dom_id for dom_id in shown if dom_id not in rows[1:3]]
    expected.insert(expected.index(rows[0]) + 1, "inspector-msg-user-new")
    for _ in range(2):
        page.evaluate(DELIVER, message)
        assert page.evaluate(MESSAGE_ROWS) == expected
    assert page.evaluate("(id) => window.stayed === document.getElementById(id)", rows[3])
