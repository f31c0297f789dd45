"""Counting per model (feature C2, issue 11): the engine's figure corrected by the provider's.

The engine counts with tiktoken (cl100k when the model's own encoding is unknown), or
with the server's tokenizer per text (agents.counting.server_tokens). Neither sees the text a
server wraps around the request: llama.cpp renders the tools into the system prompt in
its own words, drops them when tool_choice is "none", and frames every message its own
way. A single provider/engine ratio cannot follow that (10–55 % off on llama-cpp-python),
so the provider's count is modelled as

    provider = overhead[kind] + slope × engine

with one slope (the tokenizers' ratio on text) shared by every request and a fixed
overhead per kind of request (which tools, which tool_choice: what the server adds).
Both are fitted by least squares over the recent (kind, engine, provider) triples from
`usage.prompt_tokens`; with one call there is nothing to separate and the fit is the
plain ratio. The working context divides the window by `correction(window)`, the divisor
that puts the provider's count of a full request at the window less a small margin.

The source of the figure, shown in the drawer's Budget panel:

- exact       the server's own tokenizer counts the text (llama.cpp's /tokenize), or the
              simulated provider, which counts with the engine's tokenizer;
- calibrated  the engine's count corrected by the fit learnt from this profile's calls;
- estimate    the engine's count before any call has reported usage.

A call is labelled `exact` only when the server confirmed its figure: the whole request
rendered and counted matched `usage.prompt_tokens` (llama-cpp-python), or the estimate made
from the server's text counts equalled it (llama.cpp's /tokenize). When exactness is lost
— the tokenizer stops answering, a report disagrees with the rendering, the template
drops the tools — it is lost from that call on, with its reason (`lose`): the figures
learnt while exact are dropped, and the calls after it are `estimate` until usage
calibrates them again. The labels are kept as spans, so the report can say which calls
were exact and why the rest were not (`summary`).
"""
from __future__ import annotations

import json
from typing import Any

COUNT_MARGIN = 0.02  # kept free on top of the fit: the fit varies a little by content
RECENT_CALLS = 40  # the fit is taken over this many recent calls
MIN_RATIO, MAX_RATIO = 0.2, 3.0  # a pair outside this is a misreport, not a tokenizer
MIN_SPREAD = 25  # engine tokens of spread within a kind before an overhead is separable
MAX_SPANS = 64  # spans of equal count sources kept (see TokenCalibration.label)
SPANS_SAID = 3  # of them, said in the report before the call where exactness was lost


_sized: tuple[list[dict[str, Any]], int] | None = None  # the last schema list and its size


def _schemas_size(tools: list[dict[str, Any]]) -> int:
    """Characters of the schemas as JSON. A session's schema list is built once and never
    changed in place (agents/context/working.py counts its tokens once too): dumped for the
    first call that sends it, not for every call."""
    global _sized
    sized = _sized  # read once: another thread's session may replace it meanwhile
    if sized is None or sized[0] is not tools:
        sized = _sized = (tools, len(json.dumps(tools, ensure_ascii=False, sort_keys=True)))
    return sized[1]


def request_kind(tools: list[dict[str, Any]] | None, tool_choice: str | None,
                 messages: list[dict[str, Any]] | None = None) -> str:
    """What a server adds depends on the tools offered, whether they may be called, and
    how many system messages carry them: "auto:3/1204/s2" is three tools, 1 204
    characters of schemas, tool_choice auto, two system messages (llama-cpp-python's
    chatml-function-calling renders the tools into every system message, so a second one
    — the truncation marker — costs the tools a second time)."""
    if not tools:
        return "no-tools"
    size = _schemas_size(tools)
    systems = sum(1 for m in messages or () if m.get("role") == "system")
    return f"{tool_choice or 'auto'}:{len(tools)}/{size}" + (f"/s{systems}" if systems > 1 else "")


class TokenCalibration:
    """provider ≈ overhead[kind] + slope × engine, learnt from the calls' usage."""

    state_key = "token_calibration"

    def __init__(self, *, prior: float = 1.0, prior_calls: int = 0, exact: bool = False,
                 margin: float = COUNT_MARGIN,
                 prior_overheads: dict[str, float] | None = None) -> None:
        self.prior, self.prior_calls = prior, prior_calls  # learnt by earlier sessions
        self.prior_overheads = dict(prior_overheads or {})
        self.exact = exact
        self.margin = margin
        self.pairs: list[tuple[str, int, int]] = []  # (kind, engine, provider)
        # With the server's tokenizer the text is already counted as the server counts it
        # (slope 1): what is left is the overhead per kind and the framing per message
        # (llama.cpp's <|im_start|>role … <|im_end|> is not the engine's 3 + role).
        self.messages: list[int] = []  # message count of each pair, same order
        self.calls = 0  # pairs observed in this session
        self.agent_kind = ""  # the kind of the latest agent request: what budgets are for
        self.agent_messages = 0  # and its number of messages
        self._fit: tuple[float, dict[str, float]] | None = None
        self._frame: tuple[float, dict[str, float]] | None = None
        # Why exactness ended and at which call (0: it has not); the source of each call
        # as spans [first call, source]; whether the latest figure was confirmed.
        self.lost, self.lost_at = "", 0
        self.spans: list[list[Any]] = []
        self.confirmed: bool | None = None
        # A template that does not render the tools: the server's count of a request with
        # tools is far below the engine's, by design, and is no misreport.
        self.tools_dropped = False

    def observe(self, engine_tokens: int, provider_tokens: int, kind: str = "",
                messages: int = 0) -> bool:
        """Record one call's two figures; False when the pair is unusable."""
        if engine_tokens <= 0 or provider_tokens <= 0:
            return False
        ratio = provider_tokens / engine_tokens
        dropped = self.tools_dropped and kind != "no-tools"
        if not (MIN_RATIO <= ratio or dropped) or ratio > MAX_RATIO:
            return False
        self.pairs = (self.pairs + [(kind, engine_tokens, provider_tokens)])[-RECENT_CALLS:]
        self.messages = (self.messages + [messages])[-RECENT_CALLS:]
        self.calls += 1
        self._fit = self._frame = None
        return True

    # --- the fit
    def fit(self) -> tuple[float, dict[str, float]]:
        """(slope, overhead per kind): least squares with one intercept per kind."""
        if self._fit is None:
            self._fit = self._solve()
        return self._fit

    def _solve(self) -> tuple[float, dict[str, float]]:
        if not self.pairs:
            return self.prior, dict(self.prior_overheads)
        if self.exact:
            return 1.0, {}
        groups: dict[str, list[tuple[int, int]]] = {}
        for kind, engine, provider in self.pairs:
            groups.setdefault(kind, []).append((engine, provider))
        # The slope from the variation inside each kind, where the overhead cancels out.
        sxy, sxx = _within_kind_sums(groups)
        spread = max((max(e for e, _ in r) - min(e for e, _ in r) for r in groups.values()),
                     default=0)
        if spread >= MIN_SPREAD and sxx > 0 and MIN_RATIO <= sxy / sxx <= MAX_RATIO:
            slope = sxy / sxx
        else:  # every request about the same size: only the plain ratio can be told
            slope = sum(p for _, _, p in self.pairs) / sum(e for _, e, _ in self.pairs)
            if not self.prior_overheads:
                return slope, {}
        overheads = dict(self.prior_overheads)
        for kind, rows in groups.items():
            overheads[kind] = sum(p - slope * e for e, p in rows) / len(rows)
        return slope, overheads

    def framing_fit(self) -> tuple[float, dict[str, float]]:
        """Exact counting: (tokens per message, overhead per kind) of provider − engine,
        least squares with one intercept per kind, as `_solve` does for the slope."""
        groups: dict[str, list[tuple[int, int]]] = {}
        for (kind, engine, provider), count in zip(self.pairs, self.messages):
            groups.setdefault(kind, []).append((count, provider - engine))
        sxy, sxx = _within_kind_sums(groups)
        per_message = sxy / sxx if sxx > 0 and abs(sxy / sxx) <= 50 else 0.0
        return per_message, {kind: sum(r - per_message * n for n, r in rows) / len(rows)
                             for kind, rows in groups.items()}

    def overhead(self, kind: str, messages: int = 0) -> float:
        if self.exact and self.pairs:
            per_message, overheads = self._framing()
            return self._nearest(kind, overheads) + per_message * messages
        return self._nearest(kind, self.fit()[1])

    def _framing(self) -> tuple[float, dict[str, float]]:
        if self._frame is None:
            self._frame = self.framing_fit()
        return self._frame

    @staticmethod
    def _nearest(kind: str, overheads: dict[str, float]) -> float:
        if kind in overheads:
            return overheads[kind]
        # A kind not seen yet: the same tool_choice with other tools is the best guess.
        choice = kind.split(":")[0]
        alike = [a for k, a in overheads.items() if k.split(":")[0] == choice]
        return alike[-1] if alike else 0.0

    def error(self) -> float:
        """The fit's worst relative error on its recent pairs (0 without pairs)."""
        return max((abs(self.estimate(engine, kind, count) - provider) / provider
                    for (kind, engine, provider), count in zip(self.pairs, self.messages)),
                   default=0.0)

    @property
    def ratio(self) -> float:
        return self.fit()[0]

    @property
    def source(self) -> str:
        """How the next figure is counted, as it stands."""
        if self.exact and not self.lost:
            return "calibrated" if self.confirmed is False else "exact"
        if self.lost:  # the profile's prior was learnt from the figures now in doubt
            return "calibrated" if self.pairs else "estimate"
        return "calibrated" if self.pairs or self.prior_calls else "estimate"

    def lose(self, call: int, reason: str, *, text_exact: bool) -> bool:
        """Exactness ends at `call` for `reason`; True the first time. With `text_exact`
        the server's tokenizer still counts each text (slope 1, the framing re-learnt);
        without it the engine counts with its own encoding and the slope is learnt anew."""
        first = not self.lost
        if first:
            self.lost, self.lost_at = reason, call
        if first or (self.exact and not text_exact):
            self.exact = self.exact and text_exact
            # Pairs of the exact figures belong to another rendering or another tokenizer.
            self.pairs, self.messages = [], []
            self._fit = self._frame = None
        return first

    def label(self, call: int, source: str) -> None:
        """Record the source of call number `call` (spans of equal sources)."""
        if not self.spans or self.spans[-1][1] != source:
            # A server whose framing is fitted goes between exact and calibrated: the spans
            # kept are the latest ones, enough to say how exactness ended.
            self.spans = self.spans[-(MAX_SPANS - 1):] + [[call, source]]
        self.spans[-1] = [self.spans[-1][0], source, call]

    def summary(self) -> str:
        """The sources of the session's calls in words: the source as it stands when
        exactness was never lost, else which calls were exact and why the rest are not."""
        if not self.lost:
            return self.source
        parts = []
        before = [span for span in self.spans if span[0] < self.lost_at]
        if len(before) > SPANS_SAID:
            parts.append("…")
        for first, source, last in before[-SPANS_SAID:] + self.spans[len(before):]:
            if first < self.lost_at:
                calls = f"call {first}" if first == last else f"calls {first}–{last}"
                parts.append(f"{source} for {calls}")
            else:
                parts.append(f"{source} from call {first}")
                break
        if not parts:
            parts = [f"{self.source} from call {self.lost_at}"]
        return ", ".join(parts) + f": {self.lost}"

    def estimate(self, engine_tokens: int, kind: str = "", messages: int = 0) -> int:
        """The provider's figure for a request the engine counted `engine_tokens`."""
        return max(1, round(self.overhead(kind, messages) + self.ratio * engine_tokens))

    def correction(self, window: int | None = None) -> float:
        """What the working context divides the window by: a request of window/correction
        engine tokens is counted window/(1+margin) by the provider."""
        slope = self.ratio
        if not window:
            return slope * (1 + self.margin)
        engine_limit = (window / (1 + self.margin)
                        - self.overhead(self.agent_kind, self.agent_messages)) / slope
        # An overhead eating most of the window is a misfit, not room: cap the divisor.
        return min(window / max(engine_limit, window * 0.25), 4.0)

    def learnt(self) -> tuple[float, int]:
        """(slope, calls) to store on the profile, so the next session starts calibrated."""
        return round(self.ratio, 4), self.prior_calls + self.calls

    def learnt_overheads(self) -> dict[str, float]:
        return {k: round(v, 1) for k, v in self.fit()[1].items()}

    def to_state(self) -> dict[str, Any]:
        return {"pairs": [list(p) for p in self.pairs], "calls": self.calls,
                "agent_kind": self.agent_kind, "messages": self.messages,
                "agent_messages": self.agent_messages, "exact": self.exact,
                "lost": self.lost, "lost_at": self.lost_at, "spans": self.spans,
                "confirmed": self.confirmed, "tools_dropped": self.tools_dropped}

    def from_state(self, state: dict[str, Any]) -> None:
        # States saved before kinds existed hold (engine, provider) pairs.
        self.pairs = [(str(p[0]), int(p[1]), int(p[2])) if len(p) == 3 else ("", int(p[0]),
                                                                              int(p[1]))
                      for p in state.get("pairs", [])]
        self.calls = int(state.get("calls", 0))
        self.agent_kind = state.get("agent_kind", "")
        self.messages = [int(n) for n in state.get("messages", [])] or [0] * len(self.pairs)
        self.agent_messages = int(state.get("agent_messages", 0))
        # A counter that is not the server's now cannot be exact again; one that is may
        # have stopped answering before the session was saved.
        self.exact = self.exact and bool(state.get("exact", True))
        self.lost, self.lost_at = state.get("lost", ""), int(state.get("lost_at", 0))
        self.spans = [list(span) for span in state.get("spans", [])]
        self.confirmed = state.get("confirmed")
        self.tools_dropped = bool(state.get("tools_dropped", False))
        self._fit = self._frame = None


def _within_kind_sums(groups: dict[str, list[tuple[int, int]]]) -> tuple[float, float]:
    """Σ(x − x̄)(y − ȳ) and Σ(x − x̄)² with the means taken per kind: least squares for one
    slope shared by all kinds and one intercept per kind (the slope is their ratio)."""
    sxy = sxx = 0.0
    for rows in groups.values():
        mean_x = sum(x for x, _ in rows) / len(rows)
        mean_y = sum(y for _, y in rows) / len(rows)
        sxy += sum((x - mean_x) * (y - mean_y) for x, y in rows)
        sxx += sum((x - mean_x) ** 2 for x, _ in rows)
    return sxy, sxx
