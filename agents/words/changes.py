"""Which of the person's constraints a later message of theirs may have changed, and which
pairs may contradict each other (feature C19), decided without any signal-word list.

A correction comes in any wording and any language ("make it 5 pages", "预算调整为不超过8万元",
"los importes en francos"): a list of words such as "instead" or "改为" misses most of them,
and a constraint it misses stays listed as in force next to its correction. So the engine
does not try to decide. A later sentence of the person's that shares a long content mark
with a constraint, or half the marks of the shorter (agents.words.marks: words, CJK
character pairs; figures left out, since a correction usually changes exactly the
figure) is taken to be about the same thing; the
snapshot then lists the constraint with that sentence under it and says the later one
wins, and both stay verbatim in the person's words. Two such constraints of one message
that say the same words around different figures may contradict each other: both are
shown, neither dropped.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from agents.store.interface import AnchorRecord
from agents.words.anchors import sentences
from agents.words.marks import marks, plain

PERSON_ANCHOR_SOURCES = ("user", "goal", "scenario")  # extracted from the person's messages
_FIGURE = re.compile(r"\d+(?:[.,]\d+)*")
SHARED = 0.5  # the share of the shorter text's marks the other must repeat
LONG_MARK = 5  # letters of a mark long enough to name what a constraint is about


@lru_cache(maxsize=4096)
def topic(text: str) -> frozenset[str]:
    """The content marks of `text`, figures left out ("50k" is its figure and a unit)."""
    return frozenset(marks(plain(_FIGURE.sub(" ", text))))


@lru_cache(maxsize=4096)
def figures(text: str) -> frozenset[str]:
    return frozenset(_FIGURE.findall(text))


def related(constraint: str, sentence: str) -> bool:
    """True when the two share a long mark (a word of five letters or more, or a pair of
    CJK characters: the thing a limit is about, "pages", "palabras", "预算"), or half the
    marks of the shorter. Short words ("must", "most") are shared by chance."""
    mine, theirs = topic(constraint), topic(sentence)
    shared = mine & theirs
    if any(len(m) >= LONG_MARK or not m.isascii() and len(m) == 2 for m in shared):
        return True
    return bool(shared) and len(shared) >= SHARED * min(len(mine), len(theirs))


def _flat(text: str) -> str:
    return " ".join(text.split()).rstrip(".!?;。！？；").casefold()


@dataclass(frozen=True)
class LaterMessage:
    turn: int
    text: str


@dataclass(frozen=True)
class Change:
    """A constraint and the newest later sentence of the person's about the same thing."""

    constraint: str
    turn: int
    sentence: str


def later_changes(anchors: list[AnchorRecord], messages: list[LaterMessage]) -> list[Change]:
    """Active tier-1 constraints read from the person's messages for which a later message
    has a sentence about the same thing (not the constraint itself)."""
    return list(_later_changes(
        tuple((a.text, a.turn) for a in anchors
              if a.active and a.tier == 1 and a.source in PERSON_ANCHOR_SOURCES),
        tuple((m.turn, m.text) for m in messages)))


@lru_cache(maxsize=64)
def _later_changes(constraints: tuple[tuple[str, int], ...],
                   messages: tuple[tuple[int, str], ...]) -> tuple[Change, ...]:
    found: list[Change] = []
    for text, turn in constraints:
        flat = _flat(text)
        newest: Change | None = None
        for msg_turn, msg_text in messages:
            if msg_turn <= turn or flat in _flat(msg_text):
                continue  # not later, or the same constraint said again
            for sentence in sentences(msg_text):
                sentence = sentence.strip()
                if sentence and related(text, sentence):
                    newest = Change(text, msg_turn, sentence)
        if newest is not None:
            found.append(newest)
    return tuple(found)


def contradictions(anchors: list[AnchorRecord]) -> list[tuple[str, str]]:
    """Pairs of active tier-1 constraints of one message of the person's that are about
    the same thing and state different figures: they may not both hold."""
    hard = [a for a in anchors
            if a.active and a.tier == 1 and a.source in PERSON_ANCHOR_SOURCES]
    return list(_contradictions(tuple((a.text, a.turn) for a in hard)))


@lru_cache(maxsize=64)
def _contradictions(hard: tuple[tuple[str, int], ...]) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    for i, (a, turn_a) in enumerate(hard):
        for b, turn_b in hard[i + 1:]:
            fig_a, fig_b = figures(a), figures(b)
            if turn_a != turn_b or not fig_a or not fig_b or fig_a == fig_b:
                continue
            # The same words around the figures, and (where a text has several) one figure
            # in common: "section 6 … 106 words" and "section 6 … 156 words" collide,
            # "section 5 … 105 words" is another section.
            if topic(a) == topic(b) and (len(fig_a) == len(fig_b) == 1 or fig_a & fig_b):
                pairs.append((a, b))
    return tuple(pairs)
