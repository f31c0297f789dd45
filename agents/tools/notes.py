"""The notes tool (feature T3): a structured notepad the model keeps outside the context.

Sections: objective, plan (steps and the current step), findings with their source, data
points, open questions, and ruled-out approaches with reason and evidence ref. The
notepad lives in the Store; `render_notes` is what the task snapshot shows every turn,
so nothing written here is ever compacted away.
"""
from __future__ import annotations

from typing import Any

from agents.events import NotesChanged
from agents.tools.base import Tool, ToolBoundary, ToolContext, ToolError

LIST_SECTIONS = ("plan", "findings", "data_points", "open_questions", "ruled_out")
SECTIONS = ("objective", "current_step") + LIST_SECTIONS
ACTIONS = ("set", "add", "remove", "show")
MAX_ENTRIES = 30
MAX_TEXT = 500
_SINGULAR = {"plan": "plan step", "findings": "finding", "data_points": "data point",
             "open_questions": "open question", "ruled_out": "ruled-out approach"}


def _text(value: str | None, what: str) -> str:
    if value is None or not value.strip():
        raise ToolError(f"Give the {what} as `text`.")
    value = " ".join(value.split())
    if len(value) > MAX_TEXT:
        raise ToolError(f"The {what} is {len(value)} characters; keep notes under {MAX_TEXT} "
                        "and put long material in a file (write_file) or cite its ref.")
    return value


def _entry_text(section: str, entry: Any) -> str:
    if section == "ruled_out":
        evidence = f" (evidence: {entry['evidence']})" if entry.get("evidence") else ""
        return f"{entry['approach']} — {entry['reason']}{evidence}"
    if isinstance(entry, dict):
        return entry["text"] + (f" (source: {entry['source']})" if entry.get("source") else "")
    return str(entry)


def render_notes(notes: dict[str, Any]) -> str:
    """The notepad as the task snapshot shows it; "" when it is empty."""
    lines = []
    if notes.get("objective"):
        lines.append(f"Objective: {notes['objective']}")
    plan, current = notes.get("plan") or [], int(notes.get("current_step") or 0)
    if plan:
        lines.append(f"Plan (step {current} of {len(plan)}):" if current else "Plan:")
        for number, step in enumerate(plan, start=1):
            mark = "[done] " if number < current else "[current] " if number == current else ""
            lines.append(f"  {number}. {mark}{step}")
    for section, title in (("findings", "Findings"), ("data_points", "Data points"),
                           ("open_questions", "Open questions"), ("ruled_out", "Ruled out")):
        entries = notes.get(section) or []
        if entries:
            lines.append(f"{title}:")
            lines += [f"  {n}. {_entry_text(section, e)}" for n, e in enumerate(entries, start=1)]
    return "\n".join(lines)


def _set(notes: dict[str, Any], section: str, text: str | None, steps: list[str] | None,
         index: int | None) -> str:
    if section == "objective":
        notes["objective"] = _text(text, "objective")
        return "Objective set."
    if section == "plan":
        if not steps:
            raise ToolError("Give the plan as `steps`, a list of short step descriptions.")
        if len(steps) > MAX_ENTRIES:
            raise ToolError(f"A plan holds at most {MAX_ENTRIES} steps (got {len(steps)}).")
        notes["plan"] = [_text(step, "plan step") for step in steps]
        notes["current_step"] = 1
        return f"Plan set: {len(steps)} steps; current step 1."
    if section == "current_step":
        plan = notes.get("plan") or []
        if not plan:
            raise ToolError("There is no plan yet; set one with section='plan' and `steps`.")
        if index is None or not 1 <= index <= len(plan):
            raise ToolError(f"current_step needs `index` between 1 and {len(plan)}.")
        notes["current_step"] = index
        return f"Current step: {index} of {len(plan)} ({plan[index - 1]})."
    raise ToolError(f"Use action 'add' or 'remove' for {section}; 'set' works on objective, "
                    "plan and current_step.")


def _add(notes: dict[str, Any], section: str, text: str | None, source: str | None,
         reason: str | None, evidence: str | None) -> str:
    if section not in LIST_SECTIONS:
        raise ToolError(f"Use action 'set' for {section}.")
    entries = notes.setdefault(section, [])
    if len(entries) >= MAX_ENTRIES:
        raise ToolError(f"{section} is full ({MAX_ENTRIES} entries); remove one first.")
    what = _SINGULAR[section]
    if section == "ruled_out":
        if not reason or not reason.strip():
            raise ToolError("A ruled-out approach needs a `reason` (and an `evidence` ref if "
                            "you have one).")
        entry: Any = {"approach": _text(text, "approach"), "reason": _text(reason, "reason"),
                      "evidence": (evidence or "").strip()}
    elif section in ("findings", "data_points"):
        entry = {"text": _text(text, what), "source": (source or "").strip()}
    else:
        entry = _text(text, what)
    entries.append(entry)
    return f"Added {what} {len(entries)}."


def _remove(notes: dict[str, Any], section: str, index: int | None) -> str:
    if section not in LIST_SECTIONS:
        raise ToolError(f"Only list sections can be removed from: {', '.join(LIST_SECTIONS)}.")
    entries = notes.get(section) or []
    if index is None or not 1 <= index <= len(entries):
        raise ToolError(f"remove needs `index` between 1 and {len(entries)} for {section}."
                        if entries else f"{section} is empty; nothing to remove.")
    removed = entries.pop(index - 1)
    if section == "plan":
        current = int(notes.get("current_step") or 0)
        notes["current_step"] = min(current - (index < current), len(entries))
    return f"Removed {_SINGULAR[section]} {index}: {_entry_text(section, removed)}"


def notes(action: str, section: str | None = None, text: str | None = None,
          source: str | None = None, reason: str | None = None, evidence: str | None = None,
          index: int | None = None, steps: list[str] | None = None, *, _ctx: ToolContext) -> str:
    current = _ctx.store.load_notes(_ctx.session_id)
    if action == "show":
        return render_notes(current) or "The notepad is empty."
    if section not in SECTIONS:
        raise ToolError(f"section must be one of {', '.join(SECTIONS)} (got {section!r}).")
    if action == "set":
        message = _set(current, section, text, steps, index)
    elif action == "add":
        message = _add(current, section, text, source, reason, evidence)
    elif action == "remove":
        message = _remove(current, section, index)
    else:
        raise ToolError(f"action must be one of {', '.join(ACTIONS)} (got {action!r}).")
    _ctx.store.save_notes(_ctx.session_id, current)
    if _ctx.events is not None:
        _ctx.events.emit(NotesChanged(notes=current, turn=_ctx.turn, session_id=_ctx.session_id))
    return message


def tools() -> list[Tool]:
    return [Tool(
        name="notes",
        description=("Your notepad outside the context, shown in the task snapshot every turn: "
                     "objective, plan and current step, findings (with source), data points, "
                     "open questions, ruled-out approaches (with reason and evidence ref)."),
        parameters={"type": "object", "properties": {
            "action": {"type": "string", "enum": list(ACTIONS)},
            "section": {"type": "string", "enum": list(SECTIONS)},
            "text": {"type": "string", "description": "The entry, objective or approach."},
            "source": {"type": "string",
                       "description": "Where a finding or data point comes from."},
            "reason": {"type": "string", "description": "Why an approach was ruled out."},
            "evidence": {"type": "string", "description": "Archive ref backing it up."},
            "index": {"type": "integer", "description": "1-based entry or plan step."},
            "steps": {"type": "array", "items": {"type": "string"}}},
            "required": ["action"]},
        func=notes, inline=True, boundary=ToolBoundary(max_result_length=4000,
                                                           keep_last=1))]  # the notepad now
