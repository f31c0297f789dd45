"""Keeping the anchor set current (feature C8; issue 13): what a new statement adds or replaces.

A hard constraint is replaced only when the person says so; conclusions and details are
replaced by a newer one with the same key; details roll off after a few turns.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from agents.store.interface import AnchorRecord
from agents.words.anchors import supersedes
from agents.words.patterns import STOP_WORDS, WORDS_RE


@dataclass
class AnchorChange:
    """One difference; `old` is the existing record itself, the caller deactivates it."""

    action: str  # "added" | "changed" | "removed"
    old: AnchorRecord | None
    new: AnchorRecord | None


def _overlap(a: str, b: str) -> int:
    return len(set(WORDS_RE.findall(a.lower())) & set(WORDS_RE.findall(b.lower())))


_NOT_QUALIFIERS = frozenset("instead wait actually anymore rather okay ok well now".split())


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def _about_the_same(old: AnchorRecord, cand: AnchorRecord) -> bool:
    """False when the new limit names a narrower thing than the old one: "From now on the
    marketing budget is at most 30k EUR" must not replace "The budget is at most 50k
    tokens", though both key max:budget. A word right before the subject in the new
    statement ("marketing", "token") must occur somewhere in the old one."""
    kind, _, subject = cand.key.partition(":")
    if kind not in ("max", "min", "range", "deadline") or not subject.isascii():
        return True
    words = WORDS_RE.findall(cand.text.lower())
    old_words = {_singular(w) for w in WORDS_RE.findall(old.text.lower())}
    for before, word in zip(words, words[1:]):
        if _singular(word) == subject and before not in STOP_WORDS | _NOT_QUALIFIERS \
                and not before[0].isdigit() and _singular(before) not in old_words:
            return False
    return True


# By text: every tool result's conclusions are merged against all active anchors, whose
# dozen texts were normalised the same way at every earlier result.
@lru_cache(maxsize=4096)
def normalized(text: str) -> str:
    """`text` as merge_anchors compares it: spacing and case aside."""
    return " ".join(text.split()).casefold()


def merge_anchors(existing: list[AnchorRecord],
                  candidates: list[AnchorRecord]) -> list[AnchorChange]:
    """What the candidates add to or change in the active set; nothing is mutated.

    Conclusions and details (tiers 2, 3) replace the active one with the same key. A hard
    constraint replaces one only when it says so ("instead", "from now on", "change X to
    Y", 改为 …; see `supersedes`): a shared key alone ("The marketing budget is at most 20k
    EUR." and "The budget is at most 50k tokens." both key max:budget) keeps both, since
    wrongly replacing a constraint loses it and a missed replacement costs one line."""
    active = [a for a in existing if a.active]
    texts = {normalized(a.text) for a in active}
    last_of_key = {c.key: i for i, c in enumerate(candidates) if c.key and c.tier > 1}
    changes: list[AnchorChange] = []
    for i, cand in enumerate(candidates):
        if cand.key and cand.tier > 1 and last_of_key[cand.key] != i:
            continue  # a finding restated within one result: the last statement wins
        norm = normalized(cand.text)
        if norm in texts:
            continue
        same_key = [a for a in active if cand.key and a.key == cand.key]
        if any(a.tier < cand.tier for a in same_key):
            continue  # a detail or conclusion never downgrades a hard constraint
        if cand.tier == 1:
            same_key = ([a for a in same_key if _about_the_same(a, cand)]
                        if supersedes(cand.text) else [])
        # Of several constraints on the same key, the one the statement names best goes.
        old = max(same_key, key=lambda a: (_overlap(a.text, cand.text), active.index(a)),
                  default=None)
        earlier = next((c for c in changes if old is not None and c.new is old), None)
        if earlier is not None:  # replaced within this same message: only the last is new
            earlier.new = cand
        else:
            changes.append(AnchorChange("added" if old is None else "changed", old, cand))
        active = [a for a in active if a is not old] + [cand]
        texts.add(norm)
    return changes


def roll_off(anchors: list[AnchorRecord], current_turn: int,
             keep_turns: int = 5) -> list[AnchorChange]:
    """Tier-3 details stated more than `keep_turns` turns ago leave (caller deactivates)."""
    return [AnchorChange("removed", a, None) for a in anchors
            if a.active and a.tier == 3 and current_turn - a.turn > keep_turns]


def render_anchors(anchors: list[AnchorRecord]) -> str:
    """Active anchors, hard constraints first, one tagged line each."""
    tags = {1: "[T1 constraint]", 2: "[T2 finding]", 3: "[T3 detail]"}
    active = sorted((a for a in anchors if a.active), key=lambda a: (a.tier, a.turn))
    return "\n".join(f"{tags.get(a.tier, f'[T{a.tier}]')} {a.text}" for a in active)
