"""The agent loop (features T1, T6, T8): turns, model calls with their accounting, commit
points, retries, and what a run is given and ends with."""
from agents.loop.agent_loop import AgentLoop
from agents.loop.calls import canonical_keys
from agents.loop.retry import CallCancelled, RetryBudget
from agents.loop.spec import DEFAULT_SYSTEM, RunResult, SessionSpec

__all__ = ["DEFAULT_SYSTEM", "AgentLoop", "CallCancelled", "RetryBudget", "RunResult",
           "SessionSpec", "canonical_keys"]
