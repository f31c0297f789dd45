"""How the drawer holds up on a long run, in Debian's Chromium (issue 12's targets).

Starts a private stack (Redis, a Celery worker, daphne, SQLite: tests/browser/stack.py),
runs a scenario from the start form with the session page open and prints:

- the longest main-thread task while the session ran (PerformanceObserver "longtask"),
  and the long animation frames split into script and the rendering after it;
  and the total blocked time (each long task's time past 50 ms) as a share of the run;
- how long applying one frame's websocket updates took (the page's own measure);
- panel toggles (click on a panel's summary until the next frame is painted): p99, max;
- the bytes the websocket brought over the whole run, by the element each fragment
  targets (which panels cost what), and the frames; and the bytes it took on the wire
  (compressed when the server accepted permessage-deflate), counted by a relay the
  browser reaches the server through;
- the most the page's last seq fell behind the database, in seconds;
- the finished page's load time (navigation timing, cold: a new browser context) and its
  HTML size, as sent (compressed) and decoded.

    .venv/bin/python scripts/drawer_bench.py [--scenario long-1000] [--window 128000]

Numbers, not pass/fail: tests stay free of timing thresholds (see tests/browser).
"""
from __future__ import annotations

import argparse
import json
import re
import signal
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from scripts.trace_summary import summarize, summarize_profile  # noqa: E402
from tests.browser.pages import signed_in_page  # noqa: E402
from tests.browser.stack import Stack, free_port  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
OBSERVE = """() => {
  window.__longtasks = [];
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) window.__longtasks.push(entry.duration);
  }).observe({type: "longtask", buffered: true});
  // The long frames split into their script and the rendering after it (style, layout,
  // paint): a long task made of rendering is cut by touching fewer elements, not by
  // spreading the script over more frames.
  window.__longframes = [];
  if (PerformanceObserver.supportedEntryTypes.includes("long-animation-frame")) {
    new PerformanceObserver((list) => {
      for (const frame of list.getEntries()) {
        const script = frame.scripts.reduce((sum, s) => sum + s.duration, 0);
        const render = frame.renderStart ? frame.startTime + frame.duration - frame.renderStart : 0;
        window.__longframes.push({duration: frame.duration, script: script, render: render});
      }
    }).observe({type: "long-animation-frame", buffered: true});
  }
}"""
TOGGLE = """async (id) => {
  const summary = document.querySelector('#' + id + ' > summary');
  const start = performance.now();
  summary.click();
  await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
  return performance.now() - start;
}"""
# Elements on the page and where they are: what the browser lays out again on each frame.
COUNT_ELEMENTS = """() => {
  const count = (el) => el ? el.getElementsByTagName('*').length : 0;
  const found = {page: document.getElementsByTagName('*').length,
                 transcript: count(document.getElementById('transcript'))};
  document.querySelectorAll('#drawer details.panel').forEach((panel) => {
    found[panel.id.replace(/^panel-/, '')] = count(panel);
  });
  return found;
}"""
# A fragment's target: the id of an element sent whole, or the #id it is added to.
TARGET = re.compile(r'^\s*<[a-z][a-z0-9]* [^>]*?(?:hx-swap-oob="[a-z]+:#?([^"@]+)|'
                    r'\bid="([^"]+)"[^>]*hx-swap-oob="[^"]*")')
FRAGMENT_START = re.compile(r"\n(?=<[a-z][a-z0-9]* [^>]*hx-swap-oob=)")
TRACED = ["devtools.timeline", "disabled-by-default-devtools.timeline"]
TOGGLED_PANELS = ("panel-inspector", "panel-curve", "panel-compactions", "panel-cost")


def target_group(target: str) -> str:
    """Rows of one kind under one name ("inspector-N" for the inspector's messages,
    "compaction-N"): a line per kind, not per row."""
    if target.startswith("inspector-msg-"):
        return "inspector-N"
    return re.sub(r"-(?:\d+|[a-z]+-\d+)$", "-N", target)


class CountingRelay:
    """A TCP relay in front of the web server that counts what the server sends on
    websocket connections, as it goes over the wire: Chromium's websocket events give the
    messages decompressed, so they cannot tell what permessage-deflate saved."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self.websocket_bytes = 0
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            server = socket.create_connection(("127.0.0.1", self.target_port))
            state = {"websocket": False}
            threading.Thread(target=self.pipe, args=(client, server, state, False),
                             daemon=True).start()
            threading.Thread(target=self.pipe, args=(server, client, state, True),
                             daemon=True).start()

    def pipe(self, source: socket.socket, sink: socket.socket, state: dict,
             from_server: bool) -> None:
        first = True
        try:
            while chunk := source.recv(65536):
                if first and not from_server:
                    state["websocket"] = b"upgrade: websocket" in chunk[:4096].lower()
                first = False
                if from_server and state["websocket"]:
                    with self.lock:
                        self.websocket_bytes += len(chunk)
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.listener.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="long-1000")
    parser.add_argument("--window", type=int, default=None)
    parser.add_argument("--save-html", type=Path, default=None,
                        help="write the finished session page here")
    parser.add_argument("--save-frames", type=Path, default=None,
                        help="write the websocket's messages here (a JSON list, in order)")
    parser.add_argument("--trace", type=Path, default=None,
                        help="record a Chromium trace of the run here and print which work "
                             "filled the long tasks (scripts/trace_summary.py)")
    options = parser.parse_args()
    stack = Stack(Path(tempfile.mkdtemp(prefix="drawer-bench-")))
    # The stack's processes run in their own sessions: a bench stopped by `timeout` or
    # `kill` must still take them down, so SIGTERM unwinds through the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    stack.start()
    # The browser reaches daphne through the relay: every URL the bench opens names it.
    relay = CountingRelay(stack.web_port)
    stack.web_port = relay.port
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = signed_in_page(browser.new_context(viewport={"width": 1500, "height": 1000}),
                                  stack, timeout_ms=120_000)
            profiler, profile = None, {}
            if options.trace:
                browser.start_tracing(page=page, path=str(options.trace), categories=TRACED)
                profiler = page.context.new_cdp_session(page)
                profiler.send("Profiler.enable")
                profiler.send("Profiler.start")

            def stop_trace() -> None:
                profile.update(profiler.send("Profiler.stop")["profile"])
                browser.stop_tracing()

            print(run(page, stack, relay, options.scenario, options.window, options.save_html,
                      stop_trace=stop_trace if options.trace else None,
                      save_frames=options.save_frames))
            if options.trace:
                print(summarize(json.loads(options.trace.read_text())))
                print(summarize_profile(profile))
            browser.close()
    finally:
        relay.close()
        stack.stop()


def run(page, stack: Stack, relay: CountingRelay, scenario: str, window: int | None, save_html: Path | None,
        stop_trace=None, save_frames: Path | None = None) -> str:
    stack.pause("worker")  # the page is watching before the first event
    # Every frame the session page's websocket brings, its first sync included.
    frames: list[str] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda data: frames.append(
        data if isinstance(data, str) else data.decode("utf-8", "replace"))))
    page.goto(stack.url("/sessions/new"))
    page.select_option("#id_scenario", scenario)
    if window:
        page.fill("#id_window", str(window))
    page.click("button:has-text('Start')")
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    pk = int(page.url.rstrip("/").rsplit("/", 1)[1])
    page.wait_for_function("document.getElementById('ws-state').textContent === 'live'")
    page.evaluate(OBSERVE)
    started = time.monotonic()
    stack.resume("worker")

    first_seen: dict[int, float] = {}  # db seq -> when the poll first saw it
    worst_lag, toggles, samples = 0.0, [], 0
    most_elements: dict[str, int] = {}
    while True:
        now = time.monotonic()
        db_seq = int(stack.scalar("SELECT coalesce(max(seq), 0) FROM runs_sessionevent "
                                  "WHERE session_id = ?", pk))
        first_seen.setdefault(db_seq, now)
        page_seq = int(page.evaluate("Number(document.getElementById('last-seq').value)"))
        behind = [t for seq, t in first_seen.items() if seq > page_seq]
        if behind:
            worst_lag = max(worst_lag, now - min(behind))
        samples += 1
        if samples % 4 == 0:  # every ~2 s fold or unfold a panel
            panel = TOGGLED_PANELS[(samples // 4) % len(TOGGLED_PANELS)]
            toggles.append(page.evaluate(TOGGLE, panel))
            for where, n in page.evaluate(COUNT_ELEMENTS).items():
                most_elements[where] = max(most_elements.get(where, 0), n)
        status = stack.scalar("SELECT status FROM runs_session WHERE id = ?", pk)
        if status in ("finished", "failed", "unusable_answer", "cancelled") and page_seq >= db_seq:
            break
        time.sleep(0.5)
    run_s = time.monotonic() - started
    wire_bytes = relay.websocket_bytes  # before the cold reload below opens its own socket
    if stop_trace is not None:
        stop_trace()  # the run only, not the reload of the finished page
    longtasks = page.evaluate("window.__longtasks")
    longframes = sorted(page.evaluate("window.__longframes"), key=lambda f: -f["duration"])
    flushes = page.evaluate("performance.getEntriesByName('taskos-flush').map(e => e.duration)")
    turns = stack.scalar("SELECT turns FROM runs_session WHERE id = ?", pk)

    # Cold: a fresh context (no cache), signed in with the same cookies. Loaded three times:
    # the first while the tab that followed the run is still open (as a person who opens
    # the finished session in a new tab), then twice after that tab closed; each load is
    # split into the server's answer (request to first byte), the download and the work
    # in the browser up to the load event.
    cookies = page.context.cookies()
    colds = []
    for attempt in range(3):
        if attempt == 1:
            page.close()
        cold = page.context.browser.new_context(viewport={"width": 1500, "height": 1000})
        cold.add_cookies(cookies)
        cold_page = cold.new_page()
        response = cold_page.goto(stack.url(f"/sessions/{pk}/"))
        html_bytes = len(response.body())
        if save_html is not None:
            save_html.write_bytes(response.body())
        colds.append(cold_page.evaluate("""() => {
            const n = performance.getEntriesByType('navigation')[0];
            return {load: n.loadEventEnd - n.startTime, server: n.responseStart - n.requestStart,
                    download: n.responseEnd - n.responseStart,
                    browser: n.loadEventEnd - n.responseEnd, transferred: n.encodedBodySize,
                    encoding: n.encodedBodySize < n.decodedBodySize ? 'compressed'
                                                                    : 'uncompressed'}; }"""))
        cold.close()
    sent = colds[0]
    if save_frames is not None:
        save_frames.write_text(json.dumps(frames, ensure_ascii=False))
    blocked = sum(max(0.0, task - 50) for task in longtasks) / 1000
    toggles.sort()
    by_target: dict[str, int] = {}
    for frame in frames:
        for part in FRAGMENT_START.split(frame):
            found = TARGET.match(part)
            target = (found.group(1) or found.group(2)) if found else "other"
            target = target_group(target)
            by_target[target] = by_target.get(target, 0) + len(part.encode())
    ws_bytes = sum(len(frame.encode()) for frame in frames)
    return "\n".join([
        f"scenario {scenario}: status {status}, {turns} turns, {db_seq} events, run {run_s:.1f} s",
        f"longest main-thread task: {max(longtasks, default=0):.0f} ms "
        f"({len(longtasks)} long tasks, {sum(longtasks) / 1000:.1f} s in them; total blocked "
        f"time {blocked:.1f} s = {100 * blocked / run_s:.1f} % of the run)",
        f"long animation frames: {len(longframes)} (> 50 ms); the longest five, script + "
        "rendering after it: " + ", ".join(
            f"{f['duration']:.0f} = {f['script']:.0f} + {f['render']:.0f} ms" for f in longframes[:5]),
        f"websocket: {ws_bytes / 1e6:.2f} MB in {len(frames)} frames (largest "
        f"{max((len(f) for f in frames), default=0) / 1000:.0f} KB; after the first, "
        f"{sum(len(f.encode()) for f in frames[1:]) / max(1, turns):.0f} bytes a turn)",
        f"websocket on the wire: {wire_bytes / 1e6:.2f} MB (the messages above as the server "
        f"sent them, with frame headers; {100 * wire_bytes / max(1, ws_bytes):.0f} % of them)",
        "websocket bytes by target: " + ", ".join(
            f"{target} {n / 1000:.0f} KB" for target, n in
            sorted(by_target.items(), key=lambda i: -i[1])[:12]),
        f"applying one frame's updates: max {max(flushes, default=0):.0f} ms, median "
        f"{sorted(flushes)[len(flushes) // 2] if flushes else 0:.0f} ms over {len(flushes)} frames",
        f"panel toggle: p99 {percentile(toggles, 0.99):.0f} ms, max {max(toggles, default=0):.0f} ms, "
        f"median {percentile(toggles, 0.5):.0f} ms over {len(toggles)} toggles",
        "most elements during the run: " + ", ".join(
            f"{where} {n}" for where, n in sorted(most_elements.items(), key=lambda i: -i[1])),
        f"drawer behind the database: at most {worst_lag:.2f} s (polled every 0.5 s)",
        f"finished page (cold): load {sent['load']:.0f} ms, HTML {sent['transferred'] / 1024:.0f} KB "
        f"transferred ({sent['encoding']}), {html_bytes / 1024:.0f} KB decoded",
        "finished page (cold), load = server + download + browser: " + "; ".join(
            f"{c['load']:.0f} = {c['server']:.0f} + {c['download']:.0f} + {c['browser']:.0f} ms"
            + (" (following tab open)" if i == 0 else " (following tab closed)")
            for i, c in enumerate(colds)),
    ])


def percentile(values: list[float], share: float) -> float:
    """The value `share` of `values` (sorted) are at or below (nearest rank)."""
    if not values:
        return 0.0
    return values[min(len(values) - 1, max(0, int(share * len(values) + 0.999999) - 1))]


if __name__ == "__main__":
    main()
