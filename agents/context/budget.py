"""Budget zones (feature C1) and the lines the triggers compare against (C3, C4)."""
from __future__ import annotations

from dataclasses import dataclass

from agents.config import ContextConfig

REFERENCE_WINDOW = 128_000
# Feature C1's zone defaults at the reference window; other windows scale proportionally.
DEFAULT_ZONES = {"system": 3000, "snapshot": 2000, "words": 3000, "history": 16000,
                 "summary": 8000, "summary_max": 20000, "reserve": 1000}
MIN_WORDS_BUDGET = 128  # the person's words block: a few sentences even in a tiny window
BUDGET_WARNING_FREE = 0.15  # trigger (c): less than 15 % of the window left
FINAL_RESERVE_FACTOR = 4  # C15: the answer phase gets a larger output reserve


@dataclass(frozen=True)
class Budget:
    """Token budgets for one window; `input_limit` is what no request may exceed."""

    window: int
    system: int
    snapshot: int
    words: int  # the words zone's claim: what the rolling window plans around
    words_share: int  # the person's words are sent whole up to this (C19), condensed past it
    history: int
    summary_cap: int
    summary_max: int
    reserve: int
    trigger_line: int
    warning_line: int
    budget_line: int  # over this, less than 15 % of the window is left
    keep_tokens: int  # recent history kept after a compaction (reserve_ratio)
    keep_rounds: int
    max_rounds: int
    message_cap: int  # no single message may bring more than this into the context

    @property
    def input_limit(self) -> int:
        return self.window - self.reserve

    @property
    def summary_output(self) -> int:
        """Output room a summary call needs; its request must leave this free."""
        return max(self.reserve, self.summary_cap)

    @property
    def summary_input_limit(self) -> int:
        return self.window - self.summary_output

    def budgets(self) -> dict[str, int]:
        # The person's words may use their whole share: over the claim is not over budget.
        return {"system": self.system, "snapshot": self.snapshot, "words": self.words_share,
                "summary": self.summary_cap,
                "history": self.history, "since": self.since,
                "hints": max(64, self.snapshot // 4), "reserve": self.reserve}

    @property
    def since(self) -> int:
        """Room for the "since then" block; past it the snapshot is frozen anew (C17)."""
        return max(64, self.snapshot // 2)


def plan_budget(window: int, config: ContextConfig, *, final_phase: bool = False,
                extra_reserve: int = 0) -> Budget:
    """Scale feature C1's zones to `window`; the output reserve grows in the answer phase."""
    scale = window / REFERENCE_WINDOW
    zone = {k: max(1, int(v * scale)) for k, v in DEFAULT_ZONES.items()}
    # Small windows still need room for a short answer; large ones keep feature C1's ratio.
    reserve = max(zone["reserve"], min(1000, window // 8))
    if final_phase:
        reserve = min(window // 4, reserve * FINAL_RESERVE_FACTOR)
    reserve = min(window // 3, reserve + extra_reserve)
    trigger_line = int(config.trigger_ratio * window)
    warning_line = max(0, int((config.trigger_ratio - config.context_buffer_ratio) * window))
    budget_line = int(window * (1 - BUDGET_WARNING_FREE)) - reserve
    return Budget(
        window=window, system=zone["system"], snapshot=zone["snapshot"],
        words=max(MIN_WORDS_BUDGET, zone["words"]),
        words_share=max(MIN_WORDS_BUDGET, int(config.words_share * (window - reserve))),
        history=zone["history"], summary_cap=zone["summary"], summary_max=zone["summary_max"],
        reserve=reserve, trigger_line=min(trigger_line, window - reserve),
        warning_line=warning_line, budget_line=budget_line,
        keep_tokens=max(1, int(config.reserve_ratio * window)),
        keep_rounds=max(1, config.max_rounds // 2), max_rounds=config.max_rounds,
        message_cap=min(config.tool_result_limit, int(0.45 * window)),
    )
