"""The person's older messages condensed in several model requests when one cannot hold them
(feature C19; the check is condensing.py's).

A 100 000-character brief, or many messages, does not fit one condensing request at an 8k
window with room for its answer. Rather than fall back to the rule (which keeps only
constraint sentences), the older messages are cut into parts that each fit a request with
the answer's full reserve: whole messages while they fit, a message too long for one part
cut between its sentences (each piece keeps the message's label, so its lines still cite
"[m1]"; a sentence longer than a part is cut between words, and the check keeps it
verbatim unless a line covers the whole of it).

Each part's answer goes through the same check as a single request's: a line must cite a
message of its part and be supported by that message's own whole text. The lines of every
part are then checked together against every sentence of the whole messages, so a
sentence is kept by a line from any part that cites its message, and "superseded by"
claims are held to the same rule (a later message that is kept, sharing a content unit).

Parts are asked newest first: each request after the first lists the lines the later
parts' answers kept that cite later messages, so the model can name a sentence a message in
another part changed. They take at most a quarter of the room, those sharing a content unit
with the part first (by the words and CJK characters a line shares with one of its
sentences); past it the rest are left out, and a sentence whose correction the
model was not shown stays listed as in force, never dropped. Each part's checked lines are cached by the messages (or pieces) it holds, so a
new older message asks only for the parts that changed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from agents.protocol import CONDENSED_LATER_LINE, words_label
from agents.words.anchors import sentences
from agents.words.condensing import (CitingLine, Condensed, Entry, flat, key_of,
                                     message_sentences, request, resolve, units, usable_lines)

ANSWER_SLACK = 256  # the answer may quote every sentence of its part, and a little more
MARGIN = 32  # tokens a provider's count may exceed ours by
REFERENCE_SHARE = 4  # the later parts' lines take at most 1/4 of a part request's room
ENTRY_OVERHEAD = 8  # an entry's label and the blank line before it
MIN_PART = 128  # a part (text and answer) smaller than this is not worth a request
CONSTRAINTS_HEAD = ("The person's hard constraints, from all their messages (for reference; "
                    "they stay in the task snapshot, do not restate them):")
PART_LINE = ("Part {number} of {total}: the older messages are too long for one request and "
             "are condensed in {total}; write lines only for the messages below.")

# ask(messages, tokens, max_tokens) → (answer, the MODEL_CALL that answered, why it failed)
Ask = Callable[[list[dict[str, str]], int, int], tuple[str, int, str]]


@dataclass
class PartAnswer:
    """One part's checked answer: the lines it may use and those it refused."""

    lines: list[CitingLine] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    call: int = 0


def _spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each non-empty sentence of `text`, as the check reads them."""
    spans, pos = [], 0
    for sentence in sentences(text):
        start = text.find(sentence, pos)
        if start < 0:  # the splitter only drops separators: never, but stay whole then
            return [(0, len(text))] if text.strip() else []
        pos = start + len(sentence)
        if sentence.strip():
            spans.append((start, pos))
    return spans


def _cut_long(text: str, start: int, end: int, pieces: int) -> list[tuple[int, int]]:
    """A sentence longer than a part, in `pieces` runs cut at spaces where it has any."""
    step = max(1, (end - start) // pieces)
    cuts, at = [], start
    while end - at > step:
        cut = text.rfind(" ", at + step // 2, at + step) + 1 or at + step
        cuts.append((at, cut))
        at = cut
    return cuts + [(at, end)]


def _line_cost(entry: Entry, count: Callable[[str], int]) -> int:
    """What each line of an answer adds to the sentence it quotes: its label, a line break."""
    return count(f"[{words_label(entry.position)}] ") + 1


def answer_room(entries: list[Entry], count: Callable[[str], int]) -> int:
    """The output tokens an answer quoting every sentence of `entries` under its label takes,
    and ANSWER_SLACK more (a list of short items costs nearly twice its text)."""
    return ANSWER_SLACK + sum(count(e.text) + _line_cost(e, count) * len(_spans(e.text))
                              for e in entries)


def _weight(entry: Entry, count: Callable[[str], int]) -> int:
    """What `entry` takes of a part's request and its answer together."""
    return ENTRY_OVERHEAD + answer_room([entry], count) - ANSWER_SLACK + count(entry.text)


def pieces(entry: Entry, most: int, count: Callable[[str], int]) -> list[Entry]:
    """`entry` whole when it and its answer fit `most` tokens, else cut between sentences
    into pieces that do, each under the message's label, turn and ref; the pieces'
    sentences are the message's."""
    if _weight(entry, count) <= most:
        return [entry]
    line = _line_cost(entry, count)
    runs: list[tuple[int, int, int]] = []  # start, end, weight: in the request and the answer
    for start, end in _spans(entry.text):
        weight = 2 * count(entry.text[start:end]) + line + 1
        if weight + ENTRY_OVERHEAD <= most:
            runs.append((start, end, weight))
        else:
            cut = _cut_long(entry.text, start, end, -(-(weight + ENTRY_OVERHEAD) // most) + 1)
            runs += [(a, b, 2 * count(entry.text[a:b]) + line + 1) for a, b in cut]
    out, first, size, last = [], None, 0, 0
    for start, end, weight in runs:
        if first is not None and size + weight > most:
            out.append(entry.text[first:last])
            first = None
        if first is None:
            first, size = start, ENTRY_OVERHEAD
        size += weight
        last = end
    if first is not None:
        out.append(entry.text[first:last])
    return [Entry(entry.position, entry.turn, entry.ref, text) for text in out]


def plan(older: list[Entry], most: int, count: Callable[[str], int]) -> list[list[Entry]]:
    """The older messages (or their pieces) packed oldest first into parts that take at
    most `most` tokens with their answers: a part's contents change only when its own
    messages do."""
    parts: list[list[Entry]] = []
    size = most + 1
    for entry in older:
        for piece in pieces(entry, most, count):
            weight = _weight(piece, count)
            if size + weight > most:
                parts.append([])
                size = 0
            parts[-1].append(piece)
            size += weight
    return parts


def part_request(part: list[Entry], later: list[Entry], reference: list[str], number: int,
                 total: int, constraints: list[str] = ()) -> list[dict[str, str]]:
    """A part's request: the single request's form, told which part it is, with the
    person's hard constraints (every request carries them; the part may hold none) and
    the lines the later parts kept, for reference."""
    system, user = request(part, later)
    head = [PART_LINE.format(number=number, total=total)]
    if constraints:
        head.append("\n".join([CONSTRAINTS_HEAD, *(f"- {c}" for c in constraints)]))
    content = "\n\n".join([*head, user["content"]])
    if reference:
        content += "\n\n" + "\n".join([CONDENSED_LATER_LINE, *reference])
    return [system, {**user, "content": content}]


def condense(older: list[Entry], later: list[Entry], *, window: int, limit: int,
             count: Callable[[str], int], count_request: Callable[[list], int], ask: Ask,
             cache: dict[tuple, PartAnswer], constraints: list[str] = ()) -> Condensed:
    """The older messages condensed in one request when it fits with its answer's reserve,
    else in several (see the module's docstring), checked; `cache` holds each part's
    checked answer by its contents and is filled here. `constraints`: the person's hard
    constraints, given to each part (the single request holds every message). The
    requests show each message as its `shown` text where it has one; the check reads the
    messages as written."""
    asked_older = [e.as_shown() for e in older]
    whole = request(asked_older, later)
    tokens = count_request(whole)
    asked = answer_room(asked_older, count)
    if tokens <= limit and tokens + asked + MARGIN <= window:
        return _single(older, later, whole, tokens, asked, ask)
    constraints = list(constraints)
    fixed = count_request(part_request([], later, [], 99, 99, constraints))
    reference_room = max(0, (window - fixed) // REFERENCE_SHARE)
    # A part's text and its answer share what the window leaves; the text alone must stay
    # within the input limit (always so when the reserve is at most a third of the window).
    most = min(window - fixed - reference_room - ANSWER_SLACK - MARGIN,
               2 * (limit - fixed - reference_room - MARGIN))
    if most < MIN_PART:
        return Condensed(key=key_of(older), failed=(
            f"the older messages ({tokens:,} tokens with the instructions) leave no room for "
            f"an answer in the {window:,}-token window, even in parts"))
    parts = plan(asked_older, most, count)
    sources = {e.position: e.text for e in older}
    known = set(sources) | {e.position for e in later}
    answers: list[PartAnswer | None] = [None] * len(parts)
    for index in range(len(parts) - 1, -1, -1):  # newest first: its lines go to the older
        part = parts[index]
        answer = cache.get(key_of(part))
        if answer is None:
            reference = _reference(part, [a for a in answers[index + 1:] if a],
                                   reference_room, count)
            messages = part_request(part, later, reference, index + 1, len(parts),
                                    constraints)
            part_tokens = count_request(messages)
            max_tokens = min(answer_room(part, count), window - part_tokens - MARGIN)
            content, call, failed = ask(messages, part_tokens, max_tokens)
            if failed:
                return Condensed(key=key_of(older),
                                 failed=f"part {index + 1} of {len(parts)}: {failed}")
            answer = PartAnswer(*usable_lines(content, part, sources, known), call=call)
            cache[key_of(part)] = answer
        answers[index] = answer
    done = [a for a in answers if a is not None]
    # Pieces of a brief that repeats itself may be the same text: asked once, used twice.
    result = resolve(key_of(older), _merged(done), _unique(r for a in done for r in a.refused),
                     older, later, sorted({a.call for a in done if a.call}))
    result.parts = len(parts)
    return result


def _single(older: list[Entry], later: list[Entry], messages: list[dict[str, str]],
            tokens: int, asked: int, ask: Ask) -> Condensed:
    content, call, failed = ask(messages, tokens, asked)
    if failed:
        return Condensed(key=key_of(older), failed=failed)
    known = {e.position for e in older} | {e.position for e in later}
    used, refused = usable_lines(content, older, {e.position: e.text for e in older}, known)
    return resolve(key_of(older), used, refused, older, later, [call] if call else [])


def _identity(line: CitingLine) -> tuple:
    return line.cites, line.superseded_by, flat(line.text)


def _merged(answers: list[PartAnswer]) -> list[CitingLine]:
    """Every part's usable lines, oldest part first, a line said again by a later part
    (the same background sentence in two pieces of a brief) once."""
    seen: set[tuple] = set()
    out = []
    for answer in answers:
        for line in answer.lines:
            if _identity(line) not in seen:
                seen.add(_identity(line))
                out.append(line)
    return out


def _unique(items) -> list[str]:
    return list(dict.fromkeys(items))


def _closeness(line: str, sentence_units: list[frozenset[str]]) -> float:
    """The largest share of `line`'s content units (figures aside: a change usually
    changes the figure) that one sentence of the part holds."""
    said = {u for u in units(line) if not u.isdigit()}
    if not said:
        return 0.0
    return max((len(said & held) for held in sentence_units), default=0) / len(said)


def _reference(part: list[Entry], later_answers: list[PartAnswer], room: int,
               count: Callable[[str], int]) -> list[str]:
    """The in-force lines of the later parts that may change a sentence of `part`, within
    `room` tokens: only lines of later messages (a piece of the part's own message changes
    none of its sentences), the closest to one of the part's sentences first (words and
    CJK characters in common, any language), the nearest part's first among equals."""
    mine = {e.position for e in part}
    held = [units(s) for e in part for s in message_sentences(e.text)]
    eligible = [line for line in _merged(later_answers) if not line.superseded_by
                and not mine & set(line.cites) and max(line.cites) > min(mine)]
    eligible.sort(key=lambda line: -_closeness(line.text, held))
    out: list[str] = []
    for line in eligible:
        rendered = line.render()
        cost = count(rendered) + 1
        if cost > room:
            break
        room -= cost
        out.append(rendered)
    return out
