"""Peak memory of the CSV and SQL tools on inputs at their caps (issue 25 item 6).

Each figure comes from a fresh process: the peak resident size the call added over what the
imports took and its CPU time (ru_maxrss and process time, in a run without tracemalloc,
which slows the call several times), the tracemalloc peak of the call (in a second run), and
the size of the archived result. The tool's timeout is lifted so a slow call is measured to
its end rather than abandoned (the registry gives up on a tool after 20 s).
Figures, not a test: the tests bound tracemalloc peaks on small inputs instead.

    .venv/bin/python scripts/bench_tool_bounds.py [csv megabytes, default 49]
"""
from __future__ import annotations

import json
import random
import subprocess
import sys
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WIDE_SQL = "SELECT " + ", ".join(f"printf('%.*c', 99000, 'x') AS c{i}" for i in range(200))

CHILD = r"""
import json, resource, sys, time, tracemalloc
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from agents.events import ListSink
from agents.store.memory import MemoryStore
from agents.tools.base import ToolContext
from agents.tools.registry import default_registry
registry, store = default_registry(), MemoryStore()
registry.get(sys.argv[3]).timeout_s = 3600.0
ctx = ToolContext(session_id="b", store=store, workspace=Path(sys.argv[2]), events=ListSink())
traced = sys.argv[5] == "traced"
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if traced:
    tracemalloc.start()
started = time.process_time()
outcome = registry.run(sys.argv[3], sys.argv[4], ctx)
cpu = time.process_time() - started
peak = tracemalloc.get_traced_memory()[1] if traced else 0
tracemalloc.stop()
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
archived = len(store.read_ref("b", outcome.ref)) if outcome.ref else len(outcome.content)
print(json.dumps({"rss_mb": (after - before) / 1024, "traced_mb": peak / 2**20, "cpu_s": cpu,
                  "archived_bytes": archived, "error": outcome.error,
                  "first_line": outcome.content.split("\n", 1)[0][:120]}))
"""


def write_csv(path: Path, megabytes: float) -> int:
    """A sales-like CSV of about `megabytes`: numbers, a few categories, unique ids, gaps."""
    rng = random.Random(25)
    regions = ("North", "South", "East", "West", "Central")
    rows = 0
    with path.open("w", encoding="utf-8", newline="") as handle:
        handle.write("order_id,region,product,quarter,revenue,units,cost,note\n")
        size, limit = 0, int(megabytes * 1_000_000)
        while size < limit:
            rows += 1
            revenue = "" if rows % 97 == 0 else f"{rng.uniform(10, 5000):.2f}"
            line = (f"ORD-{rows:08d},{rng.choice(regions)},P{rng.randrange(400)},"
                    f"Q{rng.randrange(1, 5)},{revenue},{rng.randrange(1, 90)},"
                    f"{rng.uniform(5, 3000):.2f},ref {rng.randrange(10**9)}\n")
            handle.write(line)
            size += len(line)
    return rows


def measure(workspace: Path, tool: str, args: dict) -> dict:
    figures = {}
    for mode in ("plain", "traced"):
        out = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), str(workspace), tool,
                              json.dumps(args), mode], check=True, capture_output=True, text=True)
        run = json.loads(out.stdout.strip().splitlines()[-1])
        # CPU time from the plain run: tracemalloc slows the call several times
        figures.update(run if mode == "plain" else {"traced_mb": run["traced_mb"]})
    return figures


def main(megabytes: float = 49.0) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        rows = write_csv(workspace / "big.csv", megabytes)
        size = (workspace / "big.csv").stat().st_size
        print(f"big.csv: {size / 1e6:.1f} MB, {rows} rows, 8 columns")
        with closing(sqlite3.connect(workspace / "session.sqlite3")) as db:
            db.execute("CREATE TABLE IF NOT EXISTS empty (x)")  # sql_query needs a database
        for tool, args in (("csv_describe", {"path": "big.csv"}),
                           ("csv_load", {"path": "big.csv"}),
                           ("sql_query", {"sql": WIDE_SQL})):
            figures = measure(workspace, tool, args)
            print(f"{tool:13} peak RSS +{figures['rss_mb']:7.1f} MB, traced peak "
                  f"{figures['traced_mb']:7.1f} MB, CPU {figures['cpu_s']:5.1f} s, archived "
                  f"{figures['archived_bytes']:>10,} bytes; "
                  f"{figures['error'] or figures['first_line']}")


if __name__ == "__main__":
    main(*(float(arg) for arg in sys.argv[1:2]))
