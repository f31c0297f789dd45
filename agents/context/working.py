"""The working context (features C1, C5, C17): what goes into the next request, zone by zone.

Layout by attention and by cache (C17). Providers bill a request's prefix that repeats an
earlier request at 10–25 % of the price, so what stays the same between compactions
comes first and what changes every turn comes last:

    stable  system prompt · (tools) · task snapshot as of the last compaction ·
            the person's words (their messages no longer whole in the recent turns) ·
            summary · recent turns, append-only
    tail    "since then" (what changed in the snapshot since it was frozen) · hints

Between two compactions every request starts with the previous request minus its tail,
so all of it but the newest round and the tail is billed as cached. The snapshot is
frozen again at each compaction (when everything after the system prompt changes anyway),
when a hard constraint or a person's anchor changes (they must be in the snapshot, not
only in the tail), and when the "since then" block outgrows its budget.

Every message carries its token count from the moment it arrives, so building and
measuring a request is a sum over a short list, not a re-encode of the history.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents.config import ContextConfig
from agents.context.budget import Budget, plan_budget
from agents.context.history import Msg, Unit, group_units
from agents.counting.tokens import REPLY_PRIMING, TOKENS_PER_MESSAGE, TextCache, TokenCounter
from agents.words.person import PersonWords

# What the engine adds to each message of a MODEL_CALL (Request.described): never sent.
ANNOTATIONS = ("zone", "tokens", "ref")
CUT_NOTE = "[… {cut} tokens cut here to fit the context; the full text is at {ref} — read it with read_ref(ref=\"{ref}\") …]"
# Shorter notes for small caps: the long note alone costs about 47 tokens.
CUT_NOTES = (CUT_NOTE, "[… {cut} tokens cut; full text: {ref} …]", "[… cut: {ref}]", "[…]")


@dataclass
class Request:
    """One request as it will be sent, with each message's zone and token count."""

    messages: list[dict[str, Any]]
    zones_of: list[str]
    tokens_of: list[int]
    tools: list[dict[str, Any]]
    zones: dict[str, int]
    total: int
    refs_of: list[str] = field(default_factory=list)  # each message's archive ref, or ""
    # build()'s: its lists as it made them, and the messages described (Msg.described).
    built: tuple[tuple[list, list, list, list], list[dict[str, Any]]] | None = field(
        default=None, repr=False, compare=False)

    def described(self) -> list[dict[str, Any]]:
        """Messages with their zone, tokens and archive ref: what the drawer's inspector
        shows, and how a stored call points at an archived text instead of copying it."""
        refs = self.refs_of or [""] * len(self.messages)
        # The lists compare their items by identity first: no message is read again.
        if self.built is not None and self.built[0] == (self.messages, self.zones_of,
                                                        self.tokens_of, refs):
            return list(self.built[1])
        return [{**m, "zone": z, "tokens": t, **({"ref": r} if r else {})}
                for m, z, t, r in zip(self.messages, self.zones_of, self.tokens_of, refs)]


@dataclass
class WorkingContext:
    """The three in-context layers: system + snapshot, summary, recent history."""

    counter: TokenCounter
    config: ContextConfig
    window: int
    system_prompt: str
    tools: list[dict[str, Any]] = field(default_factory=list)
    history: list[Msg] = field(default_factory=list)
    summary: dict[str, Any] | None = None
    summary_text: str = ""
    snapshot_text: str = ""  # the frozen snapshot, in the stable part of every request
    live_snapshot: str = ""  # the snapshot as rendered this turn
    final_phase: bool = False
    extra_reserve: int = 0
    correction: float = 1.0  # provider's count / ours, raised after an overflow error
    hard_constraints: list[str] = field(default_factory=list)  # kept when words condense
    words_floor: bool = False  # over the limit: the words block keeps only constraints
    # ... and what the rest of the request left it then: the block fills this room (the
    # newest messages whole, the oldest condensed to their constraints and their least
    # repeated sentences) instead of condensing every message to its constraints.
    words_room: int = 0

    def __post_init__(self) -> None:
        self.count = TextCache(self.counter)
        self._system_msg = Msg.build(self.counter, {"role": "system", "content": self.system_prompt})
        self._tools_tokens = self.counter.tools(self.tools)
        self._snapshot_msg: Msg | None = None
        self._frozen_lines: tuple[str, frozenset[str]] = ("", frozenset())
        self._since_msg: Msg | None = None
        self._summary_msg: Msg | None = None
        self._budget_key: tuple | None = None
        self._budget: Budget | None = None
        self.person = PersonWords()
        self._words_msg: Msg | None = None
        self._words_text = ""
        self._words_inputs: tuple | None = None  # what the block last rendered was made from
        self._history_key: tuple[Msg, ...] = ()
        self._history_tokens = 0
        # The history last read for its person's messages (words_msg), and their texts.
        self._user_texts_of: tuple[tuple[Msg, ...], dict[str, str]] = ((), {})
        # The history last built into a request, and its messages' datas, tokens, refs
        # and described dicts in that request's lists (build).
        self._built_history: tuple[tuple[Msg, ...], tuple[list, ...]] = ((), ([], [], [], []))
        # The history last saved (to_state), and its messages' states in that list.
        self._saved_of: tuple[tuple[Msg, ...], list[dict[str, Any]]] = ((), [])
        self.set_summary(self.summary, self.summary_text)

    # --- budget
    def budget(self) -> Budget:
        """The budget for the current window and phase; recomputed only when those change."""
        key = (self.window, self.correction, self.final_phase, self.extra_reserve)
        if self._budget_key != key:
            self._budget_key = key
            self._budget = plan_budget(int(self.window / self.correction), self.config,
                                       final_phase=self.final_phase,
                                       extra_reserve=self.extra_reserve)
        return self._budget

    # --- the layers
    def set_snapshot(self, text: str) -> None:
        """Take this turn's snapshot; what differs from the frozen one goes to the tail."""
        if self._snapshot_msg is None:
            self.live_snapshot = text
            self.freeze_snapshot()
            return
        if text == self.live_snapshot:
            return
        self.live_snapshot = text
        lines = since_lines(self.snapshot_text, text, self.frozen_lines())
        # The block gains a line or two a turn: counted line by line, only new lines encode.
        self._since_msg = (Msg.build(self.counter, {"role": "user", "content": "\n".join(lines)},
                                     content_tokens=self.count.lines(lines))
                           if lines else None)

    def frozen_lines(self) -> frozenset[str]:
        """The frozen snapshot's lines, split again only when it was frozen anew: every
        turn reads them twice (the tail's new lines, and whether a refreeze is due)."""
        if self._frozen_lines[0] != self.snapshot_text:
            self._frozen_lines = (self.snapshot_text, frozenset(self.snapshot_text.splitlines()))
        return self._frozen_lines[1]

    def freeze_snapshot(self) -> None:
        """Put this turn's snapshot into the stable part (a new cached prefix starts here)."""
        self.snapshot_text = self.live_snapshot
        self._snapshot_msg = Msg.build(self.counter, {"role": "system",
                                                      "content": self.snapshot_text})
        self._since_msg = None

    def add_person(self, turn: int, ref: str, text: str, source: str,
                   replaces: str = "") -> None:
        """A message the person wrote (or an edit they made, of the anchor `replaces`):
        kept in every request from now on (C19)."""
        self.person.add(turn, ref, text, source, replaces)

    def words_msg(self) -> Msg | None:
        """The person's words block as it stands: their messages that are not whole in the
        history. Asked a dozen times a turn (every measure of the request), so it is rendered
        again only when one of its inputs changed."""
        # Whole while they fit their share of the input limit (C19); the zone's own
        # budget is only a claim the rolling window plans around, never a cap.
        budget = max(0, self.words_room) if self.words_floor else self.budget().words_share
        # Every input, compared by value: the history's messages (a Msg is never changed in
        # place, so tuple equality, identity first, sees any append, cut or replacement),
        # the budget, the constraints, the frozen snapshot and the person's messages.
        inputs = (tuple(self.history), budget, tuple(self.hard_constraints),
                  self.snapshot_text, tuple(self.person.messages),
                  self.person.results_version)
        if inputs == self._words_inputs:
            return self._words_msg
        self._words_inputs = inputs
        history = self._user_texts(inputs[0])
        text = self.person.render(history, budget, self.hard_constraints, self.count,
                                  snapshot=self.snapshot_text, strict=self.words_floor)
        if text != self._words_text:
            self._words_text = text
            self._words_msg = (Msg.build(self.counter, {"role": "system", "content": text})
                               if text else None)
        return self._words_msg

    def _user_texts(self, key: tuple[Msg, ...]) -> dict[str, str]:
        """Ref → text of the person's messages in history `key`; when `key` is the last
        one asked about with messages appended (most changes), only those are read."""
        old, texts = self._user_texts_of
        grown = grown_by(old, key)
        if grown is None:
            grown, texts = key, {}
        new = [m for m in grown if m.ref and m.data.get("role") == "user"]
        if new:
            texts = dict(texts)
            for m in new:
                texts[m.ref] = m.text
        self._user_texts_of = (key, texts)
        return texts

    def history_tokens(self) -> int:
        """The history zone's tokens, summed again only when the history changed (the same
        equality as words_msg's)."""
        key = tuple(self.history)
        old = self._history_key
        if key != old:
            grown = grown_by(old, key)
            self._history_tokens = (sum(m.tokens for m in key) if grown is None
                                    else self._history_tokens + sum(m.tokens for m in grown))
            self._history_key = key
        return self._history_tokens

    def since_tokens(self) -> int:
        return self._since_msg.tokens if self._since_msg else 0

    def set_summary(self, summary: dict[str, Any] | None, text: str) -> None:
        self.summary, self.summary_text = summary, text
        # The compactor has just counted this rendering (TextCache): no second encode.
        self._summary_msg = (Msg(data={"role": "system", "content": text},
                                 tokens=self.count(text) + self.count("system")
                                 + TOKENS_PER_MESSAGE) if text else None)

    def add(self, data: dict[str, Any], turn: int, ref: str = "", cap: int | None = None) -> Msg:
        """Append a message, cutting its text to `cap` tokens (the raw text stays at `ref`)."""
        msg = Msg.build(self.counter, data, turn, ref)
        if cap is not None and msg.tokens > cap and isinstance(data.get("content"), str):
            msg = self.shortened(msg, cap)
        self.history.append(msg)
        return msg

    def shortened(self, msg: Msg, cap: int) -> Msg:
        """A copy of `msg` whose content keeps head and tail so the message costs ≤ cap.

        The cut note shrinks with the cap, down to "[…]"; only when the message's framing
        alone (role, ids, tool calls) exceeds the cap is the content emptied and the cap
        missed by that framing, which no cut of the content can help.
        """
        text = msg.text
        total = self.counter.text(text)
        room = cap - (msg.tokens - total)  # content tokens allowed: framing is additive
        ref = msg.ref or "the archive"
        tokens = self.counter.encoding.encode(text, disallowed_special=())
        for template in CUT_NOTES:
            note = template.format(cut=max(0, total - room), ref=ref)
            keep = room - self.counter.text(note) - 2  # two newlines around the note
            if keep < 0:
                continue
            while True:
                head = self.counter.encoding.decode(tokens[: keep * 2 // 3])
                tail = self.counter.encoding.decode(tokens[len(tokens) - keep // 3:]) \
                    if keep // 3 else ""
                new_text = f"{head}\n{note}\n{tail}" if keep > 0 else note
                candidate = Msg.build(self.counter, {**msg.data, "content": new_text},
                                      msg.turn, msg.ref)
                if candidate.tokens <= cap:
                    return candidate
                if keep <= 0:
                    break
                keep = int(keep * 0.9) - 1  # a decoded cut can re-encode a token longer
        return Msg.build(self.counter, {**msg.data, "content": ""}, msg.turn, msg.ref)

    def units(self) -> list[Unit]:
        return group_units(self.history)

    # --- measuring and building
    def tools_tokens(self) -> int:
        return self._tools_tokens

    def fixed_tokens(self) -> int:
        """System prompt, tool schemas and reply priming: what no compaction can shrink."""
        return REPLY_PRIMING + self._system_msg.tokens + self._tools_tokens

    def zones(self, hints: list[Msg] | None = None) -> dict[str, int]:
        budget = self.budget()
        return {
            "system": self.fixed_tokens(),
            "snapshot": self._snapshot_msg.tokens if self._snapshot_msg else 0,
            "words": words.tokens if (words := self.words_msg()) else 0,
            "summary": self._summary_msg.tokens if self._summary_msg else 0,
            "history": self.history_tokens(),
            "since": self.since_tokens(),
            "hints": sum(m.tokens for m in hints or ()),
            "reserve": budget.reserve,
        }

    def stable_head(self) -> list[tuple[str, Msg]]:
        """The part before the history, in order: identical in every request until the
        next compaction or freeze, and the start of every summary request too."""
        parts: list[tuple[str, Msg]] = [("system", self._system_msg)]
        if self._snapshot_msg is not None:
            parts.append(("snapshot", self._snapshot_msg))
        # The person's words: stable between compactions, like the snapshot before it.
        if (words := self.words_msg()) is not None:
            parts.append(("words", words))
        if self._summary_msg is not None:
            parts.append(("summary", self._summary_msg))
        return parts

    def input_tokens(self, hints: list[Msg] | None = None) -> int:
        zones = self.zones(hints)
        return sum(v for k, v in zones.items() if k != "reserve")

    def build(self, hints: list[Msg] | None = None) -> Request:
        # The history's part of the lists is kept from the last build and extended by the
        # messages appended since (most turns): the older messages are not read again.
        key = tuple(self.history)
        old, history = self._built_history
        grown = grown_by(old, key)
        if grown is None:
            grown, history = key, ([], [], [], [])
        if grown:
            datas, tokens, refs, described = (list(x) for x in history)
            for m in grown:
                datas.append(m.data)
                tokens.append(m.tokens)
                refs.append(m.ref)
                described.append(m.described("history"))
            history = (datas, tokens, refs, described)
        self._built_history = (key, history)
        head = self.stable_head()
        tail: list[tuple[str, Msg]] = []
        if self._since_msg is not None:
            tail.append(("since", self._since_msg))
        tail.extend(("hints", m) for m in hints or ())
        zones = self.zones(hints)
        messages = [m.data for _, m in head] + history[0] + [m.data for _, m in tail]
        zones_of = [z for z, _ in head] + ["history"] * len(key) + [z for z, _ in tail]
        tokens_of = [m.tokens for _, m in head] + history[1] + [m.tokens for _, m in tail]
        refs_of = [m.ref for _, m in head] + history[2] + [m.ref for _, m in tail]
        described = ([m.described(z) for z, m in head] + history[3]
                     + [m.described(z) for z, m in tail])
        return Request(messages=messages, zones_of=zones_of, tokens_of=tokens_of,
                       tools=self.tools, zones=zones,
                       total=sum(v for k, v in zones.items() if k != "reserve"),
                       refs_of=refs_of,
                       built=((list(messages), list(zones_of), list(tokens_of), list(refs_of)),
                              described))

    # --- persistence (resume, feature T8)
    def to_state(self) -> dict[str, Any]:
        return {"history": self._history_state(), "summary": self.summary,
                "snapshot": self.snapshot_text,
                "summary_text": self.summary_text, "final_phase": self.final_phase,
                "extra_reserve": self.extra_reserve, "correction": self.correction,
                "window": self.window, "person": self.person.to_state(),
                "person_condensed": self.person.condensed_state()}

    def _history_state(self) -> list[dict[str, Any]]:
        """The history's saved form, a new list every save; a turn that only appended
        messages reads only those (the others' states are the last save's)."""
        key = tuple(self.history)
        old, states = self._saved_of
        grown = grown_by(old, key)
        states = ([m.to_state() for m in key] if grown is None
                  else states + [m.to_state() for m in grown])
        self._saved_of = (key, states)
        return list(states)

    def restore(self, state: dict[str, Any]) -> None:
        self.history = [Msg.from_state(m) for m in state.get("history", [])]
        self.set_summary(state.get("summary"), state.get("summary_text", ""))
        if state.get("snapshot"):  # the frozen snapshot, so the cached prefix stays the same
            self.live_snapshot = state["snapshot"]
            self.freeze_snapshot()
        self.final_phase = state.get("final_phase", False)
        self.extra_reserve = state.get("extra_reserve", 0)
        self.correction = state.get("correction", 1.0)
        self.window = state.get("window", self.window)
        self.person.restore(state.get("person", []), state.get("person_condensed"))


def grown_by(old: tuple[Msg, ...], new: tuple[Msg, ...]) -> tuple[Msg, ...] | None:
    """The messages `new` adds to `old` when it is `old` with messages appended (the
    tuples compare their items by identity first: no message is read; one that is not the
    same object is compared by value, and an equal one stands for it), else None."""
    n = len(old)
    if len(new) < n or new[:n] != old:
        return None
    return new[n:]


SINCE_OPEN = "<snapshot-update>"
SINCE_INTRO = "Changes since the task snapshot above was written (these lines win over it):"


def since_lines(frozen: str, live: str, frozen_lines: frozenset[str] | None = None) -> list[str]:
    """The "since then" block's lines: the snapshot lines new since `frozen`, wrapped in
    the block's tags; [] when there are none.

    Only additions: a line that left the snapshot (an older finding rolled out of its
    budget) is still true, and one that was corrected has its newer line here, which the
    intro says wins. Hard constraints never rely on this block (the snapshot is frozen
    anew when they change). `frozen_lines`: the lines of `frozen`, when the caller has them.
    """
    before = set(frozen.splitlines()) if frozen_lines is None else frozen_lines
    added = [line for line in live.splitlines() if line not in before and not line.startswith("<")]
    if not added:
        return []
    return [SINCE_OPEN, SINCE_INTRO, *added, "</snapshot-update>"]
