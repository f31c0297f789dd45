"""The person's words (issue 13): what the person wrote stays in every request, verbatim.

Anchor extraction is a list of patterns, and the next way a person says "don't" will slip
past it. The person's own messages (the goal and every later message) are small next to
tool results, so the engine does not depend on extraction to keep them: each one is in
every request, either in the recent history, while it is there whole, or in this block,
once compaction has folded it away (or a cap cut it), unless the frozen task snapshot
holds it verbatim (the goal always is). Keeping only those avoids sending a message twice, and the block then changes only when compaction or a cut changes the
history, which restarts the cached prefix anyway (context.py).

Over its budget the block is condensed, oldest message first and visibly: a condensed
message keeps every sentence that holds a hard constraint (extracted, pinned or set by a
person), then, in the room the newer messages leave, its other sentences the least
repeated first (a requirement said once before background said a hundred times; no
pattern of any language decides it), and says how many sentences were left out and under
which archive ref they are. At the last resort the budget is what the rest of the request
leaves, and not even the model's checked condensing passes it.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from agents.words import condensing, condensing_parts, figure_groups
from agents.words.anchors import extract_anchors, sentences
from agents.words.quoted import marked, own_text

OPEN = "<person-words>"
INTRO = ("The person's own messages that are no longer in the recent turns below, verbatim "
         "and oldest first. Later messages override earlier ones where they differ:")
CLOSE = "</person-words>"
CONDENSED = ("[… {left} of {total} sentences of this message left out to fit the context; "
             "the full text is at {ref} — read it with read_ref(ref=\"{ref}\") …]")
# When even the person's hard constraints do not fit any request at the window: kept in the
# message's order while they fit, the rest left out, and said so in the block itself.
CONSTRAINTS_CUT = ("[… {left} of {total} sentences of this message left out, {hard} of them "
                   "the person's requirements: they do not fit any request at this window. "
                   "The full text is at {ref} — read it with read_ref(ref=\"{ref}\") before "
                   "relying on what is shown here …]")


@dataclass
class PersonMessage:
    turn: int
    ref: str
    text: str
    source: str = "user"  # goal | user | scenario | admin | pin
    replaces: str = ""  # an edit's: the anchor text it replaced or removed

    def to_state(self) -> dict:
        # Saved every turn for every message: a plain dict, not asdict's deep copy.
        state = {"turn": self.turn, "ref": self.ref, "text": self.text, "source": self.source}
        if self.replaces:
            state["replaces"] = self.replaces
        return state


MAX_PART_ANSWERS = 256  # a 100 000-character brief at a 2k window is some 60 parts

EDIT_KINDS = {"admin": "edited in the admin", "pin": "pinned"}


def _label(msg: PersonMessage) -> str:
    kind = "goal" if msg.source == "goal" else EDIT_KINDS.get(msg.source, "message")
    if msg.replaces:  # the engine's framing; the message after the label is the person's
        kind += f", replacing \"{msg.replaces}\"" if msg.text else \
            f", removing \"{msg.replaces}\" (no longer in force)"
    return f"[turn {msg.turn} · {kind} · {msg.ref or 'not archived'}]"


def holds_constraint(sentence: str, hard: tuple[str, ...]) -> bool:
    """True when `sentence` states a hard constraint: one extraction finds, or one that is
    active now (pinned or edited by a person), whose text it contains."""
    flat = " ".join(sentence.split()).casefold()
    if any(text and text in flat for text in hard):
        return True
    return any(a.tier == 1 for a in extract_anchors(sentence))


def condense(msg: PersonMessage, hard: tuple[str, ...], room: int = 0,
             count: Callable[[str], int] | None = None, cut_constraints: bool = False) -> str:
    """The message reduced to its sentences that hold hard constraints, with a marker; with
    `room` (tokens for the body, counted by `count`) also its other own sentences that fit,
    the least repeated first (see `_distinct_first`), in the message's order. Sentences
    that differ in one figure are given once with their figures in braces (figure_groups),
    as many of the figures as fit. `cut_constraints` (the request has no more room, and
    the constraints alone are over `room`): only the constraints that fit, in order."""
    parts = [s.strip() for s in sentences(msg.text) if s.strip()]
    own = own_text(msg.text)  # a pasted e-mail's "you must" is no constraint of theirs
    chosen = {i for i, s in enumerate(parts) if s in own and holds_constraint(s, hard)}
    if cut_constraints and count is not None:
        cut = _constraints_within(parts, chosen, max(0, room), count, msg.ref)
        if cut is not None:
            return cut
    if len(chosen) == len(parts):
        return msg.text
    items = figure_groups.group(parts)
    if room > 0 and count is not None:
        marker = CONDENSED.format(left=len(parts), total=len(parts), ref=msg.ref or "—")
        left = room - count(marker) - sum(count(parts[i]) + 1 for i in chosen)
        said = {parts[i] for i in chosen}  # a sentence said again is kept once
        home = {j: item for item in items for j in item.members}
        added: list[int] = []  # in the order taken, so the last can be given back
        for i in _distinct_first(parts):
            if i in chosen or parts[i] in said or parts[i] not in own or i not in home:
                continue  # (not in home: said again, tried at its first saying)
            item = home[i]
            # A group is taken whole when it fits, else as many of its figures as fit,
            # in the message's order (the first the sentence, each next a figure more).
            members = [j for j in item.members
                       if j not in chosen and parts[j] not in said and parts[j] in own] \
                if len(item.figures) > 1 else [i]
            shown = sum(j in chosen for j in item.members) if len(item.figures) > 1 else 0
            for j in members:
                # A figure more in the list, and its braces when it becomes one.
                cost = (count("," + parts[j][len(item.prefix):len(parts[j]) - len(item.suffix)])
                        + (2 if shown == 1 else 0)) if shown else count(parts[j]) + 1
                if cost > left:
                    break
                chosen.add(j)
                said.add(parts[j])
                added.append(j)
                left -= cost
                shown += 1
        body = _render(parts, items, chosen, msg.ref)
        while added and count(body) > room:  # sums of counts are not the count of the sum
            chosen.discard(added.pop())
            body = _render(parts, items, chosen, msg.ref)
        # Every sentence fits: the message whole, a sentence said again once.
        return (grouped_body(msg.text) or msg.text) if body is None else body
    return _render(parts, items, chosen, msg.ref) or msg.text


def _constraints_within(parts: list[str], hard: set[int], room: int,
                        count: Callable[[str], int], ref: str) -> str | None:
    """The message's constraint sentences that fit `room`, in order, and a marker saying
    how many sentences and constraints were left out; None when they all fit."""
    marker = CONSTRAINTS_CUT.format(left=len(parts), total=len(parts), hard=len(hard),
                                    ref=ref or "—")
    if sum(count(parts[i]) + 1 for i in hard) + count(marker) <= room:
        return None
    left = room - count(marker)
    kept: list[int] = []
    for i in sorted(hard):
        cost = count(parts[i]) + 1
        if cost > left:
            break  # in order: a later constraint is not shown without the earlier ones
        kept.append(i)
        left -= cost
    marker = CONSTRAINTS_CUT.format(left=len(parts) - len(kept), total=len(parts),
                                    hard=len(hard) - len(kept), ref=ref or "—")
    return " ".join([*(parts[i] for i in kept), marker])


def _render(parts: list[str], items: list[figure_groups.Item], chosen: set[int],
            ref: str) -> str | None:
    """The `chosen` sentences of `parts` in the message's order, a group with its chosen
    figures, and the marker saying how many were left out (None: nothing was)."""
    if len(chosen) == len(parts):
        return None
    out = []
    for item in items:
        if len(item.figures) > 1:
            figures = [f for j, f in zip(item.members, item.figures) if j in chosen]
            if figures:
                out.append(item.render(figures))
        elif any(j in chosen for j in item.members):
            out.append(item.prefix)
    # A sentence said again counts as left out each time it is not repeated.
    marker = CONDENSED.format(left=len(parts) - len(chosen), total=len(parts), ref=ref or "—")
    return " ".join(out + [marker])


def _distinct_first(parts: list[str]) -> list[int]:
    """The indexes of `parts`, the sentence whose words the rest of the message repeats
    least first: by the mean over its content units (figures aside, in any script) of one
    over the number of the message's sentences holding that unit. A long brief's
    background said again and again ranks last, a requirement said once first; among
    equals, the earlier first."""
    held = [{u for u in condensing.units(p) if not u.isdigit()} for p in parts]
    spread: dict[str, int] = {}
    for said in held:
        for unit in said:
            spread[unit] = spread.get(unit, 0) + 1

    def rarity(i: int) -> float:
        said = held[i]
        return sum(1 / spread[u] for u in said) / len(said) if said else 0.0

    return sorted(range(len(parts)), key=lambda i: -rarity(i))


def _flat_text(text: str) -> str:
    return " ".join(text.split()).rstrip(".!?;。！？；").casefold()


def without_superseded(items: list[str], superseded: list[str]) -> list[str]:
    """`items` less those that state a text the person replaced or removed (compared by
    their words, in any language: no pattern decides what a replaced text is)."""
    gone = [flat for text in superseded if (flat := _flat_text(text))]
    return [item for item in items if not any(g in _flat_text(item) for g in gone)]


@lru_cache(maxsize=64)
def grouped_body(text: str) -> str | None:
    """The message with a sentence said again once and sentences that differ in one figure
    once, with their figures (figure_groups); None when that saves nothing or the message
    holds pasted material (kept verbatim and marked, never regrouped)."""
    if own_text(text) != text:
        return None
    return figure_groups.grouped([s.strip() for s in sentences(text) if s.strip()])


def _normalise(hard: list[str]) -> tuple[str, ...]:
    return _normalised(tuple(hard))


@lru_cache(maxsize=64)
def _normalised(hard: tuple[str, ...]) -> tuple[str, ...]:
    # Asked at every measure of the context (a dozen times a turn), for the same constraints.
    return tuple(" ".join(h.rstrip("…").split()).casefold() for h in hard)


def _block(messages: list[PersonMessage], bodies: list[str]) -> str:
    entries = [f"{_label(m)} {body}" for m, body in zip(messages, bodies)]
    return "\n".join([OPEN, _intro(entries), *entries, CLOSE])


def _intro(entries: list[str]) -> str:
    """INTRO, and how to read a brace list of figures when an entry has one."""
    if any(figure_groups.has_groups(entry) for entry in entries):
        return f"{INTRO}\n{figure_groups.GROUPED_NOTE}"
    return INTRO


class PersonWords:
    """The person's messages of this session, and the block for those out of the history."""

    def __init__(self) -> None:
        self.messages: list[PersonMessage] = []
        self._key: tuple | None = None
        self._text = ""
        self._condensed: dict[tuple, str] = {}
        self._minimum_key: tuple | None = None
        self._minimum = 0
        self.condensed: list[PersonMessage] = []  # those the last block condensed
        # Those the last block gave with repeated sentences once, nothing left out.
        self.grouped: list[PersonMessage] = []
        # Past the share the older messages are condensed by the model (condensing.py):
        # its checked results by the older messages they were made from, the set the last
        # block wanted one for (the loop asks), and the result the last block used.
        self.model_results: dict[tuple, condensing.Condensed] = {}
        self.wanted: tuple[list[condensing.Entry], list[condensing.Entry]] | None = None
        self.model_used: condensing.Condensed | None = None
        self.model_failed = ""  # why the last block's older messages have no answer to use
        # Older messages too many for one request are condensed in parts (condensing_parts):
        # each part's checked answer by its contents, so a new older message asks only for
        # the parts it changed.
        self.part_answers: dict[tuple, condensing_parts.PartAnswer] = {}
        self.results_version = 0

    def add(self, turn: int, ref: str, text: str, source: str = "user",
            replaces: str = "") -> None:
        self.messages.append(PersonMessage(turn, ref, text, source, replaces))

    def outside(self, history_texts: dict[str, str], snapshot: str = "") -> list[PersonMessage]:
        """Messages not whole in the history (`history_texts`: ref → text there) nor in the
        frozen `snapshot` (the goal is there verbatim, so is a message an anchor holds
        word for word): each of the person's words is sent once per request."""
        return [m for m in self.messages
                if (history_texts.get(m.ref) != m.text or not m.ref)
                and not (m.text.strip() and m.text.strip() in snapshot and not m.replaces)]

    def render(self, history_texts: dict[str, str], budget: int, hard: list[str],
               count: Callable[[str], int], snapshot: str = "", strict: bool = False) -> str:
        """The block ("" when every message is whole in the history or the snapshot);
        cached, so the same state always gives the same text and costs nothing to ask for
        again. `strict`: `budget` is all the request has left (the last resort), so the
        block never passes it, not even with the model's checked answer."""
        shown = self.outside(history_texts, snapshot)
        hard_norm = _normalise(hard)
        key = (tuple(m.ref for m in shown), budget, hard_norm, strict)
        if key == self._key:
            return self._text
        self._key, self._text = key, self._build(shown, budget, hard_norm, count, strict)
        return self._text

    def minimum_tokens(self, hard: list[str], count: Callable[[str], int],
                       snapshot: str = "") -> int:
        """Tokens of the block with every message condensed to its hard-constraint
        sentences: no compaction can go below this (the preflight's part). A message still
        whole in the history takes at least as much there, so this bounds both places;
        one the `snapshot` holds word for word (the goal) is counted there instead."""
        shown = self.outside({}, snapshot)
        if not shown:
            return 0
        hard_norm = _normalise(hard)
        key = (tuple(m.ref for m in shown), hard_norm)
        if key != self._minimum_key:
            bodies = [self._condense(m, hard_norm) for m in shown]
            self._minimum_key = key
            self._minimum = count(_block(shown, bodies))
        return self._minimum

    def _condense(self, msg: PersonMessage, hard: tuple[str, ...], room: int = 0,
                  count: Callable[[str], int] | None = None,
                  cut_constraints: bool = False) -> str:
        cache_key = (msg.ref, msg.text, hard, max(0, room) if count is not None else 0,
                     cut_constraints)
        if cache_key not in self._condensed:
            if len(self._condensed) > 256:
                self._condensed.clear()
            self._condensed[cache_key] = condense(msg, hard, room, count, cut_constraints)
        return self._condensed[cache_key]

    def _build(self, shown: list[PersonMessage], budget: int, hard: tuple[str, ...],
               count: Callable[[str], int], strict: bool = False) -> str:
        self.condensed, self.wanted, self.model_used, self.model_failed = [], None, None, ""
        self.grouped = []
        if not shown:
            return ""
        bodies = [marked(m.text) for m in shown]  # pasted material verbatim, marked quoted
        cost = [count(f"{_label(m)} {b}") for m, b in zip(shown, bodies)]
        fixed = count("\n".join([OPEN, INTRO, CLOSE])) + len(shown)
        note = count(figure_groups.GROUPED_NOTE) + 1
        if budget > 0 and fixed + sum(cost) > budget:
            # Nothing lost first: a sentence said again given once, sentences that differ
            # in one figure given once with their figures (figure_groups), before any
            # condensing that leaves words out.
            regrouped = [grouped_body(m.text) for m in shown]
            if any(regrouped):
                whole = [g or b for g, b in zip(regrouped, bodies)]
                noted = note if any(figure_groups.has_groups(b) for b in whole) else 0
                if fixed + noted + sum(count(f"{_label(m)} {b}")
                                       for m, b in zip(shown, whole)) <= budget:
                    self.grouped = [m for m, g in zip(shown, regrouped) if g]
                    return _block(shown, whole)
            # Past the share: the newest stay verbatim within half of it, the older go to
            # the model. With its checked answer the block may pass the share by what failed
            # the check (verbatim beats condensing); only the request's limit (the floor,
            # budget 0) brings back the rule below, which says what it left out.
            split, room = len(shown), budget // 2 - fixed
            while split > 0 and cost[split - 1] <= room:
                room -= cost[split - 1]
                split -= 1
            if split > 0:
                older, later = self._entries(shown[:split]), self._entries(shown[split:])
                result = self.model_results.get(condensing.key_of(older))
                if result is not None and not result.failed:
                    entries = condensing.render(result, older) + [
                        f"{self._numbered_label(m, e.position)} {body}"
                        for m, e, body in zip(shown[split:], later, bodies[split:])]
                    text = "\n".join([OPEN, _intro(entries), *entries, CLOSE])
                    if not strict or count(text) <= budget:
                        self.model_used = result
                        self.condensed = list(shown[:split])
                        return text
                elif result is None:
                    self.wanted = (older, later)
                else:
                    self.model_failed = result.failed
                    if result.unfit and not strict:
                        # No answer was asked for, none could fit: offered whole as an
                        # answer would have been, past the share, so fitting the request
                        # brings the block to the last resort below, which fills the room
                        # the request leaves (not the share).
                        whole = [g or b for g, b in zip(
                            (grouped_body(m.text) for m in shown), bodies)]
                        return _block(shown, whole)
        for i, msg in enumerate(shown):  # oldest first, until the block fits
            if fixed + sum(cost) <= budget:
                break
            # The room the others leave it, as they stand (the newer ones still whole):
            # filled with its least repeated sentences after its constraints.
            room = budget - fixed - (sum(cost) - cost[i]) - count(_label(msg)) - 1
            if not any(figure_groups.has_groups(b) for b in bodies) \
                    and figure_groups.has_groups(grouped_body(msg.text) or ""):
                room -= note  # the block will say how to read a brace list of figures
            bodies[i] = self._condense(msg, hard, room, count)
            cost[i] = count(f"{_label(msg)} {bodies[i]}")
            if bodies[i] != msg.text:
                self.condensed.append(msg)
        if strict and fixed + sum(cost) > budget:
            # Even the hard constraints are over the room the request leaves (a pasted list
            # of hundreds of requirements in a small window): rather than no request at
            # all, the oldest messages give theirs up first, each cut where it stops
            # fitting and saying so; the words check reports every sentence left out.
            for i, msg in enumerate(shown):
                if fixed + sum(cost) <= budget:
                    break
                room = budget - fixed - (sum(cost) - cost[i]) - count(_label(msg)) - 1
                body = self._condense(msg, hard, room, count, cut_constraints=True)
                shorter = count(f"{_label(msg)} {body}")
                if shorter >= cost[i]:
                    continue  # its constraints are fewer than the note saying they are cut
                bodies[i], cost[i] = body, shorter
                if msg not in self.condensed:
                    self.condensed.append(msg)
        return _block(shown, bodies)

    def least_condensed_tokens(self, older: list[condensing.Entry],
                               later: list[condensing.Entry],
                               count: Callable[[str], int]) -> int:
        """The fewest tokens a block made from any checked condensing of `older` can take,
        known before asking (condensing.least_answer_tokens): its header and frame, the
        `later` messages verbatim, and the least the answer can be."""
        frame = [OPEN, INTRO, *condensing.render(condensing.Condensed(key=()), older),
                 *(e.text for e in later), CLOSE]
        return count("\n".join(frame)) + condensing.least_answer_tokens(older, count)

    def _entries(self, shown: list[PersonMessage]) -> list[condensing.Entry]:
        positions = {id(m): i + 1 for i, m in enumerate(self.messages)}
        return [condensing.Entry(positions[id(m)], m.turn, m.ref, m.text,
                                 grouped_body(m.text) or "") for m in shown]

    @staticmethod
    def _numbered_label(msg: PersonMessage, position: int) -> str:
        # A later message kept verbatim next to condensed ones: its label is what a
        # "superseded by" line names.
        return f"[m{position} · {_label(msg)[1:]}"

    def store_condensed(self, result: condensing.Condensed) -> None:
        """A condensing answer, checked (or the reason there is none): used by every
        block made from the same older messages, so they are asked for once."""
        if len(self.model_results) >= 8:  # older sets only grow: the newest few matter
            self.model_results.pop(next(iter(self.model_results)))
        while len(self.part_answers) > MAX_PART_ANSWERS:
            self.part_answers.pop(next(iter(self.part_answers)))
        self.model_results[result.key] = result
        self.results_version += 1
        self._key = None

    def superseded(self) -> list[str]:
        """The anchor texts a person's edit replaced or removed, oldest first, less any a
        later edit set again."""
        gone: list[str] = []
        for msg in self.messages:
            if msg.text in gone:
                gone.remove(msg.text)
            if msg.replaces and msg.replaces != msg.text and msg.replaces not in gone:
                gone.append(msg.replaces)
        return gone

    def to_state(self) -> list[dict]:
        return [m.to_state() for m in self.messages]

    def condensed_state(self) -> list[dict]:
        return [r.to_state() for r in self.model_results.values()]

    def restore(self, raw: list[dict], condensed: list[dict] | None = None) -> None:
        self.messages = [PersonMessage(**m) for m in raw or ()]
        results = [condensing.Condensed.from_state(r) for r in condensed or ()]
        self.model_results = {r.key: r for r in results}
        self._key = self._minimum_key = None
