"""Cost (feature W9): tokens and money per zone, per turn and per session."""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import Q

from agents import Compaction, Event, EventType, ModelCall
from taskos.drawer.base import Panel
from taskos.drawer.panels.budget import INPUT_ZONES
from taskos.runs.prices import costs_at_tables
from taskos.drawer.tool_costs import tool_costs

TURNS_SHOWN = 8


def compacted_away_share(calls: list[ModelCall],
                         compactions: list[Compaction]) -> tuple[int, float]:
    """History tokens sent that a later compaction removed, and their share of all input.

    A compaction removes (before - after) / before of the history zone; history sent
    at a call is counted as removed in the proportion the compactions after it removed.
    """
    fractions = []
    for ev in compactions:
        before = int(ev.before.get("history", 0))
        after = int(ev.after.get("history", 0))
        fractions.append((ev.seq, (before - after) / before if before > after else 0.0))
    # One pass from the newest call back, multiplying in each compaction once the calls
    # are older than it: linear in calls + compactions, not their product.
    fractions.sort()
    wasted = 0.0
    total = 0
    kept = 1.0
    pending = len(fractions)
    for call in sorted(calls, key=lambda ev: -ev.seq):
        while pending and fractions[pending - 1][0] > call.seq:
            pending -= 1
            kept *= 1 - fractions[pending][1]
        total += call.input_tokens
        if call.kind == "summary":
            continue
        wasted += int(call.zones.get("history", 0)) * (1 - kept)
    return int(wasted), (wasted / total if total else 0.0)


class CostPanel(Panel):
    name = "cost"
    title = "Cost"
    template = "drawer/panels/cost.html"
    event_types = (EventType.MODEL_CALL, EventType.COMPACTION, EventType.TOOL_RESULT)
    # Of compactions, the history each removed (`compacted_away_share`) only; of tool
    # results, what `tool_costs` sums (not their previews: ~1 000 payloads decoded whole
    # on a finished long-1000 page).
    newest_read = {EventType.COMPACTION: 0, EventType.TOOL_RESULT: 0}
    older_keys = {EventType.COMPACTION: ("before", "after"),
                  EventType.TOOL_RESULT: ("name", "error", "kept_tokens", "original_tokens")}

    def older_read(self, event_type: str) -> Q:
        # Every row. Not Q(): an empty Q or-ed with another panel's reads as that one alone.
        return Q(pk__isnull=False)

    def get_context(self, session, events: list[Event]) -> dict[str, Any]:
        profile = session.profile
        price_in = float(profile.price_input or 0) if profile else 0.0
        price_cached = float(profile.price_cached_input or 0) if profile else 0.0
        price_out = float(profile.price_output or 0) if profile else 0.0
        calls = [ev for ev in events if isinstance(ev, ModelCall)]
        zone_tokens: dict[str, int] = defaultdict(int)
        zone_cached: dict[str, int] = defaultdict(int)
        turns: dict[int, dict[str, Any]] = {}
        totals = {"input": 0, "cached": 0, "output": 0, "cost": 0.0, "summary_input": 0}
        for ev in calls:
            # Cached tokens go to zones in layout order (provider caches match a prefix),
            # summed in the same pass: a finished long-1000 page has ~1 000 calls, and a
            # converted dict and a split dict a call were most of this panel's time.
            zones, cached = ev.zones, ev.cached_tokens
            for zone in INPUT_ZONES:
                tokens = int(zones.get(zone) or 0)
                zone_tokens[zone] += tokens
                take = min(tokens, cached)
                zone_cached[zone] += take
                cached -= take
            totals["input"] += ev.input_tokens
            totals["cached"] += ev.cached_tokens
            totals["output"] += ev.output_tokens
            totals["cost"] += ev.cost
            if ev.kind == "summary":
                totals["summary_input"] += ev.input_tokens
            turn = turns.setdefault(ev.turn, {"turn": ev.turn, "calls": 0, "tokens": 0, "cost": 0.0})
            turn["calls"] += 1
            turn["tokens"] += ev.input_tokens
            turn["cost"] += ev.cost
        zone_rows = []
        for zone in INPUT_ZONES:
            fresh = zone_tokens[zone] - zone_cached[zone]
            zone_rows.append({"zone": zone, "tokens": zone_tokens[zone], "cached": zone_cached[zone],
                              "cost": (fresh * price_in + zone_cached[zone] * price_cached) / 1e6,
                              "share": zone_tokens[zone] / totals["input"] if totals["input"] else 0})
        wasted, wasted_share = compacted_away_share(
            calls, [ev for ev in events if isinstance(ev, Compaction)])
        return {
            "calls": len(calls), "totals": totals, "zones": zone_rows,
            "turns": sorted(turns.values(), key=lambda t: -t["turn"])[:TURNS_SHOWN],
            "per_turn": totals["input"] / len(turns) if turns else 0,
            "output_cost": totals["output"] * price_out / 1e6,
            "wasted": wasted, "wasted_share": wasted_share,
            "simulated": bool(profile and profile.simulated),
            "priced": bool(price_in or price_cached or price_out),
            # Unpriced: what the same calls would have cost at the benchmark's tables.
            "would_cost": [] if price_in or price_cached or price_out
            else costs_at_tables(calls),
            "profile": profile,
            **tool_costs(events),  # per tool and per tool source (T10)
        }

    def badge(self, context: dict[str, Any]) -> str:
        return f"${context['totals']['cost']:.4f}" if context["priced"] else ""
