"""The person's words, checked in every agent request against the archive (feature C19).

The E3 audit (source_audit) looks at the first request after a compaction. This check
looks at every agent request, cheaply and by plain text comparison, never through the
anchor book or the words block that produced the request:

- person_words: each sentence of each message the person wrote (read back from the
  archive by its ref: goal, follow-ups, admin edits, pins) is in the request's person's
  words block, its snapshot, or a message of the person's in its recent history, case
  and spacing aside. A copy inside a tool result does not count. Past their share the
  older messages are condensed by the model into lines that each cite a message
  (agents.words.condensing): a sentence is also kept when a line of the words block that
  cites its message (by the ref the block's header gives the label) covers it, by the
  same language-free measure the engine checked the answer with.
- superseded_listed: the snapshot's list of what is in force (agents.words.in_force)
  holds a text a person's edit replaced or removed.
- quoted_promoted: it lists a text that only pasted material of the person's holds (an
  e-mail, a quote, a fenced block; agents.words.quoted).
- tool_text_in_constraints: it lists a text that no message of the person's holds.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from agents.words.anchors import sentences
from agents.words.condensing import block_lines, covers, legend_refs
from agents.words.figure_groups import GROUPED_NOTE
from agents.words.in_force import HEADING, POINTER
from agents.words.quoted import own_text

PERSON_ZONES = ("words", "snapshot")
SUPERSEDED, OWN, QUOTED, TOOL_TEXT = "superseded", "own", "quoted", "tool_text"


def flat(text: str) -> str:
    return " ".join(text.casefold().split())


def person_sentences(text: str) -> list[str]:
    """The sentences of a message of the person's, each once, flattened."""
    found: dict[str, None] = {}
    for sentence in sentences(text or ""):
        if (line := flat(sentence)):
            found[line] = None
    return list(found)


def listed_in_force(snapshot: str) -> list[str]:
    """The items of a snapshot's list of what is in force, flattened: each item's text
    without the label that names its message; an item that only points at where the
    sentences are (the Goal line, the person's words block) lists none. `snapshot` may
    include its "since then" block, whose new items ("- [turn N] …") come without the
    list's heading (it is in the frozen snapshot above them)."""
    items: list[str] = []
    inside = False
    for line in snapshot.splitlines():
        if line == HEADING:
            inside = True
        elif (inside and line.startswith("- ")) or line.startswith("- [turn "):
            item = line[2:]
            if item.startswith("[") and "] " in item:
                item = item.split("] ", 1)[1]
            if not item.startswith(POINTER):
                items.append(flat(item.rstrip("…")))
        else:
            inside = False
    return items


@dataclass
class WordsFindings:
    missing: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    quoted: list[str] = field(default_factory=list)
    tool_text: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.superseded or self.quoted or self.tool_text)


GROUPED = flat(GROUPED_NOTE)
_DIGITS = re.compile(r"\d+")


def in_a_brace_list(held: str, sentence: str) -> bool:
    """True when `held` (flattened request text that carries GROUPED_NOTE) holds `sentence`
    (flattened) as one figure of a brace list: the text before one of its figures, "{",
    figures separated by commas that include it, "}", the text after it. The audit's own
    reading of the note's rule, not the block's writer (agents.words.figure_groups)."""
    for match in _DIGITS.finditer(sentence):
        prefix, figure, suffix = sentence[:match.start()], match.group(), sentence[match.end():]
        at = held.find(prefix + "{")
        while at >= 0:
            opened = at + len(prefix) + 1
            closed = held.find("}", opened)
            listed = held[opened:closed].split(",") if closed > opened else []
            if (figure in listed and all(f.isdigit() for f in listed)
                    and held.startswith(suffix, closed + 1)):
                return True
            at = held.find(prefix + "{", at + 1)
    return False


class WordsCheck:
    """What the person wrote (from the archive) and the check of one request against it."""

    def __init__(self) -> None:
        self.sentences: list[str] = []  # every sentence of the person's, in order
        self.own: list[str] = []  # per message: its own text (no pasted material), flat
        self.whole: list[str] = []  # per message: all of it, flat
        self.superseded: list[str] = []  # texts a person's edit replaced or removed, flat
        self.refs: dict[str, list[str]] = {}  # sentence → the refs of the messages saying it
        # Every sentence some request so far lacked, in order (a sentence is lost once it
        # missed one request, even if a later one has it again).
        self.lost: dict[str, None] = {}
        self._parts: tuple[str, ...] = ()
        self._held = ""
        self._snapshot = ""
        self._listed: list[str] = []
        self._missing_of: tuple[str, ...] | None = None  # the sentences _missing is of
        self._missing: list[str] = []  # those of them the held parts lack
        self._kinds_of: tuple | None = None  # the texts _kinds was read against
        self._kinds: dict[str, str] = {}  # listed item → its kind (_kind)

    def add_message(self, text: str, ref: str = "") -> None:
        said = person_sentences(text)
        self.sentences += [s for s in said if s not in self.sentences]
        if ref:
            for sentence in said:
                self.refs.setdefault(sentence, []).append(ref)
        self.own.append(flat(own_text(text)))
        self.whole.append(flat(text))

    def add_superseded(self, text: str) -> None:
        if (line := flat(text)) and line not in self.superseded:
            self.superseded.append(line)

    def check(self, messages: list[dict[str, Any]]) -> WordsFindings:
        # One pass over the request: the texts that may hold the person's sentences, and
        # the snapshot with its "since then" block.
        held_parts: list[str] = []
        shown_parts: list[str] = []
        for m in messages:
            zone = m.get("zone")
            if zone in PERSON_ZONES or (zone == "history" and m.get("role") == "user"):
                held_parts.append(str(m.get("content") or ""))
            if zone == "snapshot" or zone == "since":
                shown_parts.append(str(m.get("content") or ""))
        parts = tuple(held_parts)
        # Between compactions these parts are the same texts call after call: flattened
        # once (the tuple compares its strings by identity first), and so is what they
        # lack of the person's sentences.
        if parts != self._parts:
            self._parts, self._held = parts, flat("\n".join(parts))
            self._missing_of = None
        held = self._held
        sentences = tuple(self.sentences)
        if self._missing_of != sentences:
            missing = [s for s in sentences if s not in held]
            if missing and GROUPED in held:  # given once with others, its figure in braces
                missing = [s for s in missing if not in_a_brace_list(held, s)]
            self._missing_of, self._missing = sentences, missing
        missing = list(self._missing)
        if missing:
            missing = self._not_cited(missing, messages)
            self.lost.update(dict.fromkeys(missing))
        found = WordsFindings(missing=missing)
        snapshot = "\n".join(shown_parts)
        if snapshot != self._snapshot:
            self._snapshot, self._listed = snapshot, listed_in_force(snapshot)
        # What each listed item is depends only on the person's messages and edits: kept
        # per item while they stay the same (the list gains an item or two a turn).
        sources = (tuple(self.superseded), tuple(self.own), tuple(self.whole))
        if sources != self._kinds_of:
            self._kinds_of, self._kinds = sources, {}
        kinds = self._kinds
        for item in self._listed:
            kind = kinds.get(item)
            if kind is None:
                kind = kinds[item] = self._kind(item)
            if kind == SUPERSEDED:
                found.superseded.append(item)
            elif kind == QUOTED:
                found.quoted.append(item)
            elif kind == TOOL_TEXT:
                found.tool_text.append(item)
        return found

    def _kind(self, item: str) -> str:
        """What a listed item is: a text an edit replaced, the person's own words, only
        in pasted material of theirs, or in no message of theirs."""
        if any(old == item or old in item for old in self.superseded):
            return SUPERSEDED
        if any(item in own for own in self.own):
            return OWN
        if any(item in whole for whole in self.whole):
            return QUOTED
        return TOOL_TEXT

    def _not_cited(self, missing: list[str], messages: list[dict[str, Any]]) -> list[str]:
        """Of `missing`, those no citing line of the words block covers."""
        block = "\n".join(str(m.get("content") or "") for m in messages
                          if m.get("zone") == "words")
        labels = legend_refs(block)
        if not labels:
            return missing
        by_ref: dict[str, list[str]] = {}
        for line in block_lines(block):
            for k in line.cites:
                if k in labels:
                    by_ref.setdefault(labels[k], []).append(line.text)
        return [s for s in missing
                if not any(covers(text, s) for ref in self.refs.get(s, ())
                           for text in by_ref.get(ref, ()))]

    def to_state(self) -> dict[str, Any]:
        return {"sentences": self.sentences, "own": self.own, "whole": self.whole,
                "superseded": self.superseded, "refs": self.refs, "lost": list(self.lost)}

    def from_state(self, state: dict[str, Any]) -> None:
        self.sentences = list(state.get("sentences", []))
        self.own = list(state.get("own", []))
        self.whole = list(state.get("whole", []))
        self.superseded = list(state.get("superseded", []))
        self.refs = {k: list(v) for k, v in (state.get("refs") or {}).items()}
        self.lost = dict.fromkeys(state.get("lost") or ())
