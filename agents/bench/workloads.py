"""The benchmark (feature E1): bundled scenarios run managed and unmanaged, side by side."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, Callable

from agents.config import ContextConfig, ModelProfile
from agents.counting.pricing import PRICE_TABLES
from agents.loop.spec import SessionSpec
from agents.runner import run_session
from agents.scenarios import load_scenario
from agents.store.memory import MemoryStore

# AgentScope's published figures for the 6 × 1600 retrieval workload (seed 000).
SEED_UNMANAGED = [144, 1652, 3160, 4668, 6176, 7684, 9192]
SEED_MANAGED_4000 = [144, 1652, 3160, 4936, 258, 1766, 3542, 258, 1766]
BENCH_SCENARIOS = [("retrieval-6x1600", 4000), ("sales-report", 128_000), ("long-200", 128_000),
                   ("long-1000", 128_000)]
# Unmanaged, long-1000 would send ~800M tokens: only its engine cost is measured.
MANAGED_ONLY = {"long-1000"}
STRICT = "anthropic-strict"  # anthropic-like prices, strict cache rule (agents/sim/cache.py)
UNLIMITED_WINDOW = 100_000_000


class _NullSink:
    def emit(self, event) -> None:
        pass


def run_once(name: str, window: int, *, managed: bool, summarizer: str | None = None) -> Any:
    """One run; unmanaged is the same agent with an append-only history, no snapshot, no
    hints and no compaction (a window nothing reaches), like a naive peer. `summarizer`:
    the simulated model's summary mode (faithful by default; lossy and hostile drop and
    invent facts, agents/sim/summarizer.py)."""
    scenario = load_scenario(name)
    config = ContextConfig(max_turns=max(ContextConfig().max_turns, len(scenario.model_steps)))
    # Both runs mark their cache breakpoints, each as it would (agents/loop/cache_marks.py),
    # so the Anthropic-like tables bill them like for like.
    profile = ModelProfile(name="sim", context_size=window if managed else UNLIMITED_WINDOW,
                           cache_marks=True)
    with tempfile.TemporaryDirectory() as tmp:
        spec = SessionSpec.plan(goal=scenario.goal, scenario=scenario, profile=profile,
                                config=config, unmanaged=not managed, summarizer=summarizer)
        return run_session(spec, session_id="bench", store=MemoryStore(), events=_NullSink(),
                           workspace=Path(tmp))


def engine_tenths(run: Any) -> dict[str, float]:
    """Engine ms per model call in the first and the last tenth of the turns: flat or not."""
    ms, calls = run.engine_ms, run.engine_calls
    if len(ms) < 20:
        return {}
    tenth = len(ms) // 10

    def per_call(part_ms, part_calls):
        return round(sum(part_ms) / max(1, sum(part_calls)), 3)

    first, last = per_call(ms[:tenth], calls[:tenth]), per_call(ms[-tenth:], calls[-tenth:])
    return {"engine_ms_per_call_first_tenth": first, "engine_ms_per_call_last_tenth": last,
            "engine_tenth_ratio": round(last / first, 3) if first else None}


def engine_split(ms: list[float], calls: list[int], compacted: list[bool]) -> dict[str, Any]:
    """One clock's engine time: per model call, per plain turn and per compaction turn, and
    the plain turns' last tenth against their first (flat = a turn does not cost more as
    the session grows; compaction turns are left out, they come in bursts, and so are the
    first and the last turn, which start the session and vet its answer once)."""
    plain = [m for m, c in zip(ms, compacted) if not c]
    folds = [m for m, c in zip(ms, compacted) if c]
    rounds = [m for i, (m, c) in enumerate(zip(ms, compacted)) if not c and 0 < i < len(ms) - 1]

    def mean(part):
        return round(sum(part) / len(part), 3) if part else None

    out = {"per_call": round(sum(ms) / sum(calls), 3) if sum(calls) else None,
           "per_plain_turn": mean(plain), "per_compaction_turn": mean(folds),
           "compaction_turn_max": round(max(folds), 3) if folds else None,
           "compaction_turns": len(folds), "compaction_share": round(sum(folds) / sum(ms), 3)
           if sum(ms) else None}
    if len(rounds) >= 20:
        tenth = len(rounds) // 10
        first, last = mean(rounds[:tenth]), mean(rounds[-tenth:])
        out.update({"plain_first_tenth": first, "plain_last_tenth": last,
                    "plain_tenth_ratio": round(last / first, 3) if first else None})
    return out


def engine_figures(run: Any) -> dict[str, Any]:
    """The engine's own time in CPU time of the loop's thread (steady on a busy machine)
    and in wall time, model and tools excluded."""
    return {"engine_cpu": engine_split(run.engine_cpu_ms, run.engine_calls, run.compacted),
            "engine_wall": engine_split(run.engine_ms, run.engine_calls, run.compacted)}


def format_engine(name: str, r: Any) -> list[str]:
    """A scenario's engine figures in two lines, CPU time first (`r` may be any entry of
    the results, the list of targets too)."""
    lines = []
    for clock in ("cpu", "wall"):
        e = r.get(f"engine_{clock}") if isinstance(r, dict) else None
        if not e:
            continue
        flat = (f" (first tenth {e['plain_first_tenth']}, last {e['plain_last_tenth']}: "
                f"{e['plain_tenth_ratio']}x)" if "plain_tenth_ratio" in e else "")
        lines.append(f"{name}: engine {clock} ms per call {e['per_call']}, per plain turn "
                     f"{e['per_plain_turn']}{flat}, per compaction turn "
                     f"{e['per_compaction_turn']} (max {e['compaction_turn_max']}, "
                     f"{e['compaction_turns']} turns, {e['compaction_share']} of the total)")
    return lines


def bench_scenario(name: str, window: int, *, with_unmanaged: bool = True,
                   summarizer: str | None = None) -> dict[str, Any]:
    managed = run_once(name, window, managed=True, summarizer=summarizer)
    report = dict(managed.report)
    report.update({"scenario": name, "window": window,
                   "input_sequence": [c["input_tokens"] for c in report["model_calls"]]})
    report.update(engine_tenths(managed))
    report.update(engine_figures(managed))
    report["peak_window_share"] = round(report["peak_input_tokens"] / window, 4)
    with_strict_cost(report)
    report.update(summary_figures(report))
    if not with_unmanaged:
        return report
    unmanaged = run_once(name, window, managed=False)
    with_strict_cost(unmanaged.report)
    unmanaged_inputs = [c["input_tokens"] for c in unmanaged.report["model_calls"]]
    total = sum(unmanaged_inputs)
    report.update({
        "scenario": name, "window": window,
        "unmanaged_total_input_tokens": total,
        "unmanaged_peak_input_tokens": max(unmanaged_inputs, default=0),
        "unmanaged_first_overflow_call": next(
            (i + 1 for i, t in enumerate(unmanaged_inputs) if t > window), None),
        "reduction": round(1 - report["total_input_tokens"] / total, 4) if total else None,
        "unmanaged_sequence": unmanaged_inputs,
        "unmanaged_cached_input_tokens": unmanaged.report["cached_input_tokens"],
        "unmanaged_output_tokens": unmanaged.report["output_tokens"],
        "unmanaged_cost": unmanaged.report["cost"],
        "unmanaged_cost_sequence": cost_sequence(unmanaged.report["model_calls"]),
        "cost_sequence": cost_sequence(report["model_calls"]),
        "cost_sequences": {t: cost_sequence(report["model_calls"], t) for t in PRICE_TABLES},
        "unmanaged_cost_sequences": {t: cost_sequence(unmanaged.report["model_calls"], t)
                                     for t in PRICE_TABLES},
        "cost_ratio": {table: round(report["cost"][table] / unmanaged.report["cost"][table], 3)
                       for table in (*PRICE_TABLES, STRICT)
                       if unmanaged.report["cost"].get(table)},
    })
    return report


def with_strict_cost(report: dict[str, Any]) -> None:
    """The run's cost under Anthropic's strict cache rule (a change of tools, tool_choice
    or system text voids the cached messages) as a third column beside the two others."""
    if "cost_anthropic_strict" in report:
        report["cost"] = {**report["cost"], STRICT: report["cost_anthropic_strict"]}


def summary_figures(report: dict[str, Any]) -> dict[str, Any]:
    """What the summary costs: its share of all input tokens (the summary section every
    agent request carries) and the output its calls wrote."""
    total = report["total_input_tokens"]
    return {"summary_share": round(report["summary_section_tokens"] / total, 4) if total
            else None,
            "summary_output_share": round(report["summary_output_tokens"]
                                          / report["output_tokens"], 4)
            if report["output_tokens"] else None}


def cost_sequence(calls: list[dict[str, Any]], table: str = "anthropic-like") -> list[float]:
    """Cumulative cost after each call under one price table (for the plot)."""
    prices, total, out = PRICE_TABLES[table], 0.0, []
    for c in calls:
        marked = ((c.get("cache_read_tokens", 0), c["cache_write_tokens"])
                  if "cache_write_tokens" in c else None)
        total += prices.cost(c["input_tokens"], c.get("cached_tokens", 0),
                             c.get("output_tokens", 0), marked)
        out.append(round(total, 6))
    return out


def run_bench(json_path: str | None = None, out: Callable[[str], None] = print,
              scenarios: list[tuple[str, int]] | None = None,
              plot_path: str | None = None, plot_scenario: str = "long-200",
              summarizer: str | None = None) -> dict[str, Any]:
    """Every scenario managed and (but long-1000) unmanaged; the unmanaged run never
    compacts, so `summarizer` changes only the managed one."""
    results = {name: bench_scenario(name, window, with_unmanaged=name not in MANAGED_ONLY,
                                    summarizer=summarizer)
               for name, window in scenarios or BENCH_SCENARIOS}
    out(format_table(results))
    results["targets"] = targets(results)
    out(format_targets(results["targets"]))
    if plot_path and plot_scenario in results:
        from agents.bench.plot import plot_scenario as draw
        draw(results[plot_scenario], plot_path)
        out(f"wrote {plot_path} ({plot_scenario})")
    if "retrieval-6x1600" in results:
        r = results["retrieval-6x1600"]
        out("retrieval-6x1600 input tokens per call (window 4000, trigger 0.8):")
        out(f"  TaskOS managed   : {r['input_sequence']}")
        out(f"  seed (AgentScope): {SEED_MANAGED_4000}")
        out(f"  TaskOS unmanaged : {r['unmanaged_sequence']}")
        out(f"  seed unmanaged   : {SEED_UNMANAGED}")
    for name, r in results.items():
        for line in format_engine(name, r):
            out(line)
        if "engine_ms_per_call_first_tenth" in r:
            out(f"{name}: engine ms per model call, first tenth of the turns "
                f"{r['engine_ms_per_call_first_tenth']} vs last tenth "
                f"{r['engine_ms_per_call_last_tenth']} (flat = a turn does not cost more as "
                "the session grows)")
    if json_path:
        Path(json_path).write_text(json.dumps(results, indent=2, ensure_ascii=False))
        out(f"wrote {json_path}")
    return results


def _money(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_table(results: dict[str, dict[str, Any]]) -> str:
    """Tokens, cache, summary calls, money (managed vs unmanaged) and engine time."""
    head = (f"{'scenario':<17}{'window':>7}{'calls':>6}{'sum.':>5}{'input':>10}{'cached':>7}"
            f"{'unmanaged':>11}{'cached':>7}{'peak':>7}{'over':>5}{'anch.':>6}"
            f"{'$ oai':>7}{'$ unm':>7}{'$ ant':>7}{'$ unm':>7}{'$ str':>7}{'$ unm':>7}"
            f"{'sum%':>5}{'ms/call':>8}{'ms/turn':>8}")
    rows = [head, "-" * len(head)]
    for name, r in results.items():
        survival = "-" if r["anchor_survival"] is None else f"{r['anchor_survival']:.2f}"
        unmanaged = r.get("unmanaged_total_input_tokens")
        unm_cost = r.get("unmanaged_cost") or {}

        def share(cached, total):
            return f"{100 * cached / total:.0f}%" if total else "-"

        rows.append(
            f"{name:<17}{r['window']:>7}{len(r['model_calls']):>6}{r['summary_calls']:>5}"
            f"{r['total_input_tokens']:>10}"
            f"{share(r['cached_input_tokens'], r['total_input_tokens']):>7}"
            f"{unmanaged if unmanaged is not None else '-':>11}"
            f"{share(r.get('unmanaged_cached_input_tokens', 0), unmanaged or 0):>7}"
            f"{r['peak_input_tokens']:>7}{r['over_window_requests']:>5}{survival:>6}"
            f"{_money(r['cost']['openai-like']):>7}{_money(unm_cost.get('openai-like')):>7}"
            f"{_money(r['cost']['anthropic-like']):>7}"
            f"{_money(unm_cost.get('anthropic-like')):>7}"
            f"{_money(r['cost'].get(STRICT)):>7}{_money(unm_cost.get(STRICT)):>7}"
            f"{share(r['summary_section_tokens'], r['total_input_tokens']):>5}"
            f"{r['engine_ms_per_call'] or 0:>8.3f}{r['engine_ms_per_turn_median'] or 0:>8.3f}")
    return "\n".join(rows)


# Issue 8's targets: (scenario, key in its result, how it is checked, the limit).
TARGETS = [
    ("long-200", "cost_ratio.openai-like", "<=", 0.5),
    ("long-200", "cost_ratio.anthropic-like", "<=", 0.5),
    ("long-200", "peak_window_share", "<=", 0.25),
    ("long-200", "over_window_requests", "<=", 0),
    ("long-200", "anchor_survival", ">=", 1.0),
    ("long-200", "summary_calls", "<=", 20),
    # The person's words (C19): every sentence in every later request, nothing listed as
    # theirs that was superseded, quoted or a tool's.
    *((name, key, check, limit) for name in ("retrieval-6x1600", "sales-report", "long-200")
      for key, check, limit in (("person_words_kept", ">=", 1.0), ("superseded_listed", "<=", 0),
                                ("quoted_promoted", "<=", 0),
                                ("tool_text_in_constraints", "<=", 0))),
    # Carrying less: the managed run cheaper than not managing at all under every price
    # table (cache writes and the strict rule included), the summary a small part of the
    # input, and no summary call whose text no agent request carried.
    *(("retrieval-6x1600", f"cost_ratio.{table}", "<=", 0.9)
      for table in ("openai-like", "anthropic-like", "anthropic-strict")),
    *((name, "summary_share", "<=", 0.15) for name in ("long-200", "long-1000")),
    *((name, "unused_summaries", "<=", 0)
      for name in ("retrieval-6x1600", "sales-report", "long-200", "long-1000")),
    ("long-1000", "engine_tenth_ratio", "<=", 1.2),
    ("long-1000", "engine_ms_per_call", "<=", 4.0),
    # Compaction turns cheap and plain turns flat, in CPU time (wall time moves with load).
    ("long-1000", "engine_cpu.per_compaction_turn", "<=", 5.0),
    ("long-1000", "engine_cpu.plain_tenth_ratio", "<=", 1.2),
]


def targets(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each target of the scenarios that ran: the measured value and whether it holds."""
    out = []
    for scenario, key, check, limit in TARGETS:
        if scenario not in results:
            continue
        value: Any = results[scenario]
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        met = None if value is None else (value <= limit if check == "<=" else value >= limit)
        out.append({"scenario": scenario, "key": key, "value": value,
                    "target": f"{check} {limit}", "met": met})
    return out


def format_targets(rows: list[dict[str, Any]]) -> str:
    lines = ["targets (issue 8):"]
    for row in rows:
        verdict = {True: "met", False: "MISSED", None: "n/a"}[row["met"]]
        lines.append(f"  {row['scenario']:<10} {row['key']:<26} {row['value']!s:>9} "
                     f"(target {row['target']}): {verdict}")
    return "\n".join(lines)
