"""Where history is cut for a compaction, and how a unit of parallel calls comes apart.

A unit is what must stay together in a request (an assistant message and the results of
its tool calls, agents/context/history.py): compaction keeps or folds whole units, never half of
one, because a provider refuses a tool result whose call it cannot see.
"""
from __future__ import annotations

from agents.context.history import Msg, Unit


def split_for_compaction(units: list[Unit], *, keep_tokens: int, keep_rounds: int,
                         emergency: bool) -> int:
    """Index of the first unit to keep: the newest round and what follows always stay."""
    if not units:
        return 0
    # The newest round, looked for from the end: the history's older units are not read
    # (asked every turn, over a history of dozens of units).
    keep_from = next((i for i in range(len(units) - 1, -1, -1) if units[i].is_round),
                     len(units) - 1)
    if emergency:
        return keep_from
    tokens = sum(u.tokens for u in units[keep_from:])
    kept_rounds = sum(1 for u in units[keep_from:] if u.is_round)
    while keep_from > 0:
        unit = units[keep_from - 1]
        if tokens + unit.tokens > keep_tokens or kept_rounds + unit.is_round > keep_rounds:
            break
        keep_from -= 1
        tokens += unit.tokens
        kept_rounds += unit.is_round
    return keep_from


def split_unit(unit: Unit) -> list[Unit]:
    """A unit of parallel tool calls as one unit per call (the assistant message carrying
    only that call), so a summary request can take them a few at a time without ever
    holding a result whose call it does not show."""
    first = unit.messages[0]
    calls = first.data.get("tool_calls") or []
    if len(calls) < 2:
        return [unit]
    results = {m.data.get("tool_call_id"): m for m in unit.messages[1:]}
    pieces = []
    for k, call in enumerate(calls):
        data = {**first.data, "tool_calls": [call]}
        if k:
            data["content"] = None  # the assistant's words go with the first call only
        head = Msg(data=data, tokens=first.tokens, turn=first.turn, ref=first.ref)
        result = results.get(call.get("id"))
        pieces.append(Unit([head] + ([result] if result else [])))
    return pieces
