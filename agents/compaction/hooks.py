"""Compaction hooks (feature C14): `on_compress_context` wrappers run in onion order.

A hook receives the compaction about to happen and a `proceed` callable; it may act
before, call `proceed()` (which runs the inner hooks and then the compaction itself) and
act after. The first hook registered is the outermost layer. TaskOS's own event
publishing, metrics and anchor rescue are hooks, so a user hook sees exactly what they see.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from agents.compaction.compactor import CompactionOutcome


@dataclass
class CompressCall:
    """What is being compacted and why; hooks may read it and add notes to `extra`."""

    trigger: str
    instructions: str = ""
    emergency: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


Proceed = Callable[[], Optional[CompactionOutcome]]
CompressHook = Callable[[CompressCall, Proceed], Optional[CompactionOutcome]]


def run_with_hooks(hooks: list[CompressHook], call: CompressCall,
                   inner: Proceed) -> CompactionOutcome | None:
    """Run `inner` wrapped by every hook, the first hook outermost."""
    proceed = inner
    for hook in reversed(hooks):
        proceed = (lambda h, nxt: (lambda: h(call, nxt)))(hook, proceed)
    return proceed()


@dataclass
class CompactionMetrics:
    """A hook that counts compactions and their cost, for the run report and the logs."""

    count: int = 0
    fallbacks: int = 0
    summary_calls: int = 0
    ms: list[float] = field(default_factory=list)

    def __call__(self, call: CompressCall, proceed: Proceed) -> CompactionOutcome | None:
        started = time.perf_counter()
        outcome = proceed()
        if outcome is not None:
            self.count += 1
            self.fallbacks += outcome.fallback
            self.summary_calls += outcome.summary_calls
            self.ms.append((time.perf_counter() - started) * 1000)
        return outcome
