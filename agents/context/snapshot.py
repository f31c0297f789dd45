"""The task snapshot (feature C9): rewritten every turn, placed right after the system prompt.

The goal and what the person asked that is in force are always in it, whatever its
budget; the rest (key data, tasks, notes) is added in order of importance while it fits.
What is in force is listed from the person's own sentences (agents.words.in_force), not
from what the anchor patterns found: the patterns only label a sentence a hard
constraint. When those sentences would take more than their share of the snapshot, the
older messages are pointed at instead of repeated: the person's words block, or their
message in the recent turns, holds them verbatim and is the source.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Callable

from agents.store.interface import AnchorRecord, TaskRecord
from agents.words.anchors import clip_text
from agents.words.in_force import (HARD_LABEL, HEADING, NO_WORDS_LABEL, POINTER,
                                   UNANCHORED_LABEL, Changed, PersonView, Said, plain_sentence)

GOAL_CHARS = 1200
GOAL_SHARE = 0.5  # of the snapshot's budget the goal's line may take when it is cut
MAX_CONFLICTS = 20  # pairs that may contradict each other named at most; more are counted
KINDS = {"goal": "goal", "admin": "edited in the admin", "pin": "pinned"}


def _task_lines(tasks: list[TaskRecord]) -> list[str]:
    groups = {"completed": [], "in_progress": [], "pending": []}
    for task in tasks:
        groups.setdefault(task.state, []).append(f"#{task.id} {task.subject}")
    lines = []
    for label, state in (("Done", "completed"), ("In progress", "in_progress"),
                         ("To do", "pending")):
        if groups.get(state):
            lines.append(f"{label}: " + "; ".join(groups[state]))
    return lines


def _flat(text: str) -> str:
    return " ".join(text.rstrip("…").split()).casefold()


@lru_cache(maxsize=4)
def _whole_texts(person_texts: tuple[str, ...]) -> tuple[str, ...]:
    """The person's messages on one line each, casefolded: the snapshot is rendered twice
    a turn (the full one and the preflight's minimal one) from the same messages."""
    return tuple(" ".join(t.split()).casefold() for t in person_texts)


def _said_in(flat: str, wholes: tuple[str, ...]) -> bool:
    return any(flat in whole for whole in wholes)


def _item(said: Said, labels: list[str]) -> str:
    kind = KINDS.get(said.source)
    head = " · ".join([f"turn {said.turn}", *([kind] if kind else []), *labels])
    return f"- [{head}] {said.text}"


def _labels(said: Said, hard: list[str], view: PersonView) -> list[str]:
    flat = _flat(said.text)
    labels = [HARD_LABEL] if any(h in flat for h in hard) else []
    if not any(ch.isalnum() for ch in said.text):
        labels.append(NO_WORDS_LABEL)
    if said in view.unanchored:
        labels.append(UNANCHORED_LABEL)
    return labels


class SnapshotMemo:
    """One session's last answers of the snapshot's steps, kept by its ContextKeeper: the
    snapshot is rendered twice a turn (the full one and the preflight's minimal one) and
    the person's part of it changes a few times a session. Each slot holds the view it was
    computed from, compared by identity (read_view, and the keeper's person_view, give the
    same object while the person's messages stay the same, and a new one when they
    change), with every other input in its key. Each slot is one tuple, read and written
    whole, so it never pairs one render's view with another's answer. One memo per
    session: sessions that share a worker process do not evict each other's answers.
    A render without a memo (a one-off, a test) keeps nothing."""

    __slots__ = ("lines", "plain", "must", "hits")

    def __init__(self) -> None:
        self.lines: tuple[PersonView, tuple, list[str]] | None = None  # person_lines'
        self.plain: tuple[PersonView, dict[str, Said]] | None = None  # plain_item's
        # _must_lines': its view, its other inputs, and the lines with their tokens
        self.must: tuple[PersonView | None, tuple, tuple[list[str], int]] | None = None
        self.hits = 0  # answers given from a slot (the tests read it)


def _plain_items(view: PersonView) -> dict[str, Said]:
    return {_item(said, []): said for said in view.in_force if said.source not in KINDS}


def plain_item(view: PersonView, line: str, *, memo: SnapshotMemo | None = None) -> Said | None:
    """The sentence `line` lists when the in-force list shows it with nothing said about it
    (no kind, no label): a sentence of a message the person sent in the conversation, which
    the request may already carry verbatim in its history. None for any other line. Asked
    for each new line of the snapshot with the same view: `memo` keeps the view's items."""
    if memo is None:
        return _plain_items(view).get(line)
    last = memo.plain
    if last is not None and last[0] is view:
        memo.hits += 1
        return last[1].get(line)
    items = _plain_items(view)
    memo.plain = (view, items)
    return items.get(line)


def person_lines(view: PersonView, *, goal_whole: bool, hard: list[str],
                 list_tokens: int, count: Callable[[str], int],
                 memo: SnapshotMemo | None = None) -> list[str]:
    """The snapshot's lines for what the person asked: in force (their sentences, or a
    pointer to where they are verbatim), possibly changed by a later message, and pairs
    that may contradict each other. `hard`: the active tier-1 anchors' texts, which label
    the sentences that hold them; `list_tokens`: what the sentences in force may take
    before the older messages are pointed at instead. Asked every turn with the same view
    (read_view keeps it while the messages stay the same): `memo` keeps the last answer."""
    if memo is None:
        return _person_lines(view, goal_whole, hard, list_tokens, count)
    key = (goal_whole, tuple(hard), list_tokens, count)
    last = memo.lines
    if last is not None and last[0] is view and last[1] == key:
        memo.hits += 1
        return list(last[2])
    lines = _person_lines(view, goal_whole, hard, list_tokens, count)
    memo.lines = (view, key, lines)
    return list(lines)


def _person_lines(view: PersonView, goal_whole: bool, hard: list[str], list_tokens: int,
                  count: Callable[[str], int]) -> list[str]:
    hard = [h for text in hard if (h := _flat(text))]
    changed_in = {c.earlier.index for c in view.changed}
    by_message: dict[int, list[str]] = {}
    for said in view.in_force:
        if goal_whole and said.source == "goal":
            continue  # the Goal line above has it verbatim
        by_message.setdefault(said.index, []).append(_item(said, _labels(said, hard, view)))
    listed, used = [], 0  # the newest messages first, while they fit
    for index in sorted(by_message, reverse=True):
        cost = sum(count(line) + 1 for line in by_message[index])
        if used + cost > list_tokens:
            break
        listed.append(index)
        used += cost
    pointed = sorted(set(by_message) - set(listed))
    lines = [HEADING]
    if pointed:
        turns = ", ".join(dict.fromkeys(str(view.messages[i][0]) for i in pointed))
        lines.append(f"- [turn{'s' if ',' in turns else ''} {turns}] {POINTER} verbatim in "
                     "the person's words block or the recent turns, the source (too long to "
                     "repeat here)" + ("; but for what is named below"
                                       if changed_in & set(pointed) else ""))
    for index in sorted(listed):
        lines.extend(by_message[index])
    if len(lines) == 1:
        lines = []  # the goal is all the person said
    if view.changed:
        lines.append("Possibly changed by a later message of the person's (both verbatim in "
                     "their words; the later one wins where they differ):")
        lines.extend(_changed_lines(view, list_tokens, count))
    if view.conflicts:
        lines.append("May contradict each other (both kept; ask the person which holds):")
        shown, used = 0, 0
        for conflict in view.conflicts[:MAX_CONFLICTS]:
            line = (f"- \"{clip_text(plain_sentence(conflict.first.text))}\" / "
                    f"\"{clip_text(plain_sentence(conflict.second.text))}\"")
            used += count(line) + 1
            if shown and used > list_tokens:  # the first is named whatever the budget
                break
            lines.append(line)
            shown += 1
        if len(view.conflicts) > shown:
            lines.append(f"- and {len(view.conflicts) - shown} more pairs of the person's "
                         "sentences that give different figures for the same thing, each "
                         "named in a hint")
    return lines


def _changed_lines(view: PersonView, tokens: int, count: Callable[[str], int]) -> list[str]:
    """Each sentence a later one may have changed, with that later sentence; past `tokens`
    (a long brief a later message touches in many places, or a long sentence) they are
    counted per later message and pointed at, where both are verbatim."""
    lines = []
    for change in view.changed:
        lines.append(f"- {change.earlier.text}")
        lines.append(f"  later, turn {change.later.turn}: {change.later.text}")
    if sum(count(line) + 1 for line in lines) <= tokens:
        return lines
    by_later: dict[int, list[Changed]] = {}  # by the message of the later sentence
    for change in view.changed:
        by_later.setdefault(change.later.index, []).append(change)
    lines = []
    for changes in by_later.values():
        turns = ", ".join(dict.fromkeys(str(c.earlier.turn) for c in changes))
        many = len(changes) > 1
        lines.append(f"- {len(changes)} sentence{'s' if many else ''} of turn "
                     f"{turns}, each on the subject of one of turn {changes[0].later.turn} "
                     f"{POINTER} both verbatim in the person's words block or the recent turns")
    return lines


def goal_text(goal: str, count: Callable[[str], int], tokens: int = 0) -> str:
    """The goal as the snapshot shows it: whole when it is at most GOAL_CHARS long and
    (`tokens` > 0) at most `tokens`, else its beginning, cut after a word, and " …". The
    whole goal is the person's first message, which their words block or the recent turns
    carry verbatim; at a small window a long brief's first 1 200 characters here were a
    second copy taking the words' room (a 2 048-token window: ~400 of its tokens)."""
    if len(goal) <= GOAL_CHARS and (not tokens or count(goal) <= tokens):
        return goal
    cut = min(len(goal), GOAL_CHARS)
    while tokens and cut > 1 and (used := count(goal[:cut])) > tokens:
        cut = min(cut - 1, int(cut * tokens / used))
    space = goal.rfind(" ", 0, cut + 1)
    if space > cut // 2:
        cut = space
    return goal[:cut].rstrip() + " …"


def render_snapshot(*, goal: str, anchors: list[AnchorRecord], tasks: list[TaskRecord],
                    notes_text: str, budget_tokens: int, count: Callable[[str], int],
                    superseded: list[str] = (), view: PersonView | None = None,
                    list_tokens: int = 0, person_texts: list[str] = (),
                    goal_tokens: int = 0, memo: SnapshotMemo | None = None) -> str:
    """Render the snapshot; optional sections are dropped, newest data kept, to fit the
    budget. `superseded`: texts a person's edit replaced or removed (C19), named as no
    longer in force, since the goal or an earlier message may still say them verbatim.
    `view`: the person's sentences in force, possibly changed, and pairs that may not
    both hold (agents.words.in_force); `person_texts`: their messages, so that a tier-1
    anchor none of them holds (one a parent task handed down) is listed on its own.
    `goal_tokens`: the most the goal's line may take (goal_text). `memo`: the session's
    SnapshotMemo, which keeps the lines that stay the same from one render to the next."""
    return render_snapshot_parts(goal=goal, anchors=anchors, tasks=tasks,
                                 notes_text=notes_text, budget_tokens=budget_tokens,
                                 count=count, superseded=superseded, view=view,
                                 list_tokens=list_tokens, person_texts=person_texts,
                                 goal_tokens=goal_tokens, memo=memo)[0]


def _must_lines(goal: str, count: Callable[[str], int], goal_tokens: int,
                superseded: tuple[str, ...], view: PersonView | None, hard: tuple[str, ...],
                list_tokens: int, person_texts: tuple[str, ...],
                edited: tuple[str, ...], memo: SnapshotMemo | None) -> tuple[list[str], int]:
    """The lines every snapshot holds whatever its budget, and their tokens joined. The
    same every turn until the person's words, the tier-1 anchors or an edit change, and
    asked twice a turn (the snapshot, and the preflight's minimal one): `memo` keeps the
    last answer (`view` compared by identity, as person_lines does: read_view gives the same
    object while the messages stay the same; every other input is in the key)."""
    key = (goal, count, goal_tokens, superseded, hard, list_tokens, person_texts, edited)
    last = memo.must if memo is not None else None
    if last is not None and last[0] is view and last[1] == key:
        memo.hits += 1
        return last[2]
    shown = goal_text(goal, count, goal_tokens)
    must = ["<task-snapshot>", f"Goal: {shown}"]
    if superseded:
        must.append("No longer in force (the person replaced or removed these later):")
        must.extend(f"- (superseded) {text}" for text in superseded)
    if view is not None:
        must.extend(person_lines(view, goal_whole=shown == goal, hard=list(hard),
                                 list_tokens=list_tokens, count=count, memo=memo))
    said = _whole_texts(person_texts)
    # Constraints no message of the person's here holds (a parent task's): listed apart.
    other = [text for text in hard if not _said_in(_flat(text), said)]
    if other:
        must.append("Also binding (set for this task, not in the person's messages here):")
        must.extend(f"- {text}" for text in other)
    if edited:
        must.append("Set by a person (keep in mind):")
        must.extend(f"- {text}" for text in edited)
    found = (must, count("\n".join(must)))
    if memo is not None:
        memo.must = (view, key, found)
    return found


def render_snapshot_parts(*, goal: str, anchors: list[AnchorRecord], tasks: list[TaskRecord],
                          notes_text: str, budget_tokens: int, count: Callable[[str], int],
                          superseded: list[str] = (), view: PersonView | None = None,
                          list_tokens: int = 0, person_texts: list[str] = (),
                          goal_tokens: int = 0,
                          memo: SnapshotMemo | None = None) -> tuple[str, list[str]]:
    """The snapshot and the lines it must always hold (they are never only in the tail)."""
    hard = [a.text for a in anchors if a.active and a.tier == 1]
    # A person's edit in the admin must reach the agent whatever the budget (W4).
    edited = [a.text for a in anchors if a.active and a.tier > 1 and a.source == "admin"]
    must, must_tokens = _must_lines(goal, count, goal_tokens, tuple(superseded), view,
                                    tuple(hard), list_tokens, tuple(person_texts),
                                    tuple(edited), memo)
    optional: list[list[str]] = []
    key_data = [a for a in anchors if a.active and a.tier == 2 and a.source != "admin"]
    if key_data:
        optional.append(["Key data:"] + [f"- {a.text}" for a in reversed(key_data)])
    task_lines = _task_lines(tasks)
    if task_lines:
        optional.append(["Tasks:"] + [f"- {line}" for line in task_lines])
    if notes_text:
        optional.append(["Notes:", notes_text])
    details = [a for a in anchors if a.active and a.tier == 3 and a.source != "admin"]
    if details:
        optional.append(["Details:"] + [f"- {a.text}" for a in reversed(details)])
    lines = list(must)
    used = must_tokens
    for section in optional:
        # A section that does not fit whole keeps its heading and as many lines as fit.
        for i, line in enumerate(section):
            cost = count(line) + 1
            if used + cost > budget_tokens:
                break
            if i == 0 and len(section) > 1 and used + cost + count(section[1]) + 1 > budget_tokens:
                break
            lines.append(line)
            used += cost
    lines.append("</task-snapshot>")
    return "\n".join(lines), must[2:]
