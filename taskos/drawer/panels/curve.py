"""Curve: input tokens per model call with the window and trigger lines (the sawtooth),
scaled to the data, the full window one tick away.

The page draws the curve from its data once it holds it: a live update sends only the
new calls' points (`delta`), and static/js/curve.js redraws the same picture as the
template. Sending the whole drawing on every call was the costliest fragment a live
page applied on long-1000 (up to 50 KB, 70 ms to merge: scripts/drawer_bench.py).
"""
from __future__ import annotations

from typing import Any

from django.utils.html import escape
from django.utils.safestring import mark_safe

from agents import BudgetEvent, Event, EventType, ModelCall
from taskos.drawer.base import Panel

WIDTH, HEIGHT = 640, 200
LEFT, RIGHT, TOP, BOTTOM = 52, 12, 12, 24  # room for the axis labels


MARKED_CALLS = 150  # above this many calls only summary and over-window calls get a marker
# A peak this close to the "0" tick (a small run on the full-window scale) has no tick of
# its own: the two labels would overlap, and the legend says the peak.
PEAK_TICK_GAP = 12


def point(call: ModelCall) -> str:
    """A call as the page's curve data holds it: input tokens, "s" for a summary call,
    "o" for one over the window (static/js/curve.js reads it)."""
    return (f"{call.input_tokens}{'s' if call.kind == 'summary' else ''}"
            f"{'o' if call.over_window else ''}")


def scale(calls: list[ModelCall], top: float, window: int, trigger: int) -> dict[str, Any]:
    """The curve's line, markers and reference lines with `top` tokens at the top edge."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / max(1, len(calls) - 1)

    def y_of(tokens: float) -> float | None:
        return round(TOP + plot_h * (1 - tokens / top), 1) if tokens <= top else None

    line, points = [], []
    for index, call in enumerate(calls):
        tokens = call.input_tokens
        x = round(LEFT + index * step if len(calls) > 1 else LEFT + plot_w / 2, 1)
        y = y_of(tokens)
        line.append(f"{x},{y}")
        kind, over = call.kind, call.over_window
        if len(calls) <= MARKED_CALLS or kind == "summary" or over:
            points.append({"x": x, "y": y, "tokens": tokens, "kind": kind, "over": over,
                           "call": call.call,
                           "diamond": f"{x},{y - 5} {x + 5},{y} {x},{y + 5} {x - 5},{y}"})
    peak = max(c.input_tokens for c in calls)
    zero_y, peak_y = y_of(0), y_of(peak)
    return {"top": top, "polyline": " ".join(line), "points": points, "zero_y": zero_y,
            "peak_y": peak_y, "peak_tick": zero_y - peak_y >= PEAK_TICK_GAP, "window_y": y_of(window) if window else None,
            "trigger_y": y_of(trigger) if trigger else None}


class CurvePanel(Panel):
    name = "curve"
    title = "Input tokens per call"
    template = "drawer/panels/curve.html"
    event_types = (EventType.MODEL_CALL, EventType.BUDGET)
    latest_only = frozenset({EventType.BUDGET})  # the window and trigger line now

    def get_context(self, session, events: list[Event]) -> dict[str, Any]:
        calls = [ev for ev in events if isinstance(ev, ModelCall)]
        budgets = [ev for ev in events if isinstance(ev, BudgetEvent)]
        latest = budgets[-1] if budgets else None
        window = (latest.window if latest else 0) or session.window or 0
        trigger = latest.trigger_line if latest else 0
        if not calls:
            return {"curve": None, "window": window}
        peak = max(call.input_tokens for call in calls)
        # Fitted to the data (peak and trigger line): at 128k a run that peaks at 12k would
        # otherwise sit in the bottom tenth. The full-window scale is drawn too, hidden
        # until the person ticks "full window" (the page remembers the choice).
        # The trigger line is kept in view once the run comes within a third of it.
        near = trigger if trigger and trigger <= peak * 1.5 else 0
        fitted = scale(calls, max(peak, near, 1) * 1.08, window, trigger)
        full = scale(calls, max(window, peak, 1) * 1.08, window, trigger)
        return {"window": window, "curve": {
            "width": WIDTH, "height": HEIGHT, "left": LEFT, "right": WIDTH - RIGHT,
            "bottom": HEIGHT - BOTTOM, "scales": [("fitted", fitted), ("full", full)], "trigger": trigger,
            "peak": peak, "calls": len(calls),
            "summaries": sum(1 for c in calls if c.kind == "summary"),
            "over": sum(1 for c in calls if c.over_window),
            "first_call": calls[0].call, "last_call": calls[-1].call,
            "series": " ".join(point(call) for call in calls),
        }}

    def badge(self, context: dict[str, Any]) -> str:
        curve = context["curve"]
        return f"{curve['calls']} calls" if curve else ""

    def delta(self, session, context: dict[str, Any], events: list[Event],
              new: list[Event]) -> str | None:
        """The new calls' points and the window and trigger now, for the page to add to
        the curve it draws; whole while the page shows no curve yet."""
        calls = [ev for ev in new if isinstance(ev, ModelCall)]
        curve = context["curve"]
        if curve is None or curve["calls"] == len(calls):
            return None  # the first calls: no curve on the page to add them to
        points = escape(" ".join(point(call) for call in calls))
        # The number the page gives the first of these points (its own numbering: the
        # first call shown plus its position), so a delta that arrives again after a
        # resync already drew it adds nothing (static/js/curve.js take).
        first = curve["first_call"] + curve["calls"] - len(calls)
        return mark_safe(f'<div hx-swap-oob="beforeend:#curve-inbox"><i data-from="{first}" '
                         f'data-points="{points}" data-window="{context["window"]}" '
                         f'data-trigger="{curve["trigger"]}"></i></div>')
