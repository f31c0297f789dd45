"""The bundled tool scenarios: every scripted call works on the bundled data, the sales
report's figures come from the tools, and the oversized scenario really is ~20x over."""
from __future__ import annotations

import json
import re

import pytest

from agents.scenarios import load_scenario


def play(scenario_name, registry, ctx):
    """Run every tool call of a scenario, in order; return (call, outcome) pairs."""
    scenario = load_scenario(scenario_name)
    results = []
    for step in scenario.model_steps:
        for call in step.tool_calls:
            results.append((call, registry.run(call["tool"], json.dumps(call["args"]), ctx)))
    return scenario, results


def test_sales_report_runs_its_four_phases_over_the_csv(registry, sales_ctx, store):
    scenario, results = play("sales-report", registry, sales_ctx)
    assert len(results) == 12
    assert [o.error for _, o in results] == [None] * 12
    assert scenario.window == 128_000
    stated = " ".join([scenario.goal] + [m for ms in scenario.user_before.values() for m in ms])
    assert scenario.expect_tier1 and all(s in stated for s in scenario.expect_tier1)
    final = scenario.model_steps[-1].final
    assert re.search(r"^\| Region \|.*\n\|---", final, re.M)  # a markdown table
    archived = "\n".join(store.read_ref("s1", o.ref) for _, o in results[:-1])
    table_rows = [line for line in final.splitlines() if re.match(r"\| [A-Z][a-z]+ \| \d", line)]
    numbers = {n for line in table_rows for n in re.findall(r"\d+\.\d+", line)}
    assert len(table_rows) == 5 and len(numbers) >= 15
    assert sorted(n for n in numbers if n not in archived) == [], "figures must come from tools"
    assert (sales_ctx.workspace / "report.md").read_text() in final


def test_oversized_results_are_twenty_times_over_and_stay_bounded(registry, sales_ctx, store):
    scenario, results = play("oversized-results", registry, sales_ctx)
    assert scenario.model_steps[-1].final
    assert [o.error for _, o in results] == [None] * len(results)
    over = []
    for call, outcome in results:
        tool = registry.get(call["tool"])
        boundary = registry.boundary(tool)
        assert len(outcome.content) <= boundary.max_result_length
        raw = store.read_ref("s1", outcome.ref)
        assert len(raw) == outcome.original_chars  # the full raw result is archived
        rows = raw.count("\n")
        ratio = max(len(raw) / boundary.max_result_length, rows / boundary.max_result_rows)
        if outcome.truncated:
            over.append((call["tool"], ratio))
    assert [name for name, _ in over] == ["fetch_document", "read_file", "csv_top_k", "sql_query"]
    assert all(ratio >= 18 for _, ratio in over), over


@pytest.mark.parametrize("name", ["sales-report", "oversized-results"])
def test_scenarios_only_call_registered_tools(registry, name):
    scenario = load_scenario(name)
    called = {c["tool"] for step in scenario.model_steps for c in step.tool_calls}
    assert called <= set(registry.names())
