"""Number formatting for the dashboard and the drawer; every filter returns plain text."""
from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


@register.filter
def tokens(value: Any) -> str:
    """12345 → "12,345"; missing values → "—"."""
    number = _number(value)
    if number is None:
        return "—"
    return f"{round(number):,}"


@register.filter
def money(value: Any) -> str:
    """Dollars with enough decimals that small per-call costs do not read as zero."""
    number = _number(value)
    if number is None:
        return "—"
    if number == 0:
        return "$0"
    return f"${number:,.4f}" if abs(number) < 10 else f"${number:,.2f}"


@register.filter
def percent(value: Any) -> str:
    """0.372 → "37.2 %"."""
    number = _number(value)
    return "—" if number is None else f"{100 * number:.1f} %"


@register.filter
def css_number(value: Any) -> str:
    """A number for a CSS or SVG attribute: always a dot, never a locale's comma."""
    number = _number(value)
    return "0" if number is None else f"{number:.2f}".rstrip("0").rstrip(".")


@register.filter
def signed(value: Any) -> str:
    """-1200 → "−1,200", 300 → "+300", 0 → "0"."""
    number = _number(value)
    if number is None:
        return "—"
    if number == 0:
        return "0"
    return f"+{round(number):,}" if number > 0 else f"−{abs(round(number)):,}"


@register.filter
def as_json(value: Any) -> str:
    """Compact JSON of a value (tool arguments); escaped by the template like any text.

    Models send tool arguments as a JSON string; it is decoded first so it does not
    show up quoted twice. A string that is not JSON is shown as it is.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


@register.filter
def would_cost(session: Any) -> dict[str, Any] | None:
    """For a session that costs nothing (simulated model, or a profile without prices):
    what it would have cost at the chosen named price table (TASKOS_PRICE_TABLE), as
    {"table", "cost"}; None for a priced profile (its cost is real) or before any state
    was saved."""
    from taskos.runs.prices import chosen_table, session_cost_at, unpriced

    if not unpriced(session.profile):
        return None
    table = chosen_table()
    cost = session_cost_at(session, table)
    return None if cost is None else {"table": table, "cost": cost}
