"""The benchmark (SPEC E1): bundled scenarios run managed and unmanaged, side by side."""
from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path
from typing import Any, Callable

from agents.config import ContextConfig, ModelProfile
from agents.events import ListSink
from agents.memory_store import MemoryStore
from agents.runner import run_session
from agents.scenarios import load_scenario

# AgentScope's published figures for the 6 × 1600 retrieval workload (seed 000).
SEED_UNMANAGED = [144, 1652, 3160, 4668, 6176, 7684, 9192]
SEED_MANAGED_4000 = [144, 1652, 3160, 4936, 258, 1766, 3542, 258, 1766]
BENCH_SCENARIOS = [("retrieval-6x1600", 4000), ("sales-report", 128_000), ("long-200", 128_000)]
UNLIMITED_WINDOW = 100_000_000


class _NullSink:
    def emit(self, event) -> None:
        pass


def run_once(name: str, window: int, *, managed: bool) -> Any:
    scenario = load_scenario(name)
    config = ContextConfig() if managed else ContextConfig(max_rounds=10**9)
    profile = ModelProfile(name="sim", context_size=window if managed else UNLIMITED_WINDOW)
    with tempfile.TemporaryDirectory() as tmp:
        return run_session(session_id="bench", goal=scenario.goal, scenario=scenario,
                           profile=profile, config=config, store=MemoryStore(),
                           events=_NullSink() if not managed else ListSink(),
                           workspace=Path(tmp))


def bench_scenario(name: str, window: int) -> dict[str, Any]:
    managed = run_once(name, window, managed=True)
    unmanaged = run_once(name, window, managed=False)
    report = dict(managed.report)
    unmanaged_inputs = [c["input_tokens"] for c in unmanaged.report["model_calls"]]
    total = sum(unmanaged_inputs)
    report.update({
        "scenario": name, "window": window,
        "unmanaged_total_input_tokens": total,
        "unmanaged_peak_input_tokens": max(unmanaged_inputs, default=0),
        "unmanaged_first_overflow_call": next(
            (i + 1 for i, t in enumerate(unmanaged_inputs) if t > window), None),
        "reduction": round(1 - report["total_input_tokens"] / total, 4) if total else None,
        "input_sequence": [c["input_tokens"] for c in report["model_calls"]],
        "unmanaged_sequence": unmanaged_inputs,
    })
    ms = managed.engine_ms
    if len(ms) >= 8:  # cost per iteration early vs late: must not grow with the archive
        quarter = len(ms) // 4
        report["engine_ms_first_quarter"] = round(statistics.median(ms[:quarter]), 3)
        report["engine_ms_last_quarter"] = round(statistics.median(ms[-quarter:]), 3)
    return report


def run_bench(json_path: str | None = None, out: Callable[[str], None] = print,
              scenarios: list[tuple[str, int]] | None = None) -> dict[str, Any]:
    results = {name: bench_scenario(name, window) for name, window in scenarios or BENCH_SCENARIOS}
    out(format_table(results))
    if "retrieval-6x1600" in results:
        r = results["retrieval-6x1600"]
        out("retrieval-6x1600 input tokens per call (window 4000, trigger 0.8):")
        out(f"  TaskOS managed   : {r['input_sequence']}")
        out(f"  seed (AgentScope): {SEED_MANAGED_4000}")
        out(f"  TaskOS unmanaged : {r['unmanaged_sequence']}")
        out(f"  seed unmanaged   : {SEED_UNMANAGED}")
    for name, r in results.items():
        if "engine_ms_first_quarter" in r:
            out(f"{name}: engine ms per call, first quarter of the run "
                f"{r['engine_ms_first_quarter']} vs last quarter {r['engine_ms_last_quarter']} "
                "(flat = the cost of a turn does not grow with the archive)")
    if json_path:
        Path(json_path).write_text(json.dumps(results, indent=2, ensure_ascii=False))
        out(f"wrote {json_path}")
    return results


def format_table(results: dict[str, dict[str, Any]]) -> str:
    head = (f"{'scenario':<18}{'window':>9}{'calls':>7}{'total in':>11}{'unmanaged':>12}"
            f"{'reduct.':>9}{'peak':>8}{'over':>6}{'compact':>9}{'anchors':>9}{'eng ms':>8}")
    rows = [head, "-" * len(head)]
    for name, r in results.items():
        survival = "-" if r["anchor_survival"] is None else f"{r['anchor_survival']:.2f}"
        rows.append(
            f"{name:<18}{r['window']:>9}{len(r['model_calls']):>7}{r['total_input_tokens']:>11}"
            f"{r['unmanaged_total_input_tokens']:>12}{(r['reduction'] or 0) * 100:>8.1f}%"
            f"{r['peak_input_tokens']:>8}{r['over_window_requests']:>6}{r['compactions']:>9}"
            f"{survival:>9}{r['engine_ms_per_call'] or 0:>8.3f}")
    return "\n".join(rows)
