"""The benchmark (feature E1): the bundled workloads run with and without context management;
tokens, cached tokens, money, peaks and the engine's own time per call."""
from agents.bench.workloads import run_bench, run_once, targets

__all__ = ["run_bench", "run_once", "targets"]
