"""The dashboard and the drawer in Chromium, against a real worker, Redis and daphne.

Nothing here waits a fixed time: each step waits for a condition on the page or in the
database, and sessions are held at known points by pausing a process (see stack.py).
"""
from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from .stack import ROOT, Stack, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
expect.set_options(timeout=90_000)

TRANSCRIPT_TYPES = ("USER_MESSAGE", "ASSISTANT_MESSAGE", "TOOL_CALL", "TOOL_RESULT",
                    "COMPACTION", "ERROR", "SESSION_FINISHED")
# The README's picture is refreshed only on request, so test runs leave the tree clean.
README_SCREENSHOT = ROOT / "docs" / "drawer.png"

# Records every distinct state the budget bar and the curve showed, as a person would
# have seen them, from before the worker starts until the session ends.
WATCH = """() => {
  window.seen = {budget: [], calls: []};
  const note = () => {
    const budget = document.querySelector('#panel-budget-body .budget');
    const curve = document.querySelector('#panel-curve-body svg.curve');
    const b = budget && budget.dataset.turn + ':' + budget.dataset.inputTokens;
    if (b && window.seen.budget.at(-1) !== b) window.seen.budget.push(b);
    const c = curve && curve.dataset.calls;
    if (c && window.seen.calls.at(-1) !== c) window.seen.calls.push(c);
  };
  new MutationObserver(note).observe(document.body, {childList: true, subtree: true});
}"""


def start_session(page: Page, stack: Stack, scenario: str, window: int) -> int:
    """Submit the form with the worker paused; return once the page's socket is live."""
    stack.pause("worker")
    page.goto(stack.url("/sessions/new"))
    page.select_option("#id_scenario", scenario)
    page.fill("#id_window", str(window))
    page.click("button:has-text('Start')")
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    expect(page.locator("#ws-state")).to_have_text("live")
    expect(page.locator("#session-status .status")).to_have_text("queued")
    return int(page.url.rstrip("/").rsplit("/", 1)[1])


def without_clearing(stack: Stack, pk: int) -> None:
    """Turn the clearing tier (C20) off for a session still queued, the worker paused: the
    form does not offer it, and with it on a session's newest compaction may be a clear,
    which has no summary diff."""
    with sqlite3.connect(stack.db_path, timeout=30) as db:
        db.execute("UPDATE runs_session SET context_settings = json_set(context_settings, "
                   "'$.clear_tool_results', json('false')) WHERE id = ?", (pk,))


def count_events(stack: Stack, pk: int, *types: str) -> int:
    marks = ",".join("?" * len(types))
    return int(stack.scalar(f"SELECT count(*) FROM runs_sessionevent WHERE session_id = ? "
                            f"AND type IN ({marks})", pk, *types))


def cancel(page: Page) -> None:
    """Cancel from the session page and see the session stop."""
    page.click("form.cancel button")
    expect(page.locator("#flash")).to_contain_text("Cancel requested")
    expect(page.locator("#session-status .status")).to_have_text("cancelled")


def last_seq(stack: Stack, pk: int) -> int:
    return int(stack.scalar("SELECT max(seq) FROM runs_sessionevent WHERE session_id = ?", pk))


SHOWN_COMPACTIONS = 2 + 10  # taskos/drawer/panels/compactions.py: RECENT + LIVE_EARLIER


def assert_page_matches_database(page: Page, stack: Stack, pk: int) -> None:
    """What live updates built equals what the database holds: no gap, no duplicate.

    A page following a long run keeps only its newest transcript entries (at least a page
    of 60, static/js/taskos.js): those are the newest stored, newest first."""
    expect(page.locator("#last-seq")).to_have_value(str(last_seq(stack, pk)))
    shown = page.eval_on_selector_all("#transcript > article", "els => els.map(e => +e.id.slice(3))")
    marks = ",".join("?" * len(TRANSCRIPT_TYPES))
    stored = [seq for (seq,) in stack.query(
        f"SELECT seq FROM runs_sessionevent WHERE session_id = ? AND type IN ({marks}) "
        "ORDER BY seq DESC", pk, *TRANSCRIPT_TYPES)]
    assert len(shown) >= min(len(stored), 60)
    assert shown == stored[:len(shown)]
    calls = count_events(stack, pk, "MODEL_CALL")
    expect(page.locator("#panel-curve-body svg.curve")).to_have_attribute("data-calls", str(calls))
    # The newest compactions, each once, one line each: two in view and the newest ten of
    # the earlier ones (a running session's page drops the older ones, fetched when opened).
    compactions = count_events(stack, pk, "COMPACTION")
    rows = page.locator("#panel-compactions-body li.compaction-brief")
    expect(rows).to_have_count(min(compactions, SHOWN_COMPACTIONS))
    numbers = rows.evaluate_all("els => els.map(e => +e.id.split('-').pop())")
    assert numbers == list(range(compactions, compactions - len(numbers), -1))


def test_sales_report_streams_into_the_drawer(page: Page, stack: Stack, tmp_path: Path) -> None:
    screenshot = (README_SCREENSHOT if os.environ.get("TASKOS_UPDATE_SCREENSHOT") == "1"
                  else tmp_path / "drawer.png")
    pk = start_session(page, stack, "sales-report", window=6000)
    # Summaries only: the picture and the checks below are of a rewritten summary.
    without_clearing(stack, pk)
    expect(page.locator("#panel-budget-body")).to_contain_text("No budget yet")
    page.evaluate(WATCH)
    stack.resume("worker")
    # Held after its second model call (of 14), the run is shown part-way: the curve the
    # page draws then must be the one it redraws larger by the end.
    wait_for(lambda: count_events(stack, pk, "MODEL_CALL") >= 2, "the second model call")
    with stack.worker_held():
        assert stack.scalar("SELECT status FROM runs_session WHERE id = ?", pk) == "running"
        held_calls = count_events(stack, pk, "MODEL_CALL")
        expect(page.locator("#panel-curve-body svg.curve")).to_have_attribute(
            "data-calls", str(held_calls))

    # The README's picture: the drawer right after a compaction that rewrote the summary,
    # with a few calls of the sawtooth behind it, the session held there: the fourth (the
    # rolling one of turn 8; building the first snapshot at turn 0 is no compaction),
    # opened to its detail (a live page is sent the line, the detail is fetched).
    page.wait_for_function("""() => document.querySelectorAll(
      '#panel-compactions-body li.compaction-brief').length >= 4""", timeout=90_000)
    stack.pause("worker")
    newest = page.locator("#compactions-recent > li.compaction-brief").first
    if newest.locator("details[open]").count() == 0:
        newest.locator("summary").first.click()
    expect(newest.locator("table.zones")).to_be_visible()
    page.locator("#drawer").screenshot(path=str(screenshot))
    stack.resume("worker")
    expect(page.locator("#session-status .status")).to_have_text("finished")
    seen = page.evaluate("window.seen")
    assert len(seen["budget"]) >= 2, f"the budget bar never changed: {seen['budget']}"
    assert str(held_calls) in seen["calls"] and len(seen["calls"]) >= 2, \
        f"the curve never grew from {held_calls} calls: {seen['calls']}"

    row = page.locator("#compactions-recent > li.compaction-brief").first
    if row.locator("details[open]").count() == 0:
        row.locator("summary").first.click()  # its detail, fetched
    expect(row.locator(".diff .add").first).to_be_visible()
    expect(row.locator("table.zones")).to_contain_text("history")
    expect(page.locator("#panel-curve-body polygon.summary").first).to_be_attached()
    expect(page.locator("#panel-budget-body .seg.zone-history")).to_be_attached()
    assert_page_matches_database(page, stack, pk)
    assert screenshot.stat().st_size > 20_000


def test_admin_anchor_edit_reaches_the_next_call(page: Page, stack: Stack) -> None:
    # long-1000: the session must still be running when "Compact now" is pressed, however
    # slow the browser is next to the worker on a busy machine.
    pk = start_session(page, stack, "long-1000", window=8000)
    stack.resume("worker")
    expect(page.locator("#panel-anchors-body li.anchor").first).to_be_visible()
    with stack.worker_held():  # outside any transaction, so the admin can save
        status = stack.scalar("SELECT status FROM runs_session WHERE id = ?", pk)
        assert status == "running", "the session ended before it could be held"
        anchor_id, old_text = stack.query(
            "SELECT id, text FROM runs_anchor WHERE session_id = ? AND active ORDER BY tier, id",
            pk)[0]
        calls_before = count_events(stack, pk, "MODEL_CALL")
        admin = page.context.new_page()
        admin.goto(stack.url(f"/admin/runs/anchor/{anchor_id}/change/"))
        new_text = f"{old_text} (edited by an admin: report every figure in EUR)"
        admin.fill("#id_text", new_text)
        admin.click("input[name=_save]")
        expect(admin.locator(".messagelist")).to_contain_text("was changed successfully")
        admin.close()

    # Held once a call carried the edit, with the page caught up: a loaded machine's page
    # lagged dozens of turns behind the worker, and by then newer conclusions could have
    # retired the edited one (it failed once so, at turn 571).
    wait_for(lambda: stack.scalar(
        "SELECT count(*) FROM runs_sessionevent WHERE session_id = ? AND type = 'MODEL_CALL' "
        "AND payload LIKE '%report every figure in EUR%'", pk), "a call that carries the edit")
    stack.hold_worker()
    expect(page.locator("#last-seq")).to_have_value(str(last_seq(stack, pk)))
    expect(page.locator("#panel-anchors-body li.change[data-source=admin]").first).to_contain_text(
        "report every figure in EUR")
    inspector = page.locator("#panel-inspector-body .inspector")
    # The rows show their message's text once opened (and keep it current while open). A
    # row is its message's, not a place's: the edit may come in a row that arrives after
    # the others were opened (the snapshot's update), closed, so rows are opened as a
    # person would, as they come, until one shows the edit.
    page.wait_for_function("""(needle) => {
        const inspector = document.querySelector('#panel-inspector-body .inspector');
        inspector.querySelectorAll('li.msg > details[data-text]').forEach((row) => {
            row.open = true;
        });
        return inspector.textContent.includes(needle);
    }""", arg="report every figure in EUR", polling=250, timeout=60_000)
    assert int(inspector.get_attribute("data-call")) > calls_before
    if stack.scalar("SELECT count(*) FROM runs_anchor WHERE session_id = ? AND active "
                    "AND source = 'admin'", pk):
        expect(page.locator("#panel-anchors-body li.anchor .source-admin").first).to_be_visible()

    # "Compact now" with focus instructions runs at the start of the next turn (C13). Held,
    # so the session is still running when it is asked for (a loaded CI machine once took
    # longer to show the edit than the worker took to finish long-1000).
    with stack.worker_held():
        assert stack.scalar("SELECT status FROM runs_session WHERE id = ?", pk) == "running"
        page.fill("form.compact-now input[name=instructions]", "keep the EUR figures")
        page.click("form.compact-now button")
        expect(page.locator("#flash")).to_contain_text("Compaction requested")
    # At window 8 000 long-1000 compacts about every second turn, and only the two newest
    # compactions are shown in full: hold the session once the manual one is stored.
    wait_for(lambda: manual_compaction_seq(stack, pk) is not None, "the manual compaction")
    stack.pause("worker")
    try:
        expect(page.locator("#last-seq")).to_have_value(str(last_seq(stack, pk)))
        seq = manual_compaction_seq(stack, pk)
        newer = int(stack.scalar("SELECT count(*) FROM runs_sessionevent WHERE session_id = ? "
                                 "AND type = 'COMPACTION' AND seq > ?", pk, seq))
        manual = page.locator("#panel-compactions-body li.compaction-brief:has(.trigger-manual)")
        expect(manual).to_have_count(1)
        if newer < 2:  # in view: opened, it shows its detail (else among the earlier ones)
            manual.locator("summary").first.click()
            expect(manual).to_contain_text("Focus: keep the EUR figures")
    finally:
        stack.resume("worker")
    cancel(page)


def manual_compaction_seq(stack: Stack, pk: int) -> int | None:
    return stack.scalar("SELECT min(seq) FROM runs_sessionevent WHERE session_id = ? AND type = "
                        "'COMPACTION' AND payload LIKE '%\"trigger\": \"manual\"%'", pk)


def test_reload_and_reconnect_resync_the_drawer(page: Page, stack: Stack) -> None:
    pk = start_session(page, stack, "long-1000", window=8000)
    stack.resume("worker")
    curve = page.locator("#panel-curve-body svg.curve")
    expect(curve).to_have_attribute("data-calls", re.compile(r"^([3-9]|\d{2,})$"))

    page.reload()  # mid-run: the page renders from the database, then follows the stream
    expect(page.locator("#ws-state")).to_have_text("live")
    seq_after_reload = int(page.locator("#last-seq").input_value())
    expect(page.locator("#last-seq")).not_to_have_value(str(seq_after_reload))

    # A crash of the web server: the page misses whatever the worker stores meanwhile.
    stack.kill_web()
    expect(page.locator("#ws-state")).to_have_text("reconnecting…")
    held = int(page.locator("#last-seq").input_value())
    assert stack.scalar("SELECT status FROM runs_session WHERE id = ?", pk) == "running"
    wait_for(lambda: last_seq(stack, pk) > held, "the worker to store events the page lacks")
    with stack.worker_held():  # so the session cannot finish while daphne starts again
        stack.start_web()
        expect(page.locator("#ws-state")).to_have_text("live")
    cancel(page)
    assert_page_matches_database(page, stack, pk)


def pinned_in_a_call_after(stack: Stack, pk: int, seq: int, sentence: str) -> bool | None:
    """Whether the first agent call after event `seq` lists `sentence` as in force in its
    task snapshot, as the audit reads the list (None while there is no such call yet)."""
    import json

    from agents.compaction.words_check import flat, listed_in_force
    for (payload,) in stack.query("SELECT payload FROM runs_sessionevent WHERE session_id = ? "
                                  "AND type = 'MODEL_CALL' AND seq > ? ORDER BY seq", pk, seq):
        data = json.loads(payload)
        if data.get("kind") != "agent":
            continue
        snapshot = next((m.get("content") or "" for m in data.get("messages", [])
                         if str(m.get("content") or "").startswith("<task-snapshot>")), "")
        return flat(sentence) in listed_in_force(snapshot)
    return None


def pin_event_seq(stack: Stack, pk: int, action: str) -> int | None:
    return stack.scalar("SELECT max(seq) FROM runs_sessionevent WHERE session_id = ? AND type = "
                        "'ANCHOR_CHANGED' AND payload LIKE '%\"source\": \"pin\"%' AND payload "
                        "LIKE ?", pk, f'%"action": "{action}"%')


# The newest message text on the page (user or assistant), its first sentence selected; the
# selected text is returned. Not the goal: the live transcript keeps only its newest 60–80
# entries, so by the time the test holds the session the goal may have left the page.
SELECT_FIRST_SENTENCE = """transcript => {
  const el = [...transcript.querySelectorAll('article .text')].find(
    t => t.firstChild && t.firstChild.nodeType === Node.TEXT_NODE && t.firstChild.textContent.trim());
  if (!el) return null;
  const node = el.firstChild, text = node.textContent, stop = text.indexOf('. ');
  const range = document.createRange();
  range.setStart(node, 0);
  range.setEnd(node, stop > 0 ? stop + 1 : Math.min(text.length, 200));
  getSelection().removeAllRanges();
  getSelection().addRange(range);
  return getSelection().toString();
}"""


def test_a_sentence_pinned_in_the_drawer_reaches_the_next_call_and_unpins(
        page: Page, stack: Stack) -> None:
    pk = start_session(page, stack, "long-1000", window=8000)
    stack.resume("worker")
    expect(page.locator("#panel-anchors-body li.anchor").first).to_be_visible()
    expect(page.locator("#transcript article .text").first).to_be_visible()
    with stack.worker_held():
        assert stack.scalar("SELECT status FROM runs_session WHERE id = ?", pk) == "running"
        selected = page.locator("#transcript").evaluate(SELECT_FIRST_SENTENCE)
        assert selected, "no message text left on the page to select (held too late?)"
        page.locator("#transcript").dispatch_event("mouseup")  # copied into the pin form
        sentence = page.input_value("form.pin-sentence input[name=text]")
        assert sentence and sentence == " ".join(selected.split())
        page.click("form.pin-sentence button")
        expect(page.locator("#flash")).to_contain_text("Pinned as a hard constraint")
    wait_for(lambda: pin_event_seq(stack, pk, "added") is not None, "the engine to sync the pin")
    added = pin_event_seq(stack, pk, "added")
    wait_for(lambda: pinned_in_a_call_after(stack, pk, added, sentence) is not None,
             "a model call after the pin")
    assert pinned_in_a_call_after(stack, pk, added, sentence)
    pin_row = page.locator("#panel-anchors-body li.anchor:has(.source-pin)").first
    expect(pin_row).to_contain_text(sentence)

    with stack.worker_held():
        assert stack.scalar("SELECT status FROM runs_session WHERE id = ?", pk) == "running"
        pin_row.locator("button.unpin").click()
        expect(page.locator("#flash")).to_contain_text("Unpinned")
    wait_for(lambda: pin_event_seq(stack, pk, "removed") is not None, "the engine to drop the pin")
    removed = pin_event_seq(stack, pk, "removed")
    wait_for(lambda: pinned_in_a_call_after(stack, pk, removed, sentence) is not None,
             "a model call after the unpin")
    assert pinned_in_a_call_after(stack, pk, removed, sentence) is False
    assert stack.scalar("SELECT active FROM runs_anchor WHERE session_id = ? AND source = 'pin'",
                        pk) == 0  # kept, inactive
    cancel(page)
