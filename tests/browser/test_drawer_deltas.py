"""The drawer streams deltas, not whole panels, and never drifts from the server's render.

In Chromium against a real worker, all panels open while long-1000 runs at a small window
(compactions, anchors, hints): after the first sync, no frame carries a panel body whole,
the frames average a bounded size per turn, and after those hundreds of patches every
panel on the page is what a fresh load of the page renders. The lists folded inside a
panel (retired anchors, the anchor change log) get no rows until opened, then catch up.
The session is held at known points by pausing the worker; nothing waits a fixed time.
"""
from __future__ import annotations

import re
from collections import Counter

import pytest
from playwright.sync_api import Page, expect

from .pages import record_websocket, wait_for_first_frame
from .stack import Stack, wait_for
from .test_drawer_live import cancel, count_events, last_seq, start_session

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]
expect.set_options(timeout=120_000)

# A retired anchor's row inserted into a list by a patch.
RETIRED_ROW_INSERTED = re.compile(r'<li hx-swap-oob="insert:[^"]*" id="anchor-\d+" class="anchor tier-\d inactive"')
WHOLE_BODY = re.compile(r'id="panel-([a-z]+)-body" class="panel-body" hx-swap-oob="true"')
# Each panel's body as the page shows it, in a form two renders can be compared in: the
# revisions live patches need and the person's open/closed <details> left out, and the
# detail of a compaction's line (a page rendered whole shows the newest's, a live page
# fetches one when its line is opened).
BODIES = """() => {
  const out = {};
  document.querySelectorAll('#drawer details.panel').forEach((panel) => {
    const body = panel.querySelector('.panel-body').cloneNode(true);
    body.querySelectorAll('[data-rev]').forEach((el) => el.removeAttribute('data-rev'));
    body.removeAttribute('data-rev');
    body.querySelectorAll('details').forEach((el) => el.removeAttribute('open'));
    body.querySelectorAll('li.compaction-brief > details').forEach((el) => {
      el.removeAttribute('data-loaded');
      el.querySelectorAll(':scope > :not(summary)').forEach((detail) => detail.remove());
    });
    out[panel.id] = body.outerHTML.replace(/>\\s+</g, '><').replace(/\\s+/g, ' ');
  });
  return out;
}"""


def test_frames_after_the_first_sync_are_deltas_and_the_panels_never_drift(
        page: Page, stack: Stack) -> None:
    frames, asked = record_websocket(page)  # asked: with how many frames the page had
    pk = start_session(page, stack, "long-1000", window=8000)
    try:
        # Folded panels were sent the first sync's fragments too and applied them: once
        # unfolded they hold their bodies, and nothing comes whole for them (as nothing
        # after the first sync does: checked below).
        first_sync = wait_for_first_frame(page, frames)
        page.evaluate("() => document.querySelectorAll('#drawer details.panel')"
                      ".forEach((d) => { d.open = true; })")
        expect(page.locator("#drawer details.panel:not([open])")).to_have_count(0)
        stack.resume("worker")
        wait_for(lambda: count_events(stack, pk, "COMPACTION") >= 3
                 and count_events(stack, pk, "MODEL_CALL") >= 60, "three compactions")
        stack.pause("worker")
        held = last_seq(stack, pk)
        expect(page.locator("#last-seq")).to_have_value(str(held))
        turns = int(stack.scalar("SELECT max(turn) FROM runs_sessionevent WHERE session_id = ?",
                                 pk))
        live = frames[first_sync:]
        assert live, "no live frames"
        # No panel is sent whole once the page holds it: only what changed in it. Nor does
        # the page ever ask for one whole because a patch did not fit what it shows (the
        # protocol's fallback, "stale"): every patch names an element as the page has it.
        requested = Counter(name.removeprefix("panel-")
                            for at, message in asked if at >= first_sync and message.get("stale")
                            for name in message.get("refresh") or ())
        assert requested == {}, f"patches that did not fit made the page ask for {dict(requested)}"
        whole = Counter(name for frame in live for name in WHOLE_BODY.findall(frame))
        assert whole == {}, f"panels sent whole after the first sync: {dict(whole)}"
        patches = sum(frame.count('hx-swap-oob="path:') + frame.count('hx-swap-oob="insert:')
                      + frame.count('hx-swap-oob="text:') for frame in live)
        assert patches > 0
        # The lists folded inside the anchors panel (retired anchors, the change log) were
        # sent none of their rows: a person sees them only once opened (below).
        change_rows = sum(frame.count('hx-swap-oob="afterbegin:#anchor-changes') for frame in live)
        retired_rows = sum(len(RETIRED_ROW_INSERTED.findall(frame)) for frame in live)
        assert (change_rows, retired_rows) == (0, 0), (change_rows, retired_rows)
        per_turn = sum(len(frame.encode()) for frame in live) / turns
        # At 8 000 nearly every turn compacts: each brings a compaction's line, the
        # inspector's messages anew and the anchors it retired (~16 KB a turn measured);
        # a panel re-sent whole on each update would be far past this.
        assert per_turn < 20_000, f"{per_turn:.0f} bytes a turn over {turns} turns"

        # Opened, those lists catch up: the anchors panel comes whole, merged in place.
        newest_change = stack.scalar("SELECT max(seq) FROM runs_sessionevent WHERE "
                                     "session_id = ? AND type = 'ANCHOR_CHANGED'", pk)
        page.evaluate("() => document.querySelectorAll('#drawer details[data-part]')"
                      ".forEach((d) => { d.open = true; })")
        expect(page.locator(f"#anchor-changes li.change[data-seq='{newest_change}']")).to_have_count(1)
        expect(page.locator("#drawer details[data-part]:not([open])")).to_have_count(0)

        # After all those patches, every panel is what the server renders afresh.
        shown = page.evaluate(BODIES)
        fresh = page.context.new_page()
        fresh.goto(stack.url(f"/sessions/{pk}/"))
        expect(fresh.locator("#last-seq")).to_have_value(str(held))
        rendered = fresh.evaluate(BODIES)
        fresh.close()
        assert shown.keys() == rendered.keys()
        for panel, html in rendered.items():
            at = next((i for i, (a, b) in enumerate(zip(shown[panel], html)) if a != b),
                      min(len(html), len(shown[panel])))
            assert shown[panel] == html, (f"{panel} drifted from the server's render at {at}: "
                                          f"{shown[panel][at - 80:at + 80]!r} != {html[at - 80:at + 80]!r}")
    finally:
        stack.resume("worker")
        cancel(page)
