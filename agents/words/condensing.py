"""The person's older messages condensed by the model, and checked (feature C19).

While the person's messages fit their share of the input limit they are sent whole
(person.py). Past it the newest stay verbatim and the older ones go through one model
request (several, in parts, when one cannot hold them with its answer: condensing_parts.py)
that writes "the requirements in force": one line per requirement, each citing the
message it comes from ("[m3] …"), corrections applied ("[m1 superseded by m4] …" names a
sentence a later message changed). The engine checks that answer without any
language-specific pattern, with one measure in every script:

- a text's content units are its CJK characters (Han, kana, Hangul), one unit each, and
  its other runs of letters and digits, one word each, case folded; its figures are its
  runs of digits;
- a line is used only when the messages it cites support it: at least SUPPORT of its units
  and every figure it states are in their own text (pasted material aside). A line that
  states what the person never wrote is refused, not used;
- a line citing message k covers sentence s of message k when it holds at least COVER of
  s's units and every figure of s (a sentence with no units, only emoji, only punctuation,
  is covered only by being quoted);
- each sentence of an older message is kept when a used line quotes it verbatim, a used
  line citing its message covers it, or a used "superseded by" line covers it and names a
  later message that is itself kept (verbatim, or every sentence of it kept) and shares a
  content unit with it that is not a figure (one CJK character, or a word of three or more
  characters);
- whatever is not kept stays verbatim in the block.

The result is cached by the older messages it was made from: the model is asked again only
when that set changes. The full texts stay one read_ref away; the block names their refs.
"""
from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

from agents.protocol import (LATER_LINE, OLDER_LINE, SUMMARY_MARKER, SUPERSEDED_BY,
                             WORDS_MARKER, words_label)
from agents.words.anchors import sentences
from agents.words.figure_groups import GROUPED_NOTE, grouped, has_groups
from agents.words.quoted import own_text

COVER = 0.6  # of a sentence's units a line citing its message must hold
SUPPORT = 0.75  # of a line's units its cited messages must hold
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_UNIT = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")
_FIGURE = re.compile(r"\d+")
_LINE = re.compile(r"^\s*(?:[-*•]\s*)?\[\s*(m\d+[^\]]*)\]\s*(.*?)\s*$", re.I)
_LABEL = re.compile(r"\bm(\d+)\b", re.I)
# The block's list of the condensed messages' refs, read back by the words check.
LEGEND_ENTRY = "{label} = {ref} (turn {turn})"
_LEGEND = re.compile(r"\bm(\d+) = (\S+) \(turn -?\d+\)")

WORDS_INSTRUCTIONS = f"""{SUMMARY_MARKER}
{WORDS_MARKER}
The person's own messages in a long task no longer fit their share of the context. Write
the requirements in force from the OLDER messages below, for the agent doing the task.

Answer with lines only, one requirement per line, each starting with the label of the
message it comes from, for example:
[m3] The report must be at most 5 pages.
- Use the person's own words and language; copy every figure, name and unit exactly.
- Apply corrections: where a later message (an older or a later one) changes a sentence,
  write that sentence as the person wrote it after "[m1 {SUPERSEDED_BY} m4]" (the old
  message's label, then the changing one's), and the requirement now in force on its own
  line citing the message that states it.
- Leave out nothing the person asked for, and never add anything they did not write: the
  engine checks every line against the message it cites and keeps verbatim whatever no
  line covers.
- Material the person pasted (an e-mail, quoted lines, a fenced block) is not their
  requirement: leave it out (it stays verbatim).
"""


@lru_cache(maxsize=4096)
def units(text: str) -> frozenset[str]:
    """The content units of `text`: CJK characters one by one, other words whole."""
    return frozenset(_UNIT.findall(text.casefold()))


@lru_cache(maxsize=4096)
def figures(text: str) -> frozenset[str]:
    return frozenset(_FIGURE.findall(text))


def flat(text: str) -> str:
    return " ".join(text.casefold().split())


def covers(line: str, sentence: str) -> bool:
    """True when `line` (citing the sentence's message) holds enough of `sentence`."""
    wanted = units(sentence)
    if not wanted:
        return bool(flat(sentence)) and flat(sentence) in flat(line)
    held = units(line)
    return (len(wanted & held) >= COVER * len(wanted)) and figures(sentence) <= figures(line)


def supported(line: str, source: str) -> bool:
    """True when `source` (the cited messages' own text) holds what `line` states."""
    said = units(line)
    if not said:
        return False
    return (len(said & units(source)) >= SUPPORT * len(said)) and figures(line) <= figures(source)


def related(sentence: str, later: str) -> bool:
    """A later message shares a content unit with `sentence` that is not a figure."""
    shared = units(sentence) & units(later)
    return any(not unit.isdigit() and (len(unit) >= 3 or re.match(f"[{_CJK}]", unit))
               for unit in shared)


def message_sentences(text: str) -> list[str]:
    """The sentences of a message, each once, stripped (as the words check reads them)."""
    found: dict[str, str] = {}  # flattened → as written, the first of each
    for sentence in sentences(text or ""):
        if (stripped := sentence.strip()):
            found.setdefault(flat(stripped), stripped)
    return list(found.values())


@dataclass(frozen=True)
class Entry:
    """A message in the condensing request: its label number, turn, ref and text."""

    position: int
    turn: int
    ref: str
    text: str
    # What the request shows of it when that is shorter and loses nothing: a sentence said
    # again once, sentences that differ in one figure once (figure_groups). The check
    # always reads `text`.
    shown: str = ""

    def as_shown(self) -> "Entry":
        return Entry(self.position, self.turn, self.ref, self.shown) if self.shown else self


@dataclass
class CitingLine:
    cites: tuple[int, ...]  # the label numbers it cites; a superseded line's old one first
    text: str
    superseded_by: int = 0

    def render(self) -> str:
        if self.superseded_by:
            return (f"[{words_label(self.cites[0])} {SUPERSEDED_BY} "
                    f"{words_label(self.superseded_by)}] {self.text}")
        return f"[{', '.join(words_label(k) for k in self.cites)}] {self.text}"

    def to_state(self) -> dict[str, Any]:
        return {"cites": list(self.cites), "text": self.text,
                "superseded_by": self.superseded_by}


@dataclass
class Condensed:
    """A checked answer: the lines used, those refused, and per older message the
    sentences no used line keeps (sent verbatim)."""

    key: tuple
    lines: list[CitingLine] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    uncovered: dict[int, list[str]] = field(default_factory=dict)
    failed: str = ""  # why no answer could be used (the request was refused, cut, …)
    call: int = 0  # the MODEL_CALL that answered (the first, of several), for the drawer
    calls: list[int] = field(default_factory=list)  # every MODEL_CALL that answered a part
    parts: int = 1  # the requests' parts the older messages were cut into (condensing_parts)
    # No request was made: no checked answer could fit any request's room (`failed` says
    # by how much), so the messages go straight to the rule's last resort.
    unfit: bool = False

    @property
    def verbatim_sentences(self) -> int:
        return sum(len(v) for v in self.uncovered.values())

    def to_state(self) -> dict[str, Any]:
        return {"key": [list(k) for k in self.key], "lines": [x.to_state() for x in self.lines],
                "refused": self.refused,
                "uncovered": {str(k): v for k, v in self.uncovered.items()},
                "failed": self.failed, "call": self.call, "calls": self.calls,
                "parts": self.parts, "unfit": self.unfit}

    @classmethod
    def from_state(cls, raw: dict[str, Any]) -> "Condensed":
        return cls(key=tuple(tuple(k) for k in raw.get("key", [])),
                   lines=[CitingLine(tuple(x["cites"]), x["text"], x.get("superseded_by", 0))
                          for x in raw.get("lines", [])],
                   refused=list(raw.get("refused", [])),
                   uncovered={int(k): list(v) for k, v in (raw.get("uncovered") or {}).items()},
                   failed=raw.get("failed", ""), call=int(raw.get("call", 0)),
                   calls=[int(c) for c in raw.get("calls") or ([raw["call"]] if raw.get("call")
                                                                else [])],
                   parts=int(raw.get("parts", 1)), unfit=bool(raw.get("unfit", False)))


def least_answer_tokens(older: list[Entry], count: Callable[[str], int]) -> int:
    """The fewest tokens the lines and verbatim sentences of any checked answer for `older`
    can take, known before asking: each sentence is covered by a line holding every figure
    of it, or stays verbatim, which holds them too. So every distinct figure of the older
    messages is there as a run of digits: in the encodings counted with, a token or more
    of its own (digits are never joined to other characters, at most three a token), and
    a token before the next one that holds no digit. Words are not counted: a line may
    hold as few as COVER of a sentence's, and the figures' separators may be among them."""
    found = sorted({f for e in older for s in message_sentences(e.text) for f in figures(s)},
                   key=lambda f: (len(f), f))
    return count(",".join(found)) if found else 0


def key_of(older: list[Entry]) -> tuple:
    """What a condensed result is cached by: the older messages it was made from."""
    return tuple((e.position, e.ref, zlib.crc32(e.text.encode("utf-8"))) for e in older)


def request(older: list[Entry], later: list[Entry]) -> list[dict[str, str]]:
    """The condensing request: the instructions, then the messages under their labels (how
    to read a brace list of figures first, when a message is shown with one)."""
    note = [GROUPED_NOTE, ""] if any(has_groups(e.text) for e in older) else []
    parts = [*note, OLDER_LINE, *(f"[{words_label(e.position)}] {e.text}" for e in older)]
    if later:
        parts += ["", LATER_LINE, *(f"[{words_label(e.position)}] {e.text}" for e in later)]
    return [{"role": "system", "content": WORDS_INSTRUCTIONS},
            {"role": "user", "content": "\n\n".join(parts)}]


def parse_lines(answer: str) -> tuple[list[CitingLine], list[str]]:
    """The answer's citing lines, and its other non-empty lines (which cite nothing)."""
    found, other = [], []
    for raw in (answer or "").splitlines():
        match = _LINE.match(raw)
        if not match:
            if raw.strip():
                other.append(raw.strip())
            continue
        inside, text = match.group(1), match.group(2)
        labels = [int(n) for n in _LABEL.findall(inside)]
        if not text or not labels:
            other.append(raw.strip())
            continue
        old, _, new = inside.casefold().partition(SUPERSEDED_BY)
        if new:
            olds, news = _LABEL.findall(old), _LABEL.findall(new)
            if len(olds) == 1 and len(news) == 1:
                found.append(CitingLine((int(olds[0]),), text, int(news[0])))
                continue
            other.append(raw.strip())
            continue
        found.append(CitingLine(tuple(dict.fromkeys(labels)), text))
    return found, other


def check(answer: str, older: list[Entry], later: list[Entry], call: int = 0) -> Condensed:
    """The answer checked against the person's messages (see the module's docstring)."""
    known = {e.position for e in older} | {e.position for e in later}
    used, refused = usable_lines(answer, older, {e.position: e.text for e in older}, known)
    return resolve(key_of(older), used, refused, older, later, [call] if call else [])


def usable_lines(answer: str, asked: list[Entry], sources: dict[int, str],
                 known: set[int]) -> tuple[list[CitingLine], list[str]]:
    """The lines of an answer that may be used, and the refused ones (rendered). `asked`:
    the messages (or parts of one) the request gave; a line must cite only those, and
    what it states must be in `sources`, the whole messages' own text (a part of a
    message stops at a sentence, pasted material at its own lines). `known`: every
    message a "superseded by" line may name."""
    positions = {e.position for e in asked}
    used: list[CitingLine] = []
    refused, other = [], []
    parsed, other = parse_lines(answer)
    refused += other
    for line in parsed:
        if not all(k in positions for k in line.cites):
            refused.append(line.render())
            continue
        if line.superseded_by and not (line.superseded_by in known
                                       and line.superseded_by > line.cites[0]):
            refused.append(line.render())
            continue
        source = "\n".join(own_text(sources[k]) for k in line.cites)
        if not supported(line.text, source):
            refused.append(line.render())
            continue
        used.append(line)
    return used, refused


def resolve(key: tuple, used: list[CitingLine], refused: list[str], older: list[Entry],
            later: list[Entry], calls: list[int]) -> Condensed:
    """The usable lines of one answer or of several (each part's, merged) against every
    sentence of the whole older messages: what is kept, and what stays verbatim."""
    by_position = {e.position: e for e in older}
    later_positions = {e.position for e in later}
    everything = {**{e.position: e for e in later}, **by_position}
    result = Condensed(key=key, call=calls[0] if calls else 0, calls=list(calls))
    result.refused += refused
    # Quoted in a line that states it in force: a "superseded by" line quoting a sentence
    # says the opposite, and holds only as the check below allows.
    quoted = [flat(line.text) for line in used if not line.superseded_by]
    pending: dict[int, list[str]] = {}
    for entry in older:
        citing = [line for line in used if entry.position in line.cites
                  and not line.superseded_by]
        pending[entry.position] = [
            s for s in message_sentences(entry.text)
            if not (any(flat(s) in text for text in quoted)
                    or any(covers(line.text, s) for line in citing))]
    kept = later_positions | {k for k, left in pending.items() if not left}
    named: set[int] = set()  # the superseded lines that hold: a claim that does not is unused
    for entry in older:
        left = []
        for s in pending[entry.position]:
            naming = [i for i, line in enumerate(used)
                      if line.superseded_by and line.cites[0] == entry.position
                      and line.superseded_by in kept and covers(line.text, s)
                      and related(s, everything[line.superseded_by].text)]
            named.update(naming)
            if not naming:
                left.append(s)
        if left:
            result.uncovered[entry.position] = left
    result.lines = [line for i, line in enumerate(used) if not line.superseded_by or i in named]
    result.refused += [line.render() for i, line in enumerate(used)
                       if line.superseded_by and i not in named]
    return result


def legend(older: list[Entry]) -> str:
    return "; ".join(LEGEND_ENTRY.format(label=words_label(e.position), ref=e.ref or "—",
                                         turn=e.turn) for e in older)


def render(result: Condensed, older: list[Entry]) -> list[str]:
    """The block's entries for the older messages: a header naming their refs, the used
    lines, and each message's sentences no line keeps, verbatim."""
    first, last = words_label(older[0].position), words_label(older[-1].position)
    span = first if first == last else f"{first}–{last}"
    out = [f"[messages {span}: the requirements in force, condensed by the model and "
           f"checked against the message each line cites; later messages override them "
           f"where they differ. Full texts: {legend(older)} — read one with "
           f"read_ref(ref=…)]"]
    out += [line.render() for line in result.lines]
    for entry in older:
        if left := result.uncovered.get(entry.position):
            out.append(f"[{words_label(entry.position)} · turn {entry.turn} · no line above "
                       f"covers these, verbatim] " + (grouped(left) or " ".join(left)))
    return out


def legend_refs(block: str) -> dict[int, str]:
    """Label number → archive ref, from a rendered block's header (the words check)."""
    return {int(n): ref for n, ref in _LEGEND.findall(block)}


def block_lines(block: str) -> list[CitingLine]:
    """The citing lines of a rendered block (the verbatim-sentence entries among them)."""
    return parse_lines(block)[0]
