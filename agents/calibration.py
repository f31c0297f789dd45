"""Counting per model (SPEC C2, issue 11): the engine's figure corrected by the provider's.

The engine counts with tiktoken (cl100k when the model's own encoding is unknown); a
local model's tokenizer counts the same request 0.96–1.19× as much. Every answered call
reports the provider's count (`usage.prompt_tokens`) next to the engine's, so the ratio
is learnt online: the provider's tokens over the engine's, summed over the recent calls.
The working context divides the window by this ratio plus a small margin, so budgets,
triggers and `fit()` all work in engine tokens against the window the provider enforces.

The source of the figure, shown in the drawer's Budget panel:

- exact       the server's own tokenizer counts the text (llama.cpp's /tokenize), or the
              simulated provider, which counts with the engine's tokenizer;
- calibrated  cl100k corrected by the ratio learnt from this profile's calls;
- estimate    cl100k before any call has reported usage.
"""
from __future__ import annotations

from typing import Any

COUNT_MARGIN = 0.02  # kept free on top of the learnt ratio: the ratio varies by content
RECENT_CALLS = 20  # the ratio is taken over this many recent calls
MIN_RATIO, MAX_RATIO = 0.5, 3.0  # a pair outside this is a misreport, not a tokenizer


class TokenCalibration:
    """The provider/engine ratio learnt from (engine tokens, provider tokens) pairs."""

    state_key = "token_calibration"

    def __init__(self, *, prior: float = 1.0, prior_calls: int = 0, exact: bool = False,
                 margin: float = COUNT_MARGIN) -> None:
        self.prior, self.prior_calls = prior, prior_calls  # learnt by earlier sessions
        self.exact = exact
        self.margin = margin
        self.pairs: list[tuple[int, int]] = []
        self.calls = 0  # pairs observed in this session

    def observe(self, engine_tokens: int, provider_tokens: int) -> bool:
        """Record one call's two figures; False when the pair is unusable."""
        if engine_tokens <= 0 or provider_tokens <= 0:
            return False
        if not MIN_RATIO <= provider_tokens / engine_tokens <= MAX_RATIO:
            return False
        self.pairs = (self.pairs + [(engine_tokens, provider_tokens)])[-RECENT_CALLS:]
        self.calls += 1
        return True

    @property
    def ratio(self) -> float:
        if not self.pairs:
            return self.prior
        return sum(p for _, p in self.pairs) / sum(e for e, _ in self.pairs)

    @property
    def source(self) -> str:
        if self.exact:
            return "exact"
        return "calibrated" if self.pairs or self.prior_calls else "estimate"

    def correction(self) -> float:
        """What the working context divides the window by."""
        return self.ratio * (1 + self.margin)

    def estimate(self, engine_tokens: int) -> int:
        """The provider's figure for a request the engine counted `engine_tokens`."""
        return round(engine_tokens * self.ratio)

    def learnt(self) -> tuple[float, int]:
        """(ratio, calls) to store on the profile, so the next session starts calibrated."""
        return round(self.ratio, 4), self.prior_calls + self.calls

    def to_state(self) -> dict[str, Any]:
        return {"pairs": [list(p) for p in self.pairs], "calls": self.calls}

    def from_state(self, state: dict[str, Any]) -> None:
        self.pairs = [(int(e), int(p)) for e, p in state.get("pairs", [])]
        self.calls = int(state.get("calls", 0))
