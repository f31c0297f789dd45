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
    assert set(r["cost"]) >= {"openai-like", "anthropic-like", "deepseek-like", "profile"}
    assert r["cost_ratio"]["openai-like"] == round(
        r["cost"]["openai-like"] / r["unmanaged_cost"]["openai-like"], 3)
    assert r["peak_window_share"] == round(r["peak_input_tokens"] / 4000, 4)
    assert len(r["cost_sequences"]["openai-like"]) == len(r["model_calls"])


def test_targets_name_what_is_met_and_what_is_missed():
    from agents.bench.workloads import targets
    results = {"long-200": {"cost_ratio": {"openai-like": 0.2, "anthropic-like": 0.6},
                            "peak_window_share": 0.2, "over_window_requests": 0,
                            "anchor_survival": 1.0, "summary_calls": 21}}
    verdicts = {row["key"]: row["met"] for row in targets(results)}
    assert verdicts == {"cost_ratio.openai-like": True, "cost_ratio.anthropic-like": False,
                        "peak_window_share": True, "over_window_requests": True,
                        "anchor_survival": True, "summary_calls": False}


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
    scenarios = [("retrieval-6x1600", 4000)]
    faithful = run_bench(None, out=lambda line: None, scenarios=scenarios)["retrieval-6x1600"]
    hostile = run_bench(None, out=lambda line: None, scenarios=scenarios,
                        summarizer="hostile")["retrieval-6x1600"]
    assert faithful["summary_calls"] > 0 and faithful["invented_figures"] == 0
    assert hostile["invented_figures"] > 0 and hostile["invented_unflagged"] == []
    assert hostile["unmanaged_sequence"] == faithful["unmanaged_sequence"]
