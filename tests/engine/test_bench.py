import json

from agents.bench import SEED_MANAGED_4000, run_bench


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
