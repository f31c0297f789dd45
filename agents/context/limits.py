"""Hard limits checked before anything is sent (features C1, C3, issue 13).

Preflight: the part of every request that no compaction can shrink — the system prompt,
the tool schemas, the goal with the tier-1 anchors, and the output reserve — must fit the
window. If it does not, the session fails before any model call with an error that names
the largest part, its size, the limit and the fix; retrying could never help.

`check_request` is the last line of `fit()`: a request over `window − max_tokens` is never
handed to the model client.
"""
from __future__ import annotations

from dataclasses import dataclass


class PreflightError(RuntimeError):
    """The fixed part of every request does not fit the window."""

    code = "preflight_failed"


class RequestTooLarge(RuntimeError):
    """A request is still over its limit after every way of shrinking it was tried."""

    code = "request_too_large"


FIXES = {"system prompt": "shorten the system prompt",
         "tool schemas": "offer fewer tools (a scenario's \"tools\" list, or fewer tools per task)",
         "goal and tier-1 anchors": "shorten the goal or remove hard constraints in the drawer",
         "person's words (tier-1 sentences)": "state fewer or shorter hard constraints",
         "output reserve": "lower the output reserve (it grows in the answer phase)"}


@dataclass(frozen=True)
class FixedPart:
    name: str
    tokens: int


def preflight(parts: list[FixedPart], window: int) -> None:
    """Raise PreflightError unless the fixed parts fit `window` together."""
    total = sum(p.tokens for p in parts)
    if total <= window:
        return
    largest = max(parts, key=lambda p: p.tokens)
    listed = " + ".join(f"{p.name} {p.tokens:,}" for p in parts)
    raise PreflightError(
        f"Every request needs {total:,} tokens before any history ({listed}), but the window "
        f"is {window:,} tokens. The largest part is the {largest.name} ({largest.tokens:,} "
        f"tokens). Fix: use a model or window of at least {total + total // 4:,} tokens, "
        f"or {FIXES.get(largest.name, 'shrink it')}.")


def check_request(total: int, limit: int, window: int, max_tokens: int,
                  zones: dict[str, int]) -> None:
    """Raise RequestTooLarge when `total` input tokens exceed `limit` (window − max_tokens)."""
    if total <= limit:
        return
    shown = ", ".join(f"{k} {v:,}" for k, v in zones.items() if v and k != "reserve")
    raise RequestTooLarge(
        f"The next request needs {total:,} input tokens ({shown}) but at most {limit:,} fit "
        f"(window {window:,} − output {max_tokens:,}); compaction, summary shrinking and "
        "cutting the longest messages could not make it fit, so it was not sent. Fix: a "
        "larger window, fewer tools, a shorter system prompt or fewer hard constraints.")
