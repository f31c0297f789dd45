"""Record a scenario, replay it at several settings, and photograph the comparison view (E2).

    .venv/bin/python scripts/compare_screenshot.py                 # long-200, three replays
    .venv/bin/python scripts/compare_screenshot.py --scenario sales-report --window 16000 \
        --replay "window=8000" --out /tmp/compare.png

Runs a private TaskOS (its own SQLite file, Redis, worker and daphne: the browser tests'
stack) in a temporary folder. The recorded session comes from `manage.py runtask`, each
replay from `manage.py replay … --json` (simulated summaries: free), then Chromium signs in
and saves the comparison page at desktop width. It prints one table row per run (the
figures of the note) and the page's widths at 390 px, where nothing may scroll sideways.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser.pages import signed_in_page  # noqa: E402 - after the path
from tests.browser.stack import USERNAME, Stack  # noqa: E402

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
DEFAULT_REPLAYS = ["trigger_ratio=0.6", "window=32000", "max_rounds=10"]
COLUMNS = ("total_input_tokens", "cached_share", "summary_calls", "compactions",
           "peak_input_tokens", "over_window_requests", "anchor_survival", "audit_failures")


def manage_json(stack: Stack, *args: str) -> dict:
    """Run a manage.py command of the stack that prints one JSON object; return it."""
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=stack.env,
                          check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def python_in_stack(stack: Stack, code: str) -> str:
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT,
                          env=stack.env, check=True, capture_output=True, text=True)
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def row(label: str, report: dict) -> str:
    cells = [label] + [str(report.get(k)) for k in COLUMNS]
    first = report.get("first_difference")
    cells.append("–" if first is None else f"turn {first['turn']} (call {first['source_call']})")
    return " | ".join(cells)


def photograph(stack: Stack, source: int, out: Path, chromium: str) -> dict:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            widths = {}
            for name, viewport in (("desktop", {"width": 1400, "height": 900}),
                                   ("phone", {"width": 390, "height": 844})):
                context = browser.new_context(viewport=viewport, device_scale_factor=1)
                page = signed_in_page(context, stack)
                page.goto(stack.url(f"/sessions/{source}/compare"))
                page.wait_for_selector("svg.curve.overlay polyline")
                widths[name] = page.evaluate(
                    "[document.documentElement.scrollWidth, window.innerWidth]")
                if name == "desktop":
                    page.locator("section.card.compare").screenshot(path=str(out))
                context.close()
            return widths
        finally:
            browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", default="long-200")
    parser.add_argument("--window", type=int, default=128_000)
    parser.add_argument("--replay", action="append", default=None, metavar="K=V[,K=V]",
                        help="one replay's settings, comma-separated (repeatable)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "compare-long-200.png")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    replays = args.replay or DEFAULT_REPLAYS
    with tempfile.TemporaryDirectory(prefix="taskos-compare-") as folder:
        stack = Stack(Path(folder))
        try:
            stack.start()
            recorded = manage_json(stack, "runtask", "--scenario", args.scenario,
                                   "--window", str(args.window), "--json")
            source = int(python_in_stack(stack, (
                "from taskos.runs.models import Session; "
                "print(Session.objects.filter(replay_of=None, parent=None).latest('id').pk)")))
            print(" | ".join(("run",) + COLUMNS + ("first differing turn",)))
            print(row(f"#{source} recorded", {**recorded, "cached_share": round(
                recorded["cached_input_tokens"] / max(1, recorded["total_input_tokens"]), 4)}))
            for settings in replays:
                pairs = [p for pair in settings.split(",") for p in ("--set", pair.strip())]
                report = manage_json(stack, "replay", str(source), *pairs, "--json")
                print(row(settings, report), flush=True)
            # Sessions made on the command line have no owner; the page shows its owner's.
            python_in_stack(stack, (
                "from django.contrib.auth.models import User; "
                "from taskos.runs.models import Session; "
                f"Session.objects.update(owner=User.objects.get(username={USERNAME!r}))"))
            widths = photograph(stack, source, args.out, args.chromium)
        except Exception:
            print(stack.logs(), file=sys.stderr)
            raise
        finally:
            stack.stop()
    print(f"saved {args.out}")
    for name, (scroll, inner) in widths.items():
        print(f"{name}: scrollWidth {scroll} px, innerWidth {inner} px"
              f"{'' if scroll <= inner else '  OVERFLOWS'}")
    return 0 if widths["phone"][0] <= widths["phone"][1] else 1


if __name__ == "__main__":
    sys.exit(main())
