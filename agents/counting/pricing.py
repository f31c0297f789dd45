"""Money per run under named price tables (feature W9): the benchmark's headline metric.

Tokens alone hide what caching does: providers bill a repeated prompt prefix at 10–25 %
of the input price, so a run that sends more tokens can still cost less. Each table
gives dollars per 1M input / cached input / output tokens; `cache_write` (where set) is
what a provider charges for input written to its cache instead of the input price.
A provider with Anthropic-style breakpoint caching reports what each call read from its
cache and wrote to it (`marked`: read, written); those tables bill exactly that. A call
without that report is billed as if every fresh token of a cacheable request were
written, the dearest reading of it.
"""
from __future__ import annotations

from dataclasses import dataclass

from agents.config import ModelProfile

CACHEABLE_FROM = 1024  # requests shorter than this are never cached, so never written


@dataclass(frozen=True)
class PriceTable:
    input: float
    cached: float
    output: float
    cache_write: float | None = None

    def cost(self, input_tokens: int, cached_tokens: int, output_tokens: int,
             marked: tuple[int, int] | None = None) -> float:
        if marked is not None and self.cache_write is not None:
            read, written = marked
            plain = max(0, input_tokens - read - written)
            return (plain * self.input + written * self.cache_write + read * self.cached
                    + output_tokens * self.output) / 1_000_000
        fresh = max(0, input_tokens - cached_tokens)
        fresh_price = self.input
        if self.cache_write is not None and input_tokens >= CACHEABLE_FROM:
            fresh_price = self.cache_write
        return (fresh * fresh_price + cached_tokens * self.cached
                + output_tokens * self.output) / 1_000_000


PRICE_TABLES = {
    "openai-like": PriceTable(2.00, 0.50, 8.00),
    "anthropic-like": PriceTable(3.00, 0.30, 15.00, cache_write=3.75),
    "deepseek-like": PriceTable(0.27, 0.07, 1.10),
}


def profile_table(profile: ModelProfile) -> PriceTable:
    return PriceTable(profile.price_input, profile.price_cached_input, profile.price_output)


class CostMeter:
    """Running totals per table, O(1) per call and O(tables) to save."""

    def __init__(self, profile: ModelProfile) -> None:
        self.tables = {**PRICE_TABLES, "profile": profile_table(profile)}
        self.totals = {name: 0.0 for name in self.tables}

    def add(self, input_tokens: int, cached_tokens: int, output_tokens: int,
            marked: tuple[int, int] | None = None) -> None:
        for name, table in self.tables.items():
            self.totals[name] += table.cost(input_tokens, cached_tokens, output_tokens, marked)

    def rounded(self) -> dict[str, float]:
        return {name: round(value, 4) for name, value in self.totals.items()}
