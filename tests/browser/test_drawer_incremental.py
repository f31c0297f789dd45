"""Live updates change only what changed (issue 12), in Chromium against a real worker.

A person who opened a list in the drawer finds it open after new events; rows already on
the page stay the very same elements (new ones are added beside them, nothing is rebuilt);
a folded panel's content is not touched at all until it is unfolded. Sessions are held at
known points by pausing the worker (stack.py); nothing waits a fixed time.
"""
from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from .pages import click_in_view, finished_session, toggle_panel
from .stack import Stack, wait_for
from .test_drawer_live import cancel, count_events, last_seq, start_session

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
expect.set_options(timeout=90_000)

ROWS = ("#panel-anchors-body li.change, #panel-anchors-body li.anchor, "
        "#panel-compactions-body li.compaction-brief, #panel-compactions-body article.compaction")

# A row by what it shows: an anchor change by seq, a compaction by number, an anchor by
# its pk and list (one retired since, or moved among a tool's earlier conclusions by a newer
# one, is a row of another list).
KEY = """const key = (el) => el.id ? (el.closest('#anchors-retired') ? 'retired-'
                                  : el.closest('#anchors-earlier') ? 'earlier-' : '') + el.id
                             : 'change-' + el.dataset.seq;"""
# Remembers every row element on the page and watches the folded curve's body for any
# change at all.
REMEMBER = """(rows) => {
  """ + KEY + """
  window.kept = new Map();
  for (const el of document.querySelectorAll(rows)) window.kept.set(key(el), el);
  window.foldedChanges = 0;
  window.foldedLog = [];  // the first changes, to name them when the test fails
  new MutationObserver((list) => {
    window.foldedChanges += list.length;
    list.slice(0, 10 - window.foldedLog.length).forEach((m) => window.foldedLog.push(
      [m.type, m.target.id || m.target.nodeName, m.attributeName || '',
       Math.round(performance.now())].join(' ')));
  }).observe(
    document.getElementById('panel-curve-body'),
    {subtree: true, childList: true, attributes: true, characterData: true});
}"""
# For every row on the page now: was it on the page before, and is it the same element?
COMPARE = """(rows) => {
  """ + KEY + """
  const out = {same: 0, rebuilt: [], added: 0};
  for (const el of document.querySelectorAll(rows)) {
    const before = window.kept.get(key(el));
    if (before === undefined) out.added += 1;
    else if (before === el) out.same += 1;
    else out.rebuilt.push(key(el));
  }
  return out;
}"""


def held_in_sync(page: Page, stack: Stack, pk: int) -> int:
    """Pause the worker and wait until the page has every stored event."""
    stack.pause("worker")
    held = last_seq(stack, pk)
    expect(page.locator("#last-seq")).to_have_value(str(held))
    return held


def test_updates_keep_rows_and_opened_lists_and_leave_a_folded_panel_alone(
        page: Page, stack: Stack) -> None:
    pk = start_session(page, stack, "long-1000", window=8000)
    try:
        stack.resume("worker")
        wait_for(lambda: count_events(stack, pk, "COMPACTION") >= 4
                 and count_events(stack, pk, "ANCHOR_CHANGED") >= 2, "four compactions")
        held_in_sync(page, stack, pk)
        changes_box = page.locator("#panel-anchors-body details.changes-box")
        older = page.locator("#compactions-older")
        click_in_view(changes_box.locator("summary"))
        click_in_view(older.locator(":scope > summary"))
        expect(changes_box).to_have_attribute("open", "")
        expect(older).to_have_attribute("open", "")
        # Folded, the change log got no rows; opened, it catches up (the panel comes whole).
        held_change = int(stack.scalar("SELECT max(seq) FROM runs_sessionevent WHERE "
                                       "session_id = ? AND type = 'ANCHOR_CHANGED'", pk))
        expect(changes_box.locator(f"li.change[data-seq='{held_change}']")).to_have_count(1)
        # The curve folded, and the consumer told before the worker goes on: what it sent
        # before it knew would be applied (fragments.js), and would fail this test.
        toggle_panel(page, "curve")
        expect(page.locator("#panel-curve")).not_to_have_attribute("open", "")
        page.evaluate(REMEMBER, ROWS)
        compactions = count_events(stack, pk, "COMPACTION")
        changes = count_events(stack, pk, "ANCHOR_CHANGED")
        calls = count_events(stack, pk, "MODEL_CALL")

        stack.resume("worker")
        # A new call too, for the folded curve to have a point it is not sent: a compaction
        # that only clears tool results and an anchor change can come before the next call.
        wait_for(lambda: count_events(stack, pk, "COMPACTION") > compactions
                 and count_events(stack, pk, "ANCHOR_CHANGED") > changes
                 and count_events(stack, pk, "MODEL_CALL") > calls,
                 "a new compaction, a new anchor change and a new model call")
        held_in_sync(page, stack, pk)

        # The lists the person opened are still open, and show the new rows.
        expect(changes_box).to_have_attribute("open", "")
        expect(older).to_have_attribute("open", "")
        newest = int(stack.scalar("SELECT max(seq) FROM runs_sessionevent WHERE session_id = ? "
                                  "AND type = 'ANCHOR_CHANGED'", pk))
        expect(changes_box.locator(f"li.change[data-seq='{newest}']")).to_have_count(1)
        rows = page.evaluate(COMPARE, ROWS)
        assert rows["rebuilt"] == [], f"rows rebuilt instead of kept: {rows}"
        assert rows["same"] > 0 and rows["added"] > 0, rows
        # Every earlier compaction is listed once, in order, newest first.
        numbers = page.eval_on_selector_all(
            "#compactions-older-list > li", "els => els.map(e => +e.id.split('-').pop())")
        total = count_events(stack, pk, "COMPACTION")
        assert numbers == list(range(total - 2, 0, -1))

        # The folded curve was not touched; unfolding brings it up to date.
        assert page.evaluate("window.foldedChanges") == 0, page.evaluate("window.foldedLog")
        page.click("#panel-curve > summary")
        expect(page.locator("#panel-curve-body svg.curve")).to_have_attribute(
            "data-calls", str(count_events(stack, pk, "MODEL_CALL")))
    finally:
        stack.resume("worker")
        cancel(page)


# A batch that arrives again (a resync raced a live delta, a reconnect replayed what the
# page had): the rows it appends are already shown.
REPLAY_NEWEST_ENTRY = """() => new Promise((done) => {
  const newest = document.querySelector('#transcript > article.ev');
  document.addEventListener('taskos:applied', () => done(newest.id), {once: true});
  document.dispatchEvent(new CustomEvent('htmx:wsBeforeMessage', {cancelable: true, detail: {
    message: '<div hx-swap-oob="afterbegin:#transcript">' + newest.outerHTML + '</div>'}}));
})"""


def test_a_row_appended_again_replaces_the_one_shown_instead_of_doubling_it(
        page: Page, stack: Stack) -> None:
    finished_session(page, stack)
    before = page.eval_on_selector_all("#transcript > article.ev", "els => els.map(e => e.id)")
    replayed = page.evaluate(REPLAY_NEWEST_ENTRY)
    after = page.eval_on_selector_all("#transcript > article.ev", "els => els.map(e => e.id)")
    assert replayed == before[0]
    assert after == before  # same rows, same order, none twice


# A burst bigger than a frame's budget (static/js/taskos.js: 20 KB of HTML): two 15 KB
# badges and the page's last seq in one message. What each frame showed is noted.
BURST = """() => new Promise((done) => {
  const frames = [];
  const big = (letter) => letter.repeat(15000);
  document.addEventListener('taskos:applied', function note(event) {
    frames.push({
      first: document.getElementById('panel-cost-badge').textContent.startsWith('AAA'),
      second: document.getElementById('panel-budget-badge').textContent.startsWith('BBB'),
      seq: event.detail.seq});
    if (event.detail.seq === 999999) {
      document.removeEventListener('taskos:applied', note);
      done(frames);
    }
  });
  document.dispatchEvent(new CustomEvent('htmx:wsBeforeMessage', {cancelable: true, detail: {
    message: '<span id="panel-cost-badge" class="badge" hx-swap-oob="true">' + big('A') + '</span>\\n'
      + '<span id="panel-budget-badge" class="badge" hx-swap-oob="true">' + big('B') + '</span>\\n'
      + '<input type="hidden" id="last-seq" value="999999" hx-swap-oob="true">'}}));
})"""


def test_a_burst_is_applied_over_several_frames_and_the_last_seq_moves_last(
        page: Page, stack: Stack) -> None:
    finished_session(page, stack)
    frames = page.evaluate(BURST)
    # One big fragment per frame, in the order sent; the last seq only with the last.
    assert (frames[0]["first"], frames[0]["second"]) == (True, False)
    assert frames[0]["seq"] != 999999
    assert frames[-1]["second"] and all(f["second"] for f in frames if f["seq"] == 999999)
