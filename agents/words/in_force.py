"""What the person asked that is in force, read from their own sentences (feature C19).

The snapshot's list of requirements is a view of the person's words, not a second source
that can disagree with them: every sentence the person wrote (goal, follow-ups, edits,
pins) is in it unless it is pasted material (agents.words.quoted), a later edit replaced
it, or a later message of theirs may have changed it (agents.words.changes), in which case
it is shown with that later sentence instead of alone. No pattern decides what is listed:
a sentence in Spanish, Japanese or German is there as one in English is. The anchor
patterns only add a label ("hard constraint"), and a signal word only says a later
sentence is clearly a replacement, which spares the agent a hint.

Two requirements in force that state different figures of the same unit ("at most 300
words", later "at least 800 words"; "5万元" and "8万元") may not both hold. They are found
without any language's words, across messages as well as within one, shown and told to
the agent; neither is dropped. Two such sentences are about one item when their other
figures are the same (an item's number, wherever it stands) and their words do not name
two things (same_item): two items of a list ("The summary takes 3 pages", "The appendix
takes 5 pages") are no contradiction.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from agents.words.anchors import supersedes
from agents.words.changes import related, topic
from agents.words.condensing import units
from agents.words.quoted import own_text

# A sentence ends at a line break or after ., !, ?, ; followed by a space (so "1.5" and
# "e.g.5" stay whole), or after the CJK full stops; a list item's number stays with it.
_SENTENCE_END = re.compile(r"\n+|(?<=[.!?;])[ \t]+|(?<=[。！？；])")
_LIST_MARK = re.compile(r"^\s*(?:[-*•]\s+|\d+[.)]\s+|\d+、\s*)")
_ONLY_MARK = re.compile(r"^\s*(?:[-*•]|\d+[.)、])\s*$")
# A figure with the unit written right after it: "300 words", "50k tokens", "5万元",
# "10 Seiten", "3ページ". A multiplier (k, M, 万 …) belongs to the value.
_MEASURE = re.compile(r"(?<![A-Za-z\d_.,])(?P<num>\d+(?:[.,]\d+)*)"
                      r"(?P<mult>[kKM万千亿](?![A-Za-z]))?[ \t]?(?P<unit>[^\W\d_]+)?")
_MULTIPLIER = {"k": 1e3, "K": 1e3, "M": 1e6, "千": 1e3, "万": 1e4, "亿": 1e8}
_FIGURE = re.compile(r"\d+(?:[.,]\d+)*")
UNIT_CHARS = 12
# A unit written in letters is a word of three or more ("words", "Seiten", "pages"): "of",
# "de", "zu" after a figure name a part ("Part 3 of the draft"), not a measure.
MIN_UNIT_LETTERS = 3
SPACED_SCRIPTS = ("LATIN", "CYRILLIC", "GREEK")
MAX_SHARING = 8  # sentences of a message one figure may tie together as naming one thing
LONG_WORD = 5  # letters of a word that names a thing ("pages", "informe"), not grammar
SUBJECT_SHARE = 0.5  # two sentences about one item share more than this of the smaller subject

HEADING = ("In force besides the goal (the person's own sentences, oldest first; a later "
           "one wins where they differ):")
POINTER = "→"  # an item that points at where the sentences are, instead of repeating them
HARD_LABEL = "hard constraint"
NO_WORDS_LABEL = "no words, kept as written"
UNANCHORED_LABEL = "says it replaces something the person never said before"


@dataclass(frozen=True)
class Said:
    """One sentence of the person's, verbatim, with the message it came from."""

    index: int  # the message's place among the person's messages
    turn: int
    source: str
    text: str


@dataclass(frozen=True)
class Conflict:
    """Two sentences in force that give different figures of the same unit."""

    first: Said
    second: Said
    unit: str
    values: tuple[str, str]


@dataclass(frozen=True)
class Changed:
    """A sentence and the newest later sentence of the person's about the same thing."""

    earlier: Said
    later: Said


@dataclass(frozen=True)
class PersonView:
    """The person's words as the snapshot lists them."""

    in_force: tuple[Said, ...]
    changed: tuple[Changed, ...]
    conflicts: tuple[Conflict, ...]
    unanchored: frozenset[Said]  # "instead"-like sentences with nothing earlier to change
    messages: tuple[tuple[int, str, str], ...]  # per message: turn, source, ref


@dataclass(frozen=True)
class Message:
    turn: int
    source: str
    ref: str
    text: str


def split_sentences(text: str) -> list[str]:
    """`text` cut into sentences, verbatim, a list item's number kept with its item and
    lines of only punctuation (a table's rule) left out."""
    out: list[str] = []
    pending = ""
    for piece in _SENTENCE_END.split(text):
        if _ONLY_MARK.match(piece):
            pending += piece.strip() + " "
            continue
        piece = (pending + piece.strip()).strip()
        pending = ""
        if piece and any(_counts(ch) for ch in piece):
            out.append(piece)
    return out


def _counts(ch: str) -> bool:
    """A letter, a digit or a symbol such as an emoji: something a person wrote to say."""
    return ch.isalnum() or unicodedata.category(ch) == "So"


def plain_sentence(text: str) -> str:
    """A sentence as a contradiction names it: without its list mark and final stop."""
    return _LIST_MARK.sub("", text).strip().rstrip(".。;；!！?？ ")


def _script(ch: str) -> str:
    return unicodedata.name(ch, "?").split(" ")[0].split("-")[0]


def _unit_length(raw: str) -> int:
    """How much of the letters after a figure are its unit: up to where the script
    changes ("ページ以内" is "ページ"); Han is written without spaces, so one character."""
    first = _script(raw[0])
    if first == "CJK":
        return 1
    end = 1
    while end < min(len(raw), UNIT_CHARS) and _script(raw[end]) == first:
        end += 1
    return end


def _unit(raw: str | None) -> str:
    """The unit a figure is written with, casefolded and (in ASCII) without a plural s."""
    if not raw:
        return ""
    unit = raw[:_unit_length(raw)].casefold()
    if _script(unit[0]) in SPACED_SCRIPTS and len(unit) < MIN_UNIT_LETTERS:
        return ""
    return unit[:-1] if unit.isascii() and len(unit) > 3 and unit.endswith("s") else unit


def _value(num: str, mult: str | None) -> float:
    digits = re.sub(r"[.,](?=\d{3}(?!\d))", "", num).replace(",", ".")
    try:
        value = float(digits)
    except ValueError:
        value = 0.0
    return value * _MULTIPLIER.get(mult or "", 1)


@lru_cache(maxsize=4096)
def measures(text: str) -> tuple[tuple[str, float, str], ...]:
    """(unit, value, as written) of each figure of `text` written with a unit."""
    found = []
    for m in _MEASURE.finditer(plain_sentence(text)):
        raw = m.group("unit")
        unit = _unit(raw)
        if unit:
            written = m.group(0)[:m.end("unit") - m.start() - len(raw) + _unit_length(raw)]
            found.append((unit, _value(m.group("num"), m.group("mult")), written))
    return tuple(found)


def _clash(a: Said, b: Said, refers_back: bool = False) -> tuple[str, tuple[str, str]] | None:
    """The unit two sentences give different figures of, when they are about the same
    thing (same_item): the same words around the figures within one message, or a later
    sentence of the message that names nothing but its measure (`refers_back`: "Max 3
    pages. Make it 5 pages.", an aside before a comma left out: "Actually, make it 5
    pages."); related words across messages (agents.words.changes)."""
    mine, theirs = measures(a.text), measures(b.text)
    if not mine or not theirs:
        return None
    plain_a, plain_b = plain_sentence(a.text), plain_sentence(b.text)
    if a.index == b.index:
        if topic(plain_a) != topic(plain_b) and not refers_back:
            return None
    elif not related(plain_a, plain_b):
        return None
    for i, (unit, value, written) in enumerate(mine):
        for j, (other_unit, other, other_written) in enumerate(theirs):
            if other_unit != unit or other == value:
                continue
            # A figure written before a measure both sentences give alike numbers the item
            # ("Section 7 … 400 words" beside "Section 300 … 400 words"): not a value.
            if {m[:2] for m in mine[i + 1:]} & {m[:2] for m in theirs[j + 1:]}:
                continue
            if same_item(a.text, _after_aside(b.text) if refers_back else b.text, unit):
                return unit, (written, other_written)
    return None


def _named(unit: str) -> bool:
    """A content unit that can name a thing measured: a word of LONG_WORD letters or more
    ("summary", "informe"), or a Han or Hangul character (报, 書); shorter words and kana
    are mostly grammar ("it", "max", "を")."""
    if len(unit) == 1 and not unit.isascii():
        return _script(unit) in ("CJK", "HANGUL")
    return len(unit) >= LONG_WORD and not unit.isdigit()


@lru_cache(maxsize=4096)
def _labels(text: str, unit: str) -> frozenset[str]:
    """The figures of `text` not written with `unit`: the item's own numbers ("section 6",
    "第2章", "Step 1"), a year."""
    measured = {f for u, _value, written in measures(text) if u == unit
                for f in _FIGURE.findall(written)}
    return _figures(text) - measured


@lru_cache(maxsize=4096)
def _subject(text: str, unit: str) -> frozenset[str]:
    """The units of `text` that can name what it measures in `unit`: its words and
    characters (condensing.units), less its figures and the unit itself."""
    return frozenset(u for u in units(plain_sentence(text))
                     if _named(u) and not u.startswith(unit) and u not in unit)


def same_item(first: str, second: str, unit: str) -> bool:
    """Whether two sentences that measure in `unit` are about the same item, by no
    language's words: their other figures are the same ("section 6 … 106 words" and
    "section 6 … 157 words"; "section 7 …" is another item, so is list item "2." beside
    "1.", whose number is no figure of the sentence), and their subjects do not differ:
    one names nothing besides the measure ("Make it 5 pages"), or they share more than
    SUBJECT_SHARE of the smaller one's naming units ("El informe: 5 páginas" after "El
    informe debe tener como máximo 3 páginas"; not "The appendix takes 5 pages" after "The
    summary takes 3 pages")."""
    if _labels(first, unit) != _labels(second, unit):
        return False
    mine, theirs = _subject(first, unit), _subject(second, unit)
    if not mine or not theirs:
        return True
    return len(mine & theirs) > SUBJECT_SHARE * min(len(mine), len(theirs))


def read_view(messages: list[Message], superseded: list[str] = ()) -> PersonView:
    """The person's sentences in force, those a later message may have changed, and the
    pairs in force that may contradict each other. `superseded`: texts a person's edit
    replaced or removed (a sentence that holds one is no longer in force)."""
    return _read_view(tuple(messages), tuple(superseded))


def _flat(text: str) -> str:
    return " ".join(text.split()).rstrip(".!?;。！？；").casefold()


@lru_cache(maxsize=32)
def _read_view(messages: tuple[Message, ...], superseded: tuple[str, ...]) -> PersonView:
    gone = [flat for text in superseded if (flat := _flat(text))]
    said = [Said(index, msg.turn, msg.source, sentence)
            for index, msg in enumerate(messages)  # pasted material states no rule
            for sentence in split_sentences(own_text(msg.text))]
    flats = {s: _flat(s.text) for s in said}
    wholes = [_flat(own_text(m.text)) for m in messages]
    # A sentence said again later is listed where it was said last.
    last_said = {flats[s]: s for s in said}
    current = [s for s in said
               if last_said[flats[s]] is s and not any(g in flats[s] for g in gone)]
    by_message: list[list[Said]] = [[] for _ in messages]
    for s in current:
        by_message[s.index].append(s)
    # Per message, where each content mark occurs: only a sentence sharing a mark can be
    # related, so a long message is not compared sentence by sentence with another.
    by_mark: list[dict[str, list[int]]] = [{} for _ in messages]
    for index, sentences_of in enumerate(by_message):
        for position, later in enumerate(sentences_of):
            for mark in topic(later.text):
                by_mark[index].setdefault(mark, []).append(position)
    changed: list[Changed] = []
    in_force: list[Said] = []
    for s in current:
        newest = None
        mine = topic(s.text)
        for index in range(len(messages) - 1, s.index, -1):  # the newest message first
            if flats[s] in wholes[index]:
                continue  # the same sentence said again there: not a change
            positions = sorted({p for mark in mine for p in by_mark[index].get(mark, ())},
                               reverse=True)
            # The goal is the task and is sent verbatim, as its own line of the snapshot:
            # a later sentence on its subject usually adds to it ("the report must include
            # a table"), so only one that gives another figure of the same unit is shown
            # as a change of it.
            newest = next((later for p in positions if related(
                s.text, (later := by_message[index][p]).text)
                and (s.source != "goal" or _clash(s, later))), None)
            if newest is not None:
                break
        if newest is None:
            in_force.append(s)
        else:
            changed.append(Changed(s, newest))
    unanchored = frozenset(
        s for s in in_force if supersedes(s.text)
        and not any(related(e.text, s.text) for index in range(s.index)
                    for e in by_message[index]))
    return PersonView(tuple(in_force), tuple(changed), _conflicts(current, changed),
                      unanchored, tuple((m.turn, m.source, m.ref) for m in messages))


def _conflicts(current: list[Said], changed: list[Changed]) -> tuple[Conflict, ...]:
    """Pairs of the person's sentences that may not both hold: within one message, any
    two that clash; across messages, a sentence and the later one that may have changed
    it, unless that one says plainly that it replaces it ("instead", 改为 …)."""
    pairs: list[Conflict] = []
    seen: set[tuple[Said, Said]] = set()
    for unit, group in _same_message_groups(current):
        same_words: dict[frozenset[str], list[Said]] = {}
        for s in group:
            same_words.setdefault(topic(plain_sentence(s.text)), []).append(s)
        found_here = [(a, b, found) for alike in same_words.values() if len(alike) > 1
                      for a, b in _candidates(alike) if (found := _clash(a, b))]
        found_here += [(a, b, found) for a, b in _back_references(group, unit)
                       if (found := _clash(a, b, refers_back=True))]
        clashes: dict[Said, int] = {}
        for a, b, _found in found_here:
            clashes[a] = clashes.get(a, 0) + 1
            clashes[b] = clashes.get(b, 0) + 1
        for a, b, found in found_here:
            # A sentence at odds with several of its message is one of a list ("Part 1 …",
            # "Part 2 …"): each names its own thing. A contradiction is a pair.
            if clashes[a] == clashes[b] == 1 and (a, b) not in seen:
                seen.add((a, b))
                pairs.append(Conflict(a, b, *found))
    for change in changed:
        a, b = change.earlier, change.later
        if (a, b) not in seen and not supersedes(b.text) and (found := _clash(a, b)):
            seen.add((a, b))
            pairs.append(Conflict(a, b, *found))
    return tuple(sorted(pairs, key=lambda c: (c.second.index, c.first.index)))


def _same_message_groups(current: list[Said]) -> list[tuple[str, list[Said]]]:
    """The sentences that may clash within a message, by unit: the same message and a
    figure of the same unit, in the message's order."""
    groups: dict[tuple[int, str], list[Said]] = {}
    for s in current:
        for unit in {m[0] for m in measures(s.text)}:
            groups.setdefault((s.index, unit), []).append(s)
    return [(unit, group) for (_index, unit), group in groups.items() if len(group) > 1]


def _back_references(group: list[Said], unit: str) -> list[tuple[Said, Said]]:
    """Within a message, a sentence that names nothing but its measure ("Make it 5
    pages", "Actually, make it 5 pages", "Mejor, 5 páginas") paired with the sentence
    before it in the same unit: a person correcting themselves as they write. (In a list
    of such bare figures each clashes with its neighbours, and _conflicts takes no pair
    from it.)"""
    return [(before, later) for before, later in zip(group, group[1:])
            if not _subject(_after_aside(later.text), unit)]


def _after_aside(text: str) -> str:
    """`text` without a single word it opens with and sets off by a comma ("Actually, …",
    "Eigentlich, …", "Mejor, …"): an aside, which names nothing that is measured. Longer
    openings ("For the appendix, …") are kept: they may name the item; so is a figure's
    thousands comma ("1,000 words")."""
    head, comma, rest = text.partition(",")
    return rest if comma and head.strip().isalpha() and rest.strip() else text


def _candidates(group: list[Said]) -> list[tuple[Said, Said]]:
    """The pairs of a group with the same words around their figures (_clash asks that
    within a message), without trying every pair of a long list:
    two sentences of one figure each (more such are a list, whose items each clash with
    several), or two that share a figure ("section 6 …"). A figure most of a long list
    shares (a year) names no item."""
    single = [s for s in group if len(_figures(s.text)) == 1]
    found = {(single[0], single[1])} if len(single) == 2 else set()
    holding: dict[str, list[Said]] = {}
    for s in group:
        for figure in _figures(s.text):
            holding.setdefault(figure, []).append(s)
    order = {s: i for i, s in enumerate(group)}
    for sharing in holding.values():
        if 1 < len(sharing) <= MAX_SHARING:
            found.update((a, b) for i, a in enumerate(sharing) for b in sharing[i + 1:]
                         if order[a] < order[b])
    return sorted(found, key=lambda pair: (order[pair[0]], order[pair[1]]))


@lru_cache(maxsize=4096)
def _figures(text: str) -> frozenset[str]:
    return frozenset(_FIGURE.findall(plain_sentence(text)))
