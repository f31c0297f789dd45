"""Sentences said many times with only a figure changed, carried once (feature C19).

A long brief may number its notes ("(nota 17) Los clientes valoran …") or repeat one line
for many items ("Room 12 must be cleaned.", "Room 14 must be cleaned."): hundreds of
distinct sentences whose words are the same but for one figure. Sent one by one they take
their words hundreds of times; the first thing cut to fit a small window is then most of
them. Given once, with their figures listed in braces, nothing is lost:

    (nota {0,7,9}) Los clientes valoran la rapidez de entrega por encima del precio.

stands for "(nota 0) Los clientes …", "(nota 7) Los clientes …" and "(nota 9) Los
clientes …" exactly. The grouping is by layout only (digit runs), never by the words, so
it is the same in every language; a sentence said again word for word is given once too.

The words check (agents.compaction.words_check) reads the braces back: a sentence is in a
request when the text before and after one of its figures surrounds a brace list holding
that figure there, in a block that carries GROUPED_NOTE. Nothing is counted as kept that
cannot be read back word for word.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

GROUPED_NOTE = ('A sentence the person wrote several times with only one figure changed is '
                'given once, with its figures in braces: "item {1,2}" stands for "item 1" '
                'and "item 2", each said by the person.')
_FIGURE = re.compile(r"\d+")
# A sentence with more runs of digits than this is a table row or pasted figures, not a
# note said again with one figure changed: it is not split into frames, each of which
# copies most of the sentence (a 100 000-character line of figures took seconds).
MAX_FIGURES = 12
_BRACES = re.compile(r"\{(\d+(?:,\d+)+)\}")


@dataclass
class Item:
    """One entry of a grouped message: a sentence, or sentences that differ in one figure
    (`prefix`, their `figures` in order, `suffix`), and the indexes they stand for."""

    members: list[int]  # of a group, one per figure, in the same order
    prefix: str
    figures: list[str]
    suffix: str = ""
    again: list[int] = field(default_factory=list)  # the same sentence said again

    def render(self, figures: list[str] | None = None) -> str:
        shown = self.figures if figures is None else figures
        if len(self.figures) < 2:
            return self.prefix
        if len(shown) == 1:
            return f"{self.prefix}{shown[0]}{self.suffix}"
        return f"{self.prefix}{{{','.join(shown)}}}{self.suffix}"


def group(parts: list[str]) -> list[Item]:
    """`parts` (sentences, stripped, in order) as items in the order of their first
    member: a sentence said again word for word joins the first (it is one sentence said
    twice), and sentences equal but for one run of digits form one item when at least two
    share that frame (each sentence goes to its frame with the most members, the first of
    its figures among equals). A sentence of more than MAX_FIGURES figures stands alone."""
    first: dict[str, int] = {}
    frames: dict[tuple[str, str], list[int]] = {}
    runs: dict[int, list[tuple[str, str, str]]] = {}
    for i, part in enumerate(parts):
        if part in first:
            continue
        first[part] = i
        found = list(_FIGURE.finditer(part))
        runs[i] = [(part[:m.start()], m.group(), part[m.end():])
                   for m in (found if len(found) <= MAX_FIGURES else ())]
        for prefix, _figure, suffix in runs[i]:
            frames.setdefault((prefix, suffix), []).append(i)
    placed: dict[int, Item] = {}
    items: list[Item] = []
    for i, part in enumerate(parts):
        if first[part] != i:
            placed[first[part]].again.append(i)
            continue
        best = max(runs[i], key=lambda r: len(frames[(r[0], r[2])]), default=None)
        if best is None or len(frames[(best[0], best[2])]) < 2:
            placed[i] = Item([i], part, [])
            items.append(placed[i])
            continue
        prefix, figure, suffix = best
        home = next((item for j in frames[(prefix, suffix)] if (item := placed.get(j))
                     and item.figures and (item.prefix, item.suffix) == (prefix, suffix)),
                    None)
        if home is None:
            home = Item([], prefix, [], suffix)
            items.append(home)
        home.members.append(i)
        home.figures.append(figure)
        placed[i] = home
    return items


def grouped(parts: list[str]) -> str | None:
    """`parts` joined with each item once, or None when grouping saves nothing (no sentence
    said twice, no two sentences that differ in one figure)."""
    items = group(parts)
    if len(items) == len(parts):
        return None
    return " ".join(item.render() for item in items)


def has_groups(text: str) -> bool:
    return _BRACES.search(text) is not None
