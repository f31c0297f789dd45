"""The task snapshot (feature C9): rewritten every turn, placed right after the system prompt.

Tier-1 anchors and the goal are always in it, whatever its budget; the rest (key data,
tasks, notes) is added in order of importance while it fits.
"""
from __future__ import annotations

from typing import Callable

from agents.store.interface import AnchorRecord, TaskRecord
from agents.words.changes import Change

GOAL_CHARS = 1200


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


def render_snapshot(*, goal: str, anchors: list[AnchorRecord], tasks: list[TaskRecord],
                    notes_text: str, budget_tokens: int, count: Callable[[str], int],
                    superseded: list[str] = (), changes: list[Change] = (),
                    conflicts: list[tuple[str, str]] = ()) -> str:
    """Render the snapshot; optional sections are dropped, newest data kept, to fit the
    budget. `superseded`: texts a person's edit replaced or removed (C19), named as no
    longer in force, since the goal or an earlier message may still say them verbatim.
    `changes`: constraints a later message of the person's may have changed, listed apart
    with that message's sentence, never as in force alone; `conflicts`: pairs that may
    not both hold, shown, neither dropped (agents.words.changes)."""
    goal_text = goal if len(goal) <= GOAL_CHARS else goal[:GOAL_CHARS] + " …"
    must = ["<task-snapshot>", f"Goal: {goal_text}"]
    if superseded:
        must.append("No longer in force (the person replaced or removed these later):")
        must.extend(f"- (superseded) {text}" for text in superseded)
    changed = {c.constraint: c for c in changes}
    hard = [a for a in anchors if a.active and a.tier == 1 and a.text not in changed]
    if hard:
        must.append("Hard constraints (never drop):")
        must.extend(f"- {a.text}" for a in hard)
    if changed:
        must.append("Possibly changed by a later message of the person's (both verbatim in "
                    "their words; where they differ, the later message wins):")
        for change in changed.values():
            must.append(f"- {change.constraint}")
            must.append(f"  later, turn {change.turn}: {change.sentence}")
    if conflicts:
        must.append("May contradict each other (both kept; ask the person which holds):")
        must.extend(f"- \"{a}\" / \"{b}\"" for a, b in conflicts)
    # A person's edit in the admin must reach the agent whatever the budget (W4).
    edited = [a for a in anchors if a.active and a.tier > 1 and a.source == "admin"]
    if edited:
        must.append("Set by a person (keep in mind):")
        must.extend(f"- {a.text}" for a in edited)
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
    used = count("\n".join(lines))
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
    return "\n".join(lines)
