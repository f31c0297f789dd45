"""The clearing tier (feature C20): old tool results replaced in place, no model call.

A cleared result keeps its message (so the call before it still has its answer) but its
content becomes one line: the tool, the size of what it returned, the head of the result
(or the statistics line of a table) and the archive ref that reads it back whole. The
call's arguments are not repeated: the call, with its arguments whole, is the message
right before the digest in every request that carries it (a round is kept or folded as a
unit), and repeating them cost every cleared result up to 80 characters again. The archive is never touched, so what was cleared stays exact there.

Each tool's boundary declaration (feature C10) says how long its results stay: the
newest `keep_last` results of the tool are kept, a result is cleared only once
`clear_after_rounds` rounds came after it, and `never_clear` keeps them all. Results in the
recent rounds are never cleared, and neither is a result whose digest would save little.

All the results that may go are cleared together: a request's cached prefix ends at the
first message that changed, so one batch restarts the cache once, where clearing each
result as it ages would restart it on every turn.
"""
from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from typing import Any, Callable

from agents.context.history import Msg, Unit, add_grouped
from agents.counting.tokens import TokenCounter
from agents.tools.base import ToolBoundary

CLEARED_MARK = "[cleared:"
HEAD_CHARS = 80  # of the result, whitespace collapsed
MIN_SAVING = 48  # tokens a result must save to be worth a digest (and a changed prefix)
STATS_HEAD = "Statistics over all "  # agents/tools/tabular.py's statistics line

Retention = Callable[[str], ToolBoundary]  # tool name -> its boundary declaration


def is_cleared(msg: Msg) -> bool:
    return _cleared_result(msg.data)


def _cleared_result(data: dict[str, Any]) -> bool:
    """is_cleared on a message's dict (the loops below read each message's dict once)."""
    content = data.get("content")
    return (data.get("role") == "tool" and isinstance(content, str)
            and content.startswith(CLEARED_MARK))


def _short(text: str, keep: int) -> str:
    """`text` on one line, cut at the last whole word within `keep` characters: a digest
    quotes only words that are in the result (the compaction audit looks them up)."""
    text = " ".join(text.split())
    if len(text) <= keep:
        return text
    cut = text[:keep + 1].rsplit(" ", 1)[0] if " " in text[:keep + 1] else text[:keep]
    return cut.rstrip(" ,;:")


def digest(name: str, msg: Msg) -> str:
    """The one line that stands for a cleared result. Its size is written "5.5k chars":
    an engine's measure, not a figure of the result a summary could pass on as one."""
    text = msg.text
    at = text.find(STATS_HEAD)
    while at > 0 and text[at - 1] != "\n":  # the line must start with it
        at = text.find(STATS_HEAD, at + 1)
    stats = text[at:].split("\n", 1)[0] if at >= 0 else ""
    # Only the head is read: a result may be megabytes long.
    shown = (_short(stats, HEAD_CHARS) if stats
             else json.dumps(_short(text[:HEAD_CHARS * 4], HEAD_CHARS), ensure_ascii=False))
    return (f"{CLEARED_MARK} {name} → "
            f"{len(text) / 1000:.1f}k chars, begins {shown}; "
            f"whole: read_ref(ref=\"{msg.ref}\")]")


@dataclass
class Clearing:
    """One batch: the history with its cleared results, and what left the context."""

    history: list[Msg]
    cleared: list[Msg] = field(default_factory=list)  # the results as they were
    digests: list[str] = field(default_factory=list)  # what stands for each now
    saved: int = 0  # tokens
    # `history` in units: the units planned on (`of`), a new Unit where a result was
    # cleared (their indexes in `changed`).
    units: list[Unit] = field(default_factory=list)
    changed: list[int] = field(default_factory=list)
    of: list[Unit] | None = field(default=None, repr=False, compare=False)

    @property
    def refs(self) -> list[str]:
        return [m.ref for m in self.cleared]

    @property
    def turns(self) -> list[int]:
        turns = [m.turn for m in self.cleared]
        return [min(turns), max(turns)] if turns else []


def _calls(unit: Unit) -> dict[str, str]:
    """tool_call_id -> tool name for the calls of a unit's first message."""
    return {call.get("id"): str((call.get("function") or {}).get("name") or "")
            for call in unit.messages[0].data.get("tool_calls") or []}


def plan_clearing(units: list[Unit], keep_from: int, retention: Retention,
                  counter: TokenCounter) -> Clearing | None:
    """Every result before unit `keep_from` that its tool's retention lets go, cleared;
    None when none may go."""
    # One pass over the messages, newest first: the rounds after each unit, and per
    # result its tool's name and whether it is cleared already (a request of 1 000 rounds
    # holds dozens of units; this runs on every turn that clears).
    rounds_after = [0] * len(units)
    seen = 0
    newest: dict[str, int] = {}  # per tool, results met so far from the newest back
    keep: set[int] = set()  # ids of the results their tool's keep_last protects
    named: dict[int, str] = {}
    policies: dict[str, ToolBoundary] = {}
    # The units holding a result not cleared yet: only they can change. Most of a long
    # history is rounds cleared already, which the second pass takes as they are.
    open_units: set[int] = set()
    for i in range(len(units) - 1, -1, -1):
        rounds_after[i] = seen
        messages = units[i].messages
        results = [m for m in messages if m.data.get("role") == "tool"]
        if not results:
            continue
        seen += 1  # a round: a unit with a tool result (Unit.is_round)
        calls: dict[str, str] | None = None  # read at the first result not cleared
        for msg in reversed(results):
            if _cleared_result(msg.data):
                continue  # neither counted nor cleared again: its tool does not matter
            open_units.add(i)
            if msg is messages[0]:
                continue  # a unit's first message is never one of its call's results
            if calls is None:
                calls = _calls(units[i])
            name = calls.get(msg.data.get("tool_call_id"), "")
            named[id(msg)] = name
            newest[name] = newest.get(name, 0) + 1
            policy = policies.get(name)
            if policy is None:
                policy = policies[name] = retention(name)
            if newest[name] <= policy.keep_last:
                keep.add(id(msg))
    out: list[Msg] = []
    cleared: list[Msg] = []
    digests: list[str] = []
    saved = 0
    new_units: list[Unit] = []
    changed: list[int] = []
    for i, unit in enumerate(units):
        if i >= keep_from or i not in open_units:
            out.extend(unit.messages)
            new_units.append(unit)
            continue
        before = len(cleared)
        for msg in unit.messages:
            if (msg.data.get("role") != "tool" or id(msg) in keep or not msg.ref
                    or _cleared_result(msg.data)):
                out.append(msg)
                continue
            name = named.get(id(msg), "")
            policy = policies.get(name) or retention(name)
            if policy.never_clear or rounds_after[i] < policy.clear_after_rounds:
                out.append(msg)
                continue
            data: dict[str, Any] = {**msg.data, "content": digest(name, msg)}
            short = Msg.build(counter, data, msg.turn, msg.ref)
            if msg.tokens - short.tokens < MIN_SAVING:
                out.append(msg)
                continue
            out.append(short)
            cleared.append(msg)
            digests.append(data["content"])
            saved += msg.tokens - short.tokens
        if len(cleared) > before:  # a digest keeps its result's role: the unit stays one
            new_units.append(Unit(out[len(out) - len(unit.messages):]))
            changed.append(i)
        else:
            new_units.append(unit)
    if not cleared:
        return None
    return Clearing(history=out, cleared=cleared, digests=digests, saved=saved,
                    units=new_units, changed=changed, of=units)


def clearable_tokens(units: list[Unit], keep_from: int) -> int:
    """At most what a batch could free before unit `keep_from` (retention aside): the
    tokens of the results not cleared yet. Cheap: no digest is written."""
    return sum(m.tokens for u in units[:keep_from] for m in u.messages
               if m.role == "tool" and m.ref and not is_cleared(m))


def all_cleared(unit: Unit) -> bool:
    return unit.is_round and all(is_cleared(m) for m in unit.messages if m.role == "tool")


def residue(units: list[Unit]) -> int:
    """Tokens of the rounds whose every result was cleared: what clearing cannot shrink
    any further, and what a summary folds."""
    return sum(u.tokens for u in units if all_cleared(u))


class HistoryView:
    """One history's units with what the triggers read of them, in one pass over its
    messages: the rounds not wholly cleared, the residue (residue()) and the tokens a batch
    could free before each unit (clearable_tokens())."""

    def __init__(self, key: tuple[Msg, ...], units: list[Unit]) -> None:
        self.key, self.units = key, units
        self._clearable = [0]  # running sums: before unit i, clearable_tokens(units, i)
        self._live: list[int] = []  # per unit: 1 for a round with a result not cleared
        self._residue: list[int] = []  # per unit: its tokens when every result is cleared
        self._read(units)

    def _read(self, units: list[Unit]) -> None:
        running, clearable = self._clearable, self._clearable[-1]
        for unit in units:
            results = [m for m in unit.messages if m.data.get("role") == "tool"]
            cleared = [_cleared_result(m.data) for m in results]
            done = bool(results) and all(cleared)
            self._residue.append(sum(m.tokens for m in unit.messages) if done else 0)
            self._live.append(1 if results and not done else 0)
            clearable += sum(m.tokens for m, gone in zip(results, cleared)
                             if m.ref and not gone)
            running.append(clearable)
        self.live_rounds, self.residue = sum(self._live), sum(self._residue)

    def grown(self, key: tuple[Msg, ...]) -> "HistoryView | None":
        """The view of history `key` when it is this view's history with messages appended
        (most turns add an answer and its results), else None. Only the appended messages
        and this history's last unit, which they may join, are read: the older units are
        this view's own, so a turn does not re-read a history of dozens of rounds."""
        old = self.key
        if len(key) < len(old) or key[:len(old)] != old:
            return None
        view = HistoryView.__new__(HistoryView)
        reread = 1 if self.units else 0  # the last unit, copied: this view keeps its own
        kept = len(self.units) - reread
        tail = [Unit(list(self.units[-1].messages))] if reread else []
        for msg in key[len(old):]:
            add_grouped(tail, msg)
        view.key, view.units = key, self.units[:kept] + tail
        view._clearable = self._clearable[:kept + 1]
        view._live, view._residue = self._live[:kept], self._residue[:kept]
        view._read(tail)
        return view

    def cleared(self, key: tuple[Msg, ...], plan: Clearing) -> "HistoryView | None":
        """The view of history `key` when it is `plan`'s history and `plan` was made on
        this view's units (a clearing batch applied): only the units the batch changed
        are read, the running sums added up again. None otherwise."""
        units = plan.units
        if plan.of is not self.units or not plan.changed or tuple(plan.history) != key:
            return None
        view = HistoryView.__new__(HistoryView)
        view.key, view.units = key, units
        view._live, view._residue = list(self._live), list(self._residue)
        running = self._clearable
        each = [after - before for before, after in zip(running, running[1:])]
        for i in plan.changed:
            part = HistoryView.__new__(HistoryView)
            part._clearable, part._live, part._residue = [0], [], []
            part._read([units[i]])
            view._live[i], view._residue[i], each[i] = (part._live[0], part._residue[0],
                                                         part._clearable[1])
        view._clearable = [0]
        for tokens in each:
            view._clearable.append(view._clearable[-1] + tokens)
        view.live_rounds, view.residue = sum(view._live), sum(view._residue)
        return view

    def clearable(self, keep_from: int) -> int:
        """clearable_tokens(self.units, keep_from)."""
        return self._clearable[max(0, min(keep_from, len(self.units)))]

    def first_clearable(self, keep_from: int) -> int:
        """The first unit before `keep_from` holding a result a clear may take; `keep_from`
        when none does (the running sums only grow: a bisection finds it)."""
        keep_from = max(0, min(keep_from, len(self.units)))
        return min(keep_from, bisect.bisect_right(self._clearable, 0, 0, keep_from + 1) - 1)
