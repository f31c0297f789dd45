"""`bench --plot FILE.png`: input tokens per call and cumulative cost, TaskOS vs unmanaged.

matplotlib is an optional dependency (`pip install -e '.[plot]'`); the benchmark itself
runs without it.
"""
from __future__ import annotations

from typing import Any

PLOT_TABLES = ("openai-like", "anthropic-like")


def plot_scenario(result: dict[str, Any], path: str) -> None:
    """Two panels for one bench result (a scenario run managed and unmanaged)."""
    try:
        import matplotlib
    except ImportError as exc:
        raise RuntimeError("bench --plot needs matplotlib: pip install -e '.[plot]' "
                           "(or pip install matplotlib)") from exc
    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot as plt

    if "unmanaged_sequence" not in result:
        raise RuntimeError(f"{result['scenario']} has no unmanaged run to compare with.")
    fig, (tokens, money) = plt.subplots(1, 2, figsize=(12, 4.5))
    managed = result["input_sequence"]
    cached = [c.get("cached_tokens", 0) for c in result["model_calls"]]
    tokens.plot(range(1, len(managed) + 1), managed, label="TaskOS: input tokens", lw=1.2)
    tokens.plot(range(1, len(cached) + 1), cached, label="TaskOS: of which cached", lw=0.8,
                ls="--")
    unmanaged = result["unmanaged_sequence"]
    tokens.plot(range(1, len(unmanaged) + 1), unmanaged,
                label="unmanaged (append-only): input tokens", lw=1.2)
    tokens.axhline(result["window"], color="grey", lw=0.8, ls=":", label="window")
    tokens.set(title=f"{result['scenario']}: input tokens per model call",
               xlabel="model call", ylabel="tokens")
    tokens.legend(fontsize=8)
    for table in PLOT_TABLES:
        ours = result["cost_sequences"][table]
        theirs = result["unmanaged_cost_sequences"][table]
        line, = money.plot(range(1, len(ours) + 1), ours, label=f"TaskOS, {table}")
        money.plot(range(1, len(theirs) + 1), theirs, color=line.get_color(), ls="--",
                   label=f"unmanaged, {table}")
    money.set(title="cumulative cost (prompt caching as the provider bills it)",
              xlabel="model call", ylabel="US$")
    money.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
