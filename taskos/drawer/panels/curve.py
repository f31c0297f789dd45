"""Curve: input tokens per model call with the window and trigger lines (the sawtooth)."""
from __future__ import annotations

from typing import Any

from taskos.drawer.base import Panel
from taskos.drawer.events import Ev

WIDTH, HEIGHT = 640, 200
LEFT, RIGHT, TOP, BOTTOM = 52, 12, 12, 24  # room for the axis labels


class CurvePanel(Panel):
    name = "curve"
    title = "Input tokens per call"
    template = "drawer/panels/curve.html"
    event_types = ("MODEL_CALL", "BUDGET")

    def get_context(self, session, events: list[Ev]) -> dict[str, Any]:
        calls = [ev.payload for ev in events if ev.type == "MODEL_CALL"]
        budgets = [ev.payload for ev in events if ev.type == "BUDGET"]
        latest_budget = budgets[-1] if budgets else {}
        window = int(latest_budget.get("window") or session.window or 0)
        trigger = int(latest_budget.get("trigger_line") or 0)
        if not calls:
            return {"curve": None, "window": window}
        peak = max(int(call.get("input_tokens") or 0) for call in calls)
        top = max(window, peak, 1) * 1.08
        plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
        step = plot_w / max(1, len(calls) - 1)

        def y_of(tokens: float) -> float:
            return round(TOP + plot_h * (1 - tokens / top), 1)

        points = []
        for index, call in enumerate(calls):
            tokens = int(call.get("input_tokens") or 0)
            points.append({
                "x": round(LEFT + index * step if len(calls) > 1 else LEFT + plot_w / 2, 1),
                "y": y_of(tokens), "tokens": tokens, "call": call.get("call", index + 1),
                "kind": call.get("kind") or "agent", "over": bool(call.get("over_window")),
            })
        for p in points:
            x, y = p["x"], p["y"]
            p["diamond"] = f"{x},{y - 5} {x + 5},{y} {x},{y + 5} {x - 5},{y}"
        return {
            "window": window,
            "curve": {
                "width": WIDTH, "height": HEIGHT, "left": LEFT, "right": WIDTH - RIGHT,
                "bottom": HEIGHT - BOTTOM, "points": points,
                "polyline": " ".join(f"{p['x']},{p['y']}" for p in points),
                "window_y": y_of(window) if window else None,
                "trigger_y": y_of(trigger) if trigger else None, "trigger": trigger,
                "zero_y": y_of(0), "peak_y": y_of(peak),
                "peak": peak, "calls": len(calls),
                "summaries": sum(1 for p in points if p["kind"] == "summary"),
                "over": sum(1 for p in points if p["over"]),
                "first_call": points[0]["call"], "last_call": points[-1]["call"],
            },
        }

    def badge(self, context: dict[str, Any]) -> str:
        curve = context["curve"]
        return f"{curve['calls']} calls" if curve else ""
