"""Budget: the latest BUDGET event as a stacked bar of zones over the window."""
from __future__ import annotations

from typing import Any

from agents import ZONES, Event, EventType, TokenCounter
from taskos.drawer.base import Panel
from taskos.drawer.calls import tools_of
from taskos.drawer.tool_costs import schema_part
from taskos.runs.models import SessionEvent

# Zones that hold input, left to right as the context is laid out (feature C17).
INPUT_ZONES = tuple(zone for zone in ZONES if zone != "reserve")


# Parts of every request no compaction can change: shown as fixed with their size, never
# flagged over a budget (a person cannot act on it; the default share of the system zone
# is smaller than the tool schemas of four bundled scenarios).
FIXED_ZONES = {
    "system": "the system prompt and tool schemas: sent whole in every request, no "
              "compaction changes them; the other zones share the rest of the window",
}

# Why a zone can hold more than its budget, in one line each.
OVER_REASONS = {
    "snapshot": "the task snapshot (anchors and tasks) grew past its share",
    "summary": "the rolling summary grew past its share",
    "history": "recent turns past their share: compaction moves the oldest out at the trigger",
    "since": "snapshot updates since it was frozen past their share",
    "hints": "hint blocks past their share",
}


def over_budget(zone: str, tokens: int, budget: Any) -> str:
    """One line on a zone over its budget (empty when it is not, or when it is fixed)."""
    if zone in FIXED_ZONES or not budget or tokens <= int(budget):
        return ""
    reason = OVER_REASONS.get(zone, "past its share")
    return f"{zone} {tokens:,} / {int(budget):,}: {reason}."


def on_free_room(zone: str, tokens: int, budget: Any, input_tokens: int, line: int,
                 line_name: str = "warning band") -> str:
    """One line on a zone past its share while the request is still short of `line`, where
    the warning band (else the trigger) starts: the free room holds it, nothing is wrong.
    The shares are C1's defaults scaled to the window, and at a small one they are smaller
    than one tool result (1 000 tokens of history at 8 000) or the snapshot's goal line, so
    flagging every zone past its share as over budget put red on nearly every turn of a
    healthy run."""
    if not over_budget(zone, tokens, budget):
        return ""
    return (f"{zone} {tokens:,} / {int(budget):,}: past its share, held by free room: the "
            f"request ({input_tokens:,}) is {line - input_tokens:,} tokens short of the "
            f"{line_name} ({line:,}).")


def percent(part: float, whole: float) -> float:
    """`part` as a percentage of `whole`, clamped to 0..100, for CSS widths."""
    if whole <= 0:
        return 0.0
    return round(max(0.0, min(100.0, 100.0 * part / whole)), 2)


def schemas_by_source(session) -> list[dict[str, Any]]:
    """The system zone's tool schemas split into the built-ins' and each tool source's
    (T10), counted as the newest agent request sent them; [] when the session has no tool
    source (every schema is built-in) or no agent request was stored yet."""
    if session.pk is None or session.profile is None or not session.tool_sources.exists():
        return []
    row = (SessionEvent.objects.filter(session=session, type=EventType.MODEL_CALL,
                                       payload__kind="agent")
           .order_by("-seq").values("seq", "payload__request").first())
    tools = tools_of(session, row["seq"], row["payload__request"] or {}) if row else None
    if not tools:
        return []
    counter = TokenCounter(session.profile.model, session.profile.encoding)
    return schema_part(tools, counter.tools).get("by_source", [])


COUNT_NOTES = {
    "exact": "counted with the model's own tokenizer",
    "calibrated": "engine count corrected by the ratio learnt from the provider's usage",
    "estimate": "engine count (cl100k) not yet checked against the provider; a margin is kept",
}


class BudgetPanel(Panel):
    name = "budget"
    title = "Budget"
    template = "drawer/panels/budget.html"
    event_types = (EventType.BUDGET,)
    latest_only = frozenset({EventType.BUDGET})

    def get_context(self, session, events: list[Event]) -> dict[str, Any]:
        if not events:
            return {"budget": None}
        latest = events[-1]  # a BudgetEvent: the panel reads no other type
        window = latest.window or session.window or 0
        zones, budgets = latest.zones, latest.budgets
        input_tokens = latest.input_tokens or sum(zones.get(z, 0) for z in INPUT_ZONES)
        reserve = int(zones.get("reserve", 0))
        trigger, warning = latest.trigger_line, latest.warning_line
        # A zone past its share is over budget only when the request is near its trigger
        # (in the warning band or past the line): then those zones are what compaction
        # will take from. Before that the free room holds them, and they are shown so.
        pressed_from = warning or trigger
        pressed = not pressed_from or input_tokens >= pressed_from
        segments = []
        for zone in INPUT_ZONES:
            tokens, share = int(zones.get(zone, 0)), budgets.get(zone)
            segments.append({
                "zone": zone, "tokens": tokens, "budget": share,
                "width": percent(tokens, window),
                "over": over_budget(zone, tokens, share) if pressed else "",
                "free_room": "" if pressed else on_free_room(
                    zone, tokens, share, input_tokens, pressed_from,
                    "warning band" if warning else "trigger line"),
                "fixed": FIXED_ZONES.get(zone, "")})
        return {
            "budget": {
                "turn": latest.turn, "seq": latest.seq, "window": window,
                "input_tokens": input_tokens, "used_pct": percent(input_tokens, window),
                "segments": segments,
                "reserve": {"tokens": reserve, "budget": budgets.get("reserve"),
                            "width": percent(reserve, window)},
                "free": latest.free,
                "trigger_line": trigger, "trigger_pct": percent(trigger, window),
                "warning_line": warning, "warning_pct": percent(warning, window),
                "band_pct": percent(max(0, trigger - warning), window),
                "over_trigger": bool(trigger) and input_tokens >= trigger,
                "in_warning": bool(warning) and input_tokens >= warning,
                # How the figures were counted (issue 11); events before it have no source.
                "count_source": latest.count_source,
                "count_note": COUNT_NOTES.get(latest.count_source, ""),
                "count_reason": latest.count_reason or "",
                "correction": latest.correction,
                # feature C18: the profile's window is assumed, not known.
                "window_warning": latest.window_warning or "",
                # The system zone's tool schemas per source (T10), as the inspector splits them.
                "schemas": schemas_by_source(session),
            },
        }

    def badge(self, context: dict[str, Any]) -> str:
        budget = context["budget"]
        return f"{budget['used_pct']:.0f}%" if budget else ""
