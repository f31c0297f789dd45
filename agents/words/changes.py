"""Whether a later sentence of the person's is about the same thing as an earlier one, and
so may have changed it (feature C19), decided without any signal-word list.

A correction comes in any wording and any language ("make it 5 pages", "预算调整为不超过8万元",
"los importes en francos"): a list of words such as "instead" or "改为" misses most of them,
and a constraint it misses stays listed as in force next to its correction. So the engine
does not try to decide. A later sentence of the person's that shares a long content mark
with an earlier one, or half the marks of the shorter (agents.words.marks: words, CJK
character pairs; figures left out, since a correction usually changes exactly the
figure) is taken to be about the same thing; the snapshot then lists the earlier one with
that sentence under it and says the later one wins, and both stay verbatim in the
person's words (agents.words.in_force).
"""
from __future__ import annotations

import re
from functools import lru_cache

from agents.words.marks import marks, plain

_FIGURE = re.compile(r"\d+(?:[.,]\d+)*")
SHARED = 0.5  # the share of the shorter text's marks the other must repeat
LONG_MARK = 5  # letters of a mark long enough to name what a constraint is about


@lru_cache(maxsize=4096)
def topic(text: str) -> frozenset[str]:
    """The content marks of `text`, figures left out ("50k" is its figure and a unit)."""
    return frozenset(marks(plain(_FIGURE.sub(" ", text))))


def related(constraint: str, sentence: str) -> bool:
    """True when the two share a long mark (a word of five letters or more, or a pair of
    CJK characters: the thing a limit is about, "pages", "palabras", "预算"), or two marks
    that are half those of the shorter. Short words ("must", "most") are shared by chance."""
    mine, theirs = topic(constraint), topic(sentence)
    shared = mine & theirs
    if any(len(m) >= LONG_MARK or not m.isascii() and len(m) == 2 for m in shared):
        return True
    # One short word in common ("most", "rows" …) is chance; two, and half the shorter's
    # marks, name a subject.
    return len(shared) >= 2 and len(shared) >= SHARED * min(len(mine), len(theirs))
