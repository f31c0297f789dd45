"""What a run would have cost at the benchmark's named price tables (feature W9).

A simulated session, or one on a profile without prices, costs $0; the tokens it sent
still say what a real provider would have charged. These figures are the benchmark's
(agents PRICE_TABLES, per call, the cache-write rule included) and are always shown
with the table's name, never as the session's cost.
"""
from __future__ import annotations

from typing import Any, Iterable

from django.conf import settings
from django.core import checks

from agents import PRICE_TABLES

DEFAULT_TABLE = "openai-like"


def chosen_table() -> str:
    """The table the deployment chose (TASKOS_PRICE_TABLE); the default one when the name
    is unknown, which the system check below reports."""
    name = getattr(settings, "TASKOS_PRICE_TABLE", DEFAULT_TABLE)
    return name if name in PRICE_TABLES else DEFAULT_TABLE


def table_named(name: str | None) -> str:
    """`name` when it is one of the tables, else the chosen one."""
    return name if name in PRICE_TABLES else chosen_table()


def check_price_table(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """taskos.E101: TASKOS_PRICE_TABLE names no table. Registered by the runs app's
    AppConfig.ready(), so `manage.py check` runs it whether or not anything imported this
    module first (registered here at import, a bare `check` never saw it)."""
    # A typo in the setting would otherwise show every would-be cost at another table
    # than the one the operator asked for, without a word.
    name = getattr(settings, "TASKOS_PRICE_TABLE", DEFAULT_TABLE)
    if name in PRICE_TABLES:
        return []
    return [checks.Error(f"TASKOS_PRICE_TABLE={name!r} is not a price table",
                         hint="use one of: " + ", ".join(PRICE_TABLES), id="taskos.E101")]


def unpriced(profile: Any) -> bool:
    """The profile charges nothing (the simulated model, or no prices set)."""
    return profile is None or not any(float(getattr(profile, field, 0) or 0) for field in
                                      ("price_input", "price_cached_input", "price_output"))


def cost_at(calls: Iterable[Any], table: str) -> float:
    """Dollars the calls (ModelCall events or their figures) would cost at `table`; calls
    the provider refused were never charged. A call whose provider reported what it read
    from and wrote to a breakpoint cache is billed by that, as the engine's report does."""
    prices = PRICE_TABLES[table]
    return round(sum(prices.cost(c.input_tokens, c.cached_tokens, c.output_tokens,
                                 _breakpoint_figures(c))
                     for c in calls if not getattr(c, "refused", False)), 6)


def _breakpoint_figures(call: Any) -> tuple[int, int] | None:
    written = getattr(call, "cache_write_tokens", None)
    return None if written is None else (getattr(call, "cache_read_tokens", None) or 0, written)


def costs_at_tables(calls: list[Any]) -> list[dict[str, Any]]:
    """[{"table", "cost", "chosen"}] for every table, the chosen one first, the others in
    the benchmark's order."""
    first = chosen_table()
    names = [first] + [name for name in PRICE_TABLES if name != first]
    return [{"table": name, "cost": cost_at(calls, name), "chosen": name == first}
            for name in names]


def session_cost_at(session: Any, table: str) -> float | None:
    """The session's running cost at `table` as the engine's report keeps it (updated each
    turn, with the session's state); None when no state was saved yet."""
    report = ((getattr(session, "engine_state", None) or {}).get("companions") or {}).get("report")
    cost = (report or {}).get("cost") or {}
    return float(cost[table]) if table in cost else None
