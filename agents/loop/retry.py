"""Retrying transient model faults: exponential backoff with jitter inside a per-session budget.

A provider that rate-limits, times out, fails with a 5xx or sends a malformed body is asked
again after a wait: the provider's `Retry-After` when it gives one (never less), else
`base × 2^attempt` with jitter, capped. Every second spent in failed calls and in waits is
charged to the session's retry budget (`ModelProfile.retry_budget`); when the next wait
would overrun it the session fails with the last error instead of hammering the provider
for ever. Waits are sliced so a cancel request ends them within a fraction of a second.

The clock, the sleep and the random source are injectable so tests need no real waiting.
"""
from __future__ import annotations

import datetime as dt
import random
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, ContextManager

from agents.errors import error_event
from agents.events import Event

if TYPE_CHECKING:
    from agents.provider.client import ModelError


class CallCancelled(Exception):
    """A person cancelled the session while a model call was in flight or waiting to retry."""


@dataclass
class RetryPlan:
    attempt: int  # 1 for the first retry
    delay: float  # seconds to wait before it
    next_attempt_at: str  # ISO time of the next attempt
    spent: float  # budget spent including this wait
    budget: float


class RetryBudget:
    """How long a session may spend retrying transient model errors, and the waits."""

    SLICE_S = 0.25  # a cancel request is noticed within this much of a wait
    state_key = "retry_budget"  # saved with the loop: a resumed session gets no fresh budget

    def __init__(self, seconds: float, *, base: float = 1.0, cap: float = 60.0,
                 sleep: Callable[[float], None] = time.sleep,
                 rng: Callable[[], float] = random.random,
                 wall: Callable[[], dt.datetime] | None = None) -> None:
        self.seconds = max(0.0, float(seconds))
        self.base, self.cap = base, cap
        self.sleep, self.rng = sleep, rng
        self.wall = wall or (lambda: dt.datetime.now(dt.timezone.utc))
        self.spent = 0.0
        self.attempts = 0  # consecutive failures since the last successful call

    def succeeded(self) -> None:
        """A call went through: the next failure starts the backoff from the bottom again."""
        self.attempts = 0

    def delay_for(self, attempt: int, retry_after: float | None) -> float:
        """The wait before retry number `attempt` (1-based)."""
        if retry_after is not None and retry_after > 0:
            # Honour the provider's wait; a little jitter on top so many workers that were
            # told the same second do not all come back at once.
            return retry_after * (1 + 0.1 * self.rng())
        exponential = min(self.cap, self.base * 2 ** (attempt - 1))
        return exponential * (0.5 + 0.5 * self.rng())  # "equal jitter": between half and all

    def plan(self, failed_call_s: float, retry_after: float | None) -> RetryPlan | None:
        """Charge a failed call and plan the next attempt; None when the budget is spent."""
        self.spent += max(0.0, failed_call_s)
        self.attempts += 1
        delay = self.delay_for(self.attempts, retry_after)
        if self.spent + delay > self.seconds:
            return None
        self.spent += delay
        at = self.wall() + dt.timedelta(seconds=delay)
        return RetryPlan(attempt=self.attempts, delay=delay,
                         next_attempt_at=at.isoformat(timespec="seconds"),
                         spent=self.spent, budget=self.seconds)

    def wait_or_give_up(self, exc: "ModelError", emit: Callable[[Event], None],
                        should_stop: Callable[[], bool],
                        idle: Callable[[], ContextManager[None]] = nullcontext) -> None:
        """Announce the next attempt as a non-fatal ERROR and wait for it, or re-raise
        `exc` with the reason when the budget cannot cover the wait. The wait runs inside
        `idle()`, which commits what the turn wrote first (the notice with it, so people
        see it while the session waits)."""
        plan = self.plan(exc.elapsed_s, exc.retry_after)
        if plan is None:
            raise type(exc)(exc.code, f"{exc} — giving up: the session's retry budget of "
                            f"{self.seconds:g} s is spent ({self.attempts} failed attempts "
                            "in a row)") from exc
        message = (f"{exc} — retrying at {plan.next_attempt_at} (in {plan.delay:.1f} s; "
                   f"{plan.spent:.0f} of {plan.budget:g} s of the retry budget used)")
        emit(error_event(exc.code, message, fatal=False, attempt=plan.attempt,
                         retry_in_s=round(plan.delay, 2), next_attempt_at=plan.next_attempt_at,
                         retry_after=exc.retry_after, budget_spent_s=round(plan.spent, 2),
                         budget_s=plan.budget))
        with idle():
            self.wait(plan.delay, should_stop)

    def wait(self, delay: float, should_stop: Callable[[], bool]) -> None:
        """Sleep `delay` seconds in slices; raise CallCancelled as soon as a cancel arrives."""
        remaining = delay
        while remaining > 0:
            if should_stop():
                raise CallCancelled("cancelled by a person while waiting to retry")
            step = min(self.SLICE_S, remaining)
            self.sleep(step)
            remaining -= step
        if should_stop():
            raise CallCancelled("cancelled by a person while waiting to retry")

    def to_state(self) -> dict:
        return {"spent": self.spent}

    def from_state(self, state: dict) -> None:
        self.spent = float((state or {}).get("spent", 0.0))
