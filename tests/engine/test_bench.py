import json

from agents.bench.workloads import SEED_MANAGED_4000, run_bench


def test_bench_compares_managed_with_unmanaged_and_writes_json(tmp_path):
    lines = []
    path = tmp_path / "bench.json"
    results = run_bench(str(path), out=lines.append, scenarios=[("retrieval-6x1600", 4000)])
    r = results["retrieval-6x1600"]
    for key in ("status", "turns", "model_calls", "total_input_tokens", "peak_input_tokens",
                "compactions", "over_window_requests", "anchor_survival", "engine_ms_per_call",
                "unmanaged_total_input_tokens", "unmanaged_first_overflow_call", "reduction"):
        assert key in r
    assert r["over_window_requests"] == 0 and r["peak_input_tokens"] <= 4000
    # Unmanaged, the same workload goes over a 4000-token window within a few calls.
    assert r["unmanaged_first_overflow_call"] is not None
    assert max(r["unmanaged_sequence"]) > 4000
    assert 0 < r["reduction"] == round(1 - r["total_input_tokens"] / r["unmanaged_total_input_tokens"], 4)
    assert json.loads(path.read_text())["retrieval-6x1600"]["reduction"] == r["reduction"]
    printed = "\n".join(lines)
    assert "retrieval-6x1600" in printed and str(SEED_MANAGED_4000) in printed


def test_bench_json_has_the_cost_keys_and_the_targets(tmp_path):
    path = tmp_path / "bench.json"
    run_bench(str(path), out=lambda line: None, scenarios=[("retrieval-6x1600", 4000)])
    r = json.loads(path.read_text())["retrieval-6x1600"]
    for key in ("cached_input_tokens", "output_tokens", "summary_calls", "cost",
                "unmanaged_cost", "cost_ratio", "peak_window_share", "cost_sequences",
                "unmanaged_cost_sequences", "engine_ms_per_turn_median"):
        assert key in r, key
    assert set(r["cost"]) >= {"openai-like", "anthropic-like", "deepseek-like", "profile",
                              "anthropic-strict"}
    # The strict cache rule never caches more than the usual one.
    assert r["cost"]["anthropic-strict"] >= r["cost"]["anthropic-like"]
    assert r["summary_share"] == round(r["summary_section_tokens"] / r["total_input_tokens"], 4)
    assert 0 <= r["summary_share"] < 1 and r["summary_output_tokens"] >= 0
    assert r["cost_ratio"]["openai-like"] == round(
        r["cost"]["openai-like"] / r["unmanaged_cost"]["openai-like"], 3)
    assert r["peak_window_share"] == round(r["peak_input_tokens"] / 4000, 4)
    assert len(r["cost_sequences"]["openai-like"]) == len(r["model_calls"])
    # Managing the context costs less than not managing it, at every price table.
    verdicts = {row["key"]: (row["value"], row["met"])
                for row in json.loads(path.read_text())["targets"]}
    for table in ("openai-like", "anthropic-like", "anthropic-strict"):
        assert verdicts[f"cost_ratio.{table}"] == (r["cost_ratio"][table], True), table
    assert verdicts["unused_summaries"] == (0, True)


def test_targets_name_what_is_met_and_what_is_missed():
    from agents.bench.workloads import targets
    results = {"long-200": {"cost_ratio": {"openai-like": 0.2, "anthropic-like": 0.6},
                            "peak_window_share": 0.2, "over_window_requests": 0,
                            "anchor_survival": 1.0, "summary_calls": 21,
                            "person_words_kept": 1.0, "superseded_listed": 0,
                            "quoted_promoted": 1, "tool_text_in_constraints": 0,
                            "summary_share": 0.16, "unused_summaries": 0}}
    verdicts = {row["key"]: row["met"] for row in targets(results)}
    assert verdicts == {"cost_ratio.openai-like": True, "cost_ratio.anthropic-like": False,
                        "peak_window_share": True, "over_window_requests": True,
                        "anchor_survival": True, "summary_calls": False,
                        "person_words_kept": True, "superseded_listed": True,
                        "quoted_promoted": False, "tool_text_in_constraints": True,
                        "summary_share": False, "unused_summaries": True}


def test_bench_plot_draws_a_png(tmp_path):
    import pytest
    pytest.importorskip("matplotlib")
    path = tmp_path / "bench.png"
    run_bench(None, out=lambda line: None, scenarios=[("retrieval-6x1600", 4000)],
              plot_path=str(path), plot_scenario="retrieval-6x1600")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_runs_the_managed_side_with_the_summarizer_asked_for():
    """`bench --summarizer hostile`: the managed runs get summaries with made-up figures
    (the unmanaged run never compacts), and the audit flags every one of them."""
    # At 4 000 clearing old results makes the room without a summary; at 2 048 it cannot.
    scenarios = [("retrieval-6x1600", 2048)]
    faithful = run_bench(None, out=lambda line: None, scenarios=scenarios)["retrieval-6x1600"]
    hostile = run_bench(None, out=lambda line: None, scenarios=scenarios,
                        summarizer="hostile")["retrieval-6x1600"]
    assert faithful["summary_calls"] > 0 and faithful["invented_figures"] == 0
    assert hostile["invented_figures"] > 0 and hostile["invented_unflagged"] == []
    assert hostile["unmanaged_sequence"] == faithful["unmanaged_sequence"]


def test_engine_time_splits_plain_turns_from_compaction_turns():
    from agents.bench.workloads import engine_split
    # 30 plain turns that slow from 2 to 3 ms, two compaction turns of 20 and 30 ms (two
    # calls each: the agent's and the summary's).
    plain = [2.0] * 15 + [3.0] * 15
    ms = plain[:10] + [20.0] + plain[10:20] + [30.0] + plain[20:]
    calls = [1] * 10 + [2] + [1] * 10 + [2] + [1] * 10
    compacted = [False] * 10 + [True] + [False] * 10 + [True] + [False] * 10
    split = engine_split(ms, calls, compacted)
    assert split["per_call"] == round(sum(ms) / 34, 3)
    assert split["per_plain_turn"] == 2.5 and split["per_compaction_turn"] == 25.0
    assert split["compaction_turn_max"] == 30.0 and split["compaction_turns"] == 2
    assert split["compaction_share"] == round(50 / sum(ms), 3)
    # Tenths of the plain turns only: a compaction turn in the first tenth changes nothing.
    assert (split["plain_first_tenth"], split["plain_last_tenth"]) == (2.0, 3.0)
    assert split["plain_tenth_ratio"] == 1.5
    # The first turn starts the session and the last one vets the answer: in no tenth.
    ends = engine_split([9.0] + ms[1:-1] + [40.0], calls, compacted)
    assert (ends["plain_first_tenth"], ends["plain_last_tenth"]) == (2.0, 3.0)
    assert ends["per_plain_turn"] > split["per_plain_turn"]


def test_the_ledger_counts_cpu_time_without_the_model_and_the_tools(monkeypatch):
    """CPU time of the loop's thread per turn, what the model and the tools spent taken out
    (as for wall time), and which turns compacted."""
    from agents.loop import calls as calls_module
    from agents.loop.calls import CallLedger
    clock = {"wall": 100.0, "cpu": 10.0}
    monkeypatch.setattr(calls_module.time, "perf_counter", lambda: clock["wall"])
    monkeypatch.setattr(calls_module.time, "thread_time", lambda: clock["cpu"])
    ledger = CallLedger()
    ledger.start()
    clock["wall"], clock["cpu"] = 100.5, 10.25  # 0.5 s and 0.25 s of CPU in the turn...
    ledger.outside(0.3, 0.2)  # ...of which the tool took 0.3 s and 0.2 s of CPU
    ledger.calls += 2
    ledger.lap(compacted=True)
    clock["wall"], clock["cpu"] = 100.6, 10.26
    ledger.calls += 1
    ledger.lap()
    assert [round(ms, 6) for ms in ledger.turn_ms] == [200.0, 100.0]
    assert [round(ms, 6) for ms in ledger.turn_cpu_ms] == [50.0, 10.0]
    assert ledger.turn_compacted == [True, False] and ledger.turn_calls == [2, 1]
    assert round(ledger.per_call_cpu_ms(), 6) == 20.0
    # A turn compacted when it emitted a COMPACTION that did something (a clearing too).
    from agents.events import Compaction
    ledger.start()
    ledger.observe(Compaction(trigger="anchor", noop=True))
    ledger.lap()
    ledger.start()
    ledger.observe(Compaction(trigger="rolling", kind="clear"))
    ledger.lap()
    assert ledger.turn_compacted[2:] == [False, True]


def test_bench_reports_engine_cpu_and_wall_per_kind_of_turn(tmp_path):
    lines = []
    path = tmp_path / "bench.json"
    run_bench(str(path), out=lines.append, scenarios=[("retrieval-6x1600", 4000)])
    r = json.loads(path.read_text())["retrieval-6x1600"]
    for clock in ("engine_cpu", "engine_wall"):
        assert r[clock]["compaction_turns"] == r["compactions"] > 0
        assert r[clock]["per_plain_turn"] > 0 and r[clock]["per_compaction_turn"] > 0
    assert r["engine_cpu_ms_per_call"] == r["engine_cpu"]["per_call"]
    printed = "\n".join(lines)
    assert "retrieval-6x1600: engine cpu ms per call" in printed
    assert "retrieval-6x1600: engine wall ms per call" in printed
