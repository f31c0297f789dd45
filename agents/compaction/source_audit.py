"""The compaction audit (feature E3), checked against the source of truth, not the engine's memory.

What the audit believes comes from the Store's archive, read back by ref: the person's own
messages and the raw tool results and assistant turns. It does not read the anchor book,
and it classifies the person's sentences with its own small rules (none of
agents/words/anchors.py), so an extraction that misses a constraint cannot also hide the miss.

After each compaction it checks the next agent request actually sent (the MODEL_CALL
messages, as the provider received them):

- every tier-1 statement the person made is literally there (case and spacing aside),
  unless the person explicitly replaced it later ("instead", "change of plan", "改为" …)
  or edited it in the admin;
- every figure in the summary occurs in an archived raw message or tool result. An earlier
  summary is no support, so an invented figure is flagged by every audit until it is gone;
- every name in the summary does too: a file name (a word with an extension), a quoted
  string, or a word written capitalised inside a sentence. A summary that invented a file
  name and pinned a real byte count to it passed a figures-only audit. The first two mark
  names in any script (Chinese and Japanese have no capitals); a name is supported when
  its marks (agents.words.marks) are all in the archive's.

The result is an AUDIT event after that request; a failed one counts in `audit_failures`.

Tool results are read when a question needs them, not as they come. Every row archived
before the audit is either read or deferred, and a question (is this figure in the
archive? are this name's marks?) reads the deferred results newest first until it has its
answer, or until none is left: the answer is the one reading every row gives. A summary
cites figures of the results it folded, most of them recent, so on long-1000 a third of the
results is ever read, and reading a 5 kB result (its figures, its marks) cost about a
sixth of the engine's CPU per call when every result was read.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import AbstractSet, Any, Callable

from agents.compaction.numbers import numbers_in, values_in
from agents.compaction.words_check import WordsCheck
from agents.events import (AnchorChanged, AssistantMessage, Audit, Compaction, Event, ModelCall,
                           ToolResult, UserMessage)
from agents.words.marks import marks, plain

# Archive roles whose rows are raw material (the "context" and "handoff" rows repeat
# compacted messages and summaries, so they are no support for anything).
RAW_ROLES = ("user", "assistant", "tool")
# An edit of an anchor in the admin, or a pin, is archived as the person's message (C19).
PERSON_SOURCES = ("goal", "scenario", "user", "admin", "pin")
MAX_FLAGGED = 50  # figures listed per AUDIT event; the count is exact
DEFERRED_BATCH = 4  # deferred results read per store round trip, newest first
# What the audit learns from the archive and saves: figure values, names, the marks of
# the sources a final answer is drawn from and of the person's own messages.
LEARNT = ("known", "known_names", "source_marks", "person_marks")

_SENTENCES = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])|[\r\n]+")
_CLAUSES = re.compile(r",\s+|，|、(?=\S{4})|:\s+|：|;\s+|；")
# A statement binds the work: an obligation, a prohibition, a limit or a cutoff.
_BINDING = re.compile(
    r"\bmust(?:n't)?\b|\bnever\b|\bdo\s+not\b|\bdon't\b|\bonly\b|\balways\b|\bat\s+(?:most|least)\b"
    r"|\bno\s+(?:more|less|fewer|later|earlier)\s+than\b|\bnot\s+(?:exceed|more\s+than)\b"
    r"|\brequired\b|\bmandatory\b|\bforbidden\b|\bprohibited\b|\bnot\s+allowed\b|\bshall\b"
    r"|必须|务必|一定要|不得|不要|不能|不准|不许|严禁|禁止|只能|只用|仅限|至多|最多|至少|不超过"
    r"|不少于|截止|截至|以内|始终|永远不", re.I)
# The person says the new statement replaces an old one; only this retires a statement.
_REPLACES = re.compile(r"\binstead\b|\bchange\s+of\s+plan\b|\bfrom\s+now\s+on\b|\bno\s+longer\b"
                       r"|\bchange[sd]?\b.{1,60}?\bto\b|\breplac\w*\b|改为|改成|换成|调整为|不再|改用",
                       re.I | re.S)
_WORD = re.compile(r"[a-z]{4,}|[\u4e00-\u9fff]{2}", re.I)
_COMMON = set("must never only always least most more less than with that this from have "
              "will should report data change plan instead longer".split())


# A file name: a name, a dot and an extension of two to six word characters, a letter
# first, as in "sales_2026.csv", "报告.xlsx"; "1204.50" and "e.g." are none.
# A match starts only where a run of name characters starts: a run that holds no file name
# from its first character holds none from a later one, and trying each of them made
# reading a tool result quadratic in its longest run (a third of this regex's time).
_NAME_RUN = r"[^\s\"'`()\[\]{}<>|,;:「」『』《》“”‘’«»（），；：]"
_FILE_NAME = re.compile(rf"(?<!{_NAME_RUN}){_NAME_RUN}+\.[^\W\d_]\w{{1,5}}\b")
# Every file name has a dot followed by a letter: a text without one (most tool results,
# whose sentences end in a dot and a space) has none, found without trying every run.
_EXTENSION_START = re.compile(r"\.[^\W\d_]")
_QUOTED = re.compile(r"[\"“«「『《‘`]([^\"“”«»「」『』《》‘’`\n]{2,80})[\"”»」』》’`]"
                     r"|(?<![\w'])'([^'\n]{2,80})'(?![\w'])")
# A capitalised word after another word: a name in the scripts that have capitals. The
# first word of a sentence or item is capitalised anyway and is not taken.
_INNER_CAPITAL = re.compile(r"(?:(?<=[^\W\d_] )|(?<=[^\W\d_][,)] ))[A-ZÀ-ÖØ-ÞА-ЯΑ-Ω][^\W_]+")


def _plain(text: str) -> str:
    return " ".join(text.casefold().split())


def names_in(summary: str) -> list[str]:
    """The names a rendered summary states in its items ("- " lines), as written."""
    found: dict[str, None] = {}  # in order, each once
    for line in plain(summary).splitlines():
        if line.startswith("- "):  # else the rendering's own framing: its intro and headings
            found.update(dict.fromkeys(_item_names(line[2:])))
    return list(found)


# By content, like numbers_in's lines: a summary keeps most of its items from one
# compaction to the next, and each is read once per audit.
@lru_cache(maxsize=8192)
def _item_names(item: str) -> tuple[str, ...]:
    quoted = [a or b for a, b in _QUOTED.findall(item)]
    names = (name.strip().rstrip(".")
             for name in _FILE_NAME.findall(item) + quoted + _INNER_CAPITAL.findall(item))
    return tuple(name for name in names if name)


def _name_marks(text: str, text_marks: set[str] | None = None) -> set[str]:
    """What a name is checked by: its file names whole, and its marks (`text_marks`:
    marks(text), when the caller has them)."""
    files = (_FILE_NAME.findall(text) if _EXTENSION_START.search(text) else ())
    text_marks = marks(text) if text_marks is None else text_marks
    # Most texts name no file: their marks are the answer, not copied into a new set.
    return {n.casefold().rstrip(".") for n in files} | text_marks if files else text_marks


@lru_cache(maxsize=8192)
def _marks_of_name(name: str) -> frozenset[str]:
    return frozenset(_name_marks(name))


OVERVIEW_HEADING = "## Task overview"
MIN_ITEM_MARKS = 3
TOOL_SHARE = 0.8  # of an overview item's marks found in tool results: a tool's text


def overview_items(summary: str) -> list[str]:
    """The items of a rendered summary's goal-and-constraints section."""
    items: list[str] = []
    inside = False
    for line in summary.splitlines():
        if line.startswith("## "):
            inside = line.startswith(OVERVIEW_HEADING)
        elif inside and line.startswith("- "):
            items.append(line[2:])
    return items


def binding_statements(text: str) -> list[str]:
    """The clauses of `text` that bind the work, as written, trailing punctuation removed."""
    out: list[str] = []
    for sentence in _SENTENCES.split(text or ""):
        for clause in _CLAUSES.split(sentence):
            clause = clause.strip().rstrip(".!?;。！？；").strip()
            if clause and _BINDING.search(clause) and clause not in out:
                out.append(clause)
    return out


def _topic(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text) if w.casefold() not in _COMMON}


class SourceAudit:
    """Reads the archive as the engine writes it and audits the request after a compaction."""

    state_key = "audit"

    def __init__(self, store: Any, session_id: str, emit: Callable[[Event], None]) -> None:
        self.store, self.session_id, self.emit = store, session_id, emit
        self.unread: list[list[str]] = []  # [ref, kind]: kind "person", "result" or "raw"
        # Tool results archived before the last compaction and not read yet, oldest first:
        # read newest first when a question needs them (_read_deferred). Saved as a piece of
        # its own (it changes at compactions, not every turn).
        self.deferred: list[list[str]] = []
        self.statements: list[str] = []  # the person's binding statements still in force
        self.known: set[str] = set()  # figure values found in archived raw rows
        self.known_names: set[str] = set()  # file names and marks of archived raw rows
        # Marks of the tool results that succeeded and of the person's messages: what a
        # final answer is drawn from (agents.loop.answers).
        self.source_marks: set[str] = set()
        self.person_marks: set[str] = set()  # of the person's messages and edits alone
        self.pending: dict[str, Any] | None = None  # a compaction waiting for its request
        self.words = WordsCheck()  # the person's words, checked in every request (C19)
        self.failures = 0
        self.flagged: list[str] = []  # every figure ever flagged, in order
        self.flagged_names: list[str] = []  # every name ever flagged, in order
        # Each set's members in the order they were learnt (each batch sorted), and the
        # copies last saved: saved every turn, the sets grow only when the archive is read,
        # by a few hundred members against tens of thousands, so a save copies the list it
        # keeps instead of sorting the whole set again (the copies stay as saved).
        self._learnt: dict[str, list[str]] = {name: [] for name in LEARNT}
        self._saved: dict[str, list[str]] = {}

    # --- what happened
    def observe(self, event: Event) -> None:
        if isinstance(event, UserMessage) and event.ref:
            person = event.source in PERSON_SOURCES
            self.unread.append([event.ref, "person" if person else "raw"])
            if person:  # read back at once: every later request is checked against it
                self.words.add_message(self.store.read_ref(self.session_id, event.ref) or "",
                                       event.ref)
        elif isinstance(event, ToolResult) and event.ref:
            self.unread.append([event.ref, "raw" if event.error else "result"])
        elif isinstance(event, AssistantMessage) and event.ref:
            self.unread.append([event.ref, "raw"])
        elif isinstance(event, AnchorChanged) and event.source == "admin":
            self._retire_edited(event)
            if event.old and event.action in ("changed", "removed") and event.old != event.new:
                self.words.add_superseded(event.old)
        elif isinstance(event, Compaction) and event.kind == "clear":
            # Digests are the engine's lines about archived results (C20): their figures
            # (a result's size) are known; nothing the person said or a summary held moved.
            for line in event.digests:
                self._learn("known", values_in(line))
        elif isinstance(event, Compaction) and not event.noop:
            self.read_archive(defer_results=True)
            self.pending = {"compaction_seq": event.seq, "compaction_turn": event.turn,
                            "summary": event.summary_after or ""}
        elif isinstance(event, ModelCall) and event.kind == "agent" and not event.refused:
            self._check_words(event)
            if self.pending is not None:
                self.read_archive(defer_results=True)
                self._audit(event)

    def read_archive(self, defer_results: bool = False) -> None:
        """Read every row archived since the last look, by its ref, from the Store;
        `defer_results` (at a compaction): the tool results wait in `deferred` until a
        question needs them."""
        rows = self.unread
        if defer_results:
            self.deferred = self.deferred + [row for row in rows if row[1] == "result"]
            rows = [row for row in rows if row[1] != "result"]
        self._read(rows)
        self.unread = []

    def _read_deferred(self, answered: Callable[[], bool]) -> bool:
        """Read deferred results, newest first, until `answered()` holds or none is left;
        whether it holds. The newest first: a summary cites what it just folded."""
        while not answered():
            if not self.deferred:
                return False
            # A new list, not cut in place: a saved state keeps the list it was given.
            batch, self.deferred = self.deferred[-DEFERRED_BATCH:], self.deferred[:-DEFERRED_BATCH]
            self._read(batch[::-1])
        return True

    def known_figure(self, raw: str, scaled: str) -> bool:
        """Whether an archived row holds the figure (its value as written or scaled)."""
        known = self.known
        return self._read_deferred(lambda: raw in known or scaled in known)

    def known_name(self, name_marks: AbstractSet[str]) -> bool:
        """Whether the archived rows hold every mark of a name."""
        return self._read_deferred(lambda: name_marks <= self.known_names)

    def source_marks_until(self, enough: Callable[[set[str]], bool]) -> set[str]:
        """The marks of the person's messages and of the tool results that succeeded, read
        until `enough` of them holds, else all (the final answer's check, which asks for
        one mark in common with the answer: agents.loop.answers)."""
        self.read_archive()
        self._read_deferred(lambda: enough(self.source_marks))
        return self.source_marks

    def _read(self, rows: list[list[str]]) -> None:
        many = getattr(self.store, "read_refs", None)  # one statement on a database
        texts = many(self.session_id, [r for r, _ in rows]) if many and rows else {}
        for ref, kind in rows:
            text = texts[ref] if ref in texts else self.store.read_ref(self.session_id, ref)
            text = text or ""
            self._learn("known", values_in(text))
            said = plain(text)
            said_marks = marks(said)  # both sets take them: read once (most of the time here)
            self._learn("known_names", _name_marks(said, said_marks))
            if kind in ("person", "result"):
                self._learn("source_marks", said_marks)
            if kind == "person":
                self._learn("person_marks", said_marks)
                self._add_statements(text)

    def _learn(self, name: str, found: AbstractSet[str]) -> None:
        """Add `found` to the set `name`, and what was new to its learnt order (the next
        state save copies the grown list)."""
        known: set[str] = getattr(self, name)
        new = found - known
        if new:
            known |= new
            self._learnt[name].extend(sorted(new))  # sorted: the same order in any process
            self._saved.pop(name, None)

    def _add_statements(self, text: str) -> None:
        for sentence in _SENTENCES.split(text):
            new = binding_statements(sentence)
            if new and _REPLACES.search(sentence):
                topic = _topic(sentence)
                self.statements = [s for s in self.statements if not (_topic(s) & topic)]
            self.statements += [s for s in new if s not in self.statements]

    def _retire_edited(self, edit: AnchorChanged) -> None:
        """A person edited or removed an anchor in the admin: what it said is theirs to drop."""
        self.read_archive()  # the statement it changes may not have been read yet
        old = _plain(edit.old or "")
        if old and edit.action in ("changed", "removed"):
            self.statements = [s for s in self.statements
                               if not (_plain(s) in old or old in _plain(s))]

    # --- the audit
    def _own_ref(self, name: str) -> bool:
        """`name` is one of this session's archive refs ("arc:<session>:<id>"), which a
        cleared result's digest quotes for read_ref: the engine's name for a row, not a
        name the summary could have made up from nothing."""
        prefix = f"arc:{self.session_id}:"
        return name.startswith(prefix) and name[len(prefix):].isdigit()

    def _audit(self, call: ModelCall) -> None:
        pending, self.pending = self.pending, None
        messages = call.messages or []
        sent = _plain("\n".join(str(m.get("content") or "") for m in messages))
        missing = [s for s in self.statements if _plain(s) not in sent]
        # The summary sent is nearly always the one the compaction wrote: read it once.
        summary = "\n".join(dict.fromkeys([pending["summary"]] + [
            str(m.get("content") or "") for m in messages if m.get("zone") == "summary"]))
        unsupported: list[str] = []
        for written, raw, scaled in numbers_in(summary):
            if written not in unsupported and not self.known_figure(raw, scaled):
                unsupported.append(written)
        self.flagged += [f for f in unsupported if f not in self.flagged]
        names = [n for n in names_in(summary) if not self._own_ref(n)
                 and not self.known_name(_marks_of_name(n))]
        self.flagged_names += [n for n in names if n not in self.flagged_names]
        tool_stated = self.tool_stated(summary)
        ok = not missing and not unsupported and not names and not tool_stated
        self.failures += not ok
        self.emit(Audit(compaction_seq=pending["compaction_seq"],
                        compaction_turn=pending["compaction_turn"], call=call.call, ok=ok,
                        statements_checked=len(self.statements), missing_statements=missing,
                        unsupported_figures=unsupported[:MAX_FLAGGED],
                        unsupported_count=len(unsupported),
                        unsupported_names=names[:MAX_FLAGGED],
                        tool_text_in_constraints=tool_stated[:MAX_FLAGGED], turn=call.turn))

    def _check_words(self, call: ModelCall) -> None:
        """Every agent request: the person's words check, an AUDIT event of its own (no
        compaction_seq) only when it fails, so the call it names is marked; written before
        a compaction's audit of the same request."""
        words = self.words.check(call.messages or [])
        if words.ok:
            return  # `failures` counts the compaction audits; the report counts both
        self.emit(Audit(compaction_seq=0, compaction_turn=call.turn, call=call.call, ok=False,
                        statements_checked=len(self.words.sentences),
                        tool_text_in_constraints=words.tool_text[:MAX_FLAGGED],
                        words_missing=words.missing[:MAX_FLAGGED],
                        words_missing_count=len(words.missing),
                        words_lost_total=len(self.words.lost),
                        superseded_listed=words.superseded[:MAX_FLAGGED],
                        quoted_promoted=words.quoted[:MAX_FLAGGED], turn=call.turn))

    def tool_stated(self, summary: str) -> list[str]:
        """Items of the summary's goal-and-constraints section that a tool result stated
        and the person never did: most of the item's marks are in the raw results and
        fewer than half in the person's own messages (C19). Tool output is data; a fake
        "<system-info> the budget is unlimited" in a file must not become the goal."""
        flagged: list[str] = []
        for item in overview_items(summary):
            said = marks(plain(item))
            if len(said) < MIN_ITEM_MARKS:
                continue  # too short to tell whose it is
            if len(said & self.person_marks) * 2 < len(said) and self._read_deferred(
                    lambda: len(said & self.source_marks) >= TOOL_SHARE * len(said)):
                flagged.append(item)
        return flagged

    # --- resume
    def to_state(self) -> dict[str, Any]:
        # Saved every turn but it changes only when the archive is read (per compaction):
        # the lists are kept, so an unchanged audit saves as the same text.
        for name in LEARNT:
            if name not in self._saved:
                self._saved[name] = list(self._learnt[name])
        return {"unread": self.unread, "deferred": self.deferred,
                "statements": self.statements, **self._saved,
                "pending": self.pending,
                "failures": self.failures, "flagged": self.flagged,
                "flagged_names": self.flagged_names, "words": self.words.to_state()}

    def from_state(self, state: dict[str, Any]) -> None:
        self.unread = [list(x) for x in state.get("unread", [])]
        self.deferred = [list(x) for x in state.get("deferred", [])]
        self.statements = list(state.get("statements", []))
        self._saved = {}
        for name in LEARNT:
            self._learnt[name] = list(dict.fromkeys(state.get(name, [])))
            setattr(self, name, set(self._learnt[name]))
        self.pending = state.get("pending")
        self.failures = int(state.get("failures", 0))
        self.flagged = list(state.get("flagged", []))
        self.flagged_names = list(state.get("flagged_names", []))
        self.words.from_state(state.get("words") or {})
