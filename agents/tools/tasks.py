"""Task tools (feature T2) with AgentScope's semantics: TaskCreate, TaskList, TaskUpdate, TaskGet.

The list lives in the Store (admin-editable, never touched by compaction). Ids count up
from "1"; a task's field is `state` (pending / in_progress / completed) while TaskUpdate's
argument is `status`, which also accepts "deleted" to remove the task. Dependencies are
kept on both sides (blocks / blocked_by); completing a task unblocks its dependants.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from agents.events import TasksChanged
from agents.store.interface import TaskRecord
from agents.tools.base import Tool, ToolBoundary, ToolContext, ToolError

STATES = ("pending", "in_progress", "completed")
STATUSES = STATES + ("deleted",)


def _save(ctx: ToolContext, tasks: list[TaskRecord]) -> None:
    ctx.store.save_tasks(ctx.session_id, tasks)
    if ctx.events is not None:
        payload = {"tasks": [t.to_dict() for t in tasks], "source": "agent"}
        ctx.events.emit(TasksChanged(**payload, turn=ctx.turn, session_id=ctx.session_id))


def _find(tasks: list[TaskRecord], task_id: str) -> TaskRecord:
    for task in tasks:
        if task.id == str(task_id).strip():
            return task
    known = ", ".join(t.id for t in tasks) or "none yet"
    raise ToolError(f"Task (id={task_id}) not found. Existing ids: {known}.")


def _next_id(tasks: list[TaskRecord], state: dict[str, Any]) -> str:
    # The counter in the agent state keeps ids from being reused after a deletion.
    numbers = [int(t.id) for t in tasks if t.id.isdigit()]
    return str(max(numbers + [int(state.get("last_task_id", 0))]) + 1)


def _depends_on(tasks: list[TaskRecord], start: str, target: str) -> bool:
    """True when `start` is (transitively) blocked by `target`."""
    by_id = {t.id: t for t in tasks}
    seen, stack = set(), [start]
    while stack:
        current = stack.pop()
        if current == target:
            return True
        if current in seen or current not in by_id:
            continue
        seen.add(current)
        stack.extend(by_id[current].blocked_by)
    return False


def _link(tasks: list[TaskRecord], blocker_id: str, blocked_id: str) -> None:
    blocker, blocked = _find(tasks, blocker_id), _find(tasks, blocked_id)
    if blocker.id == blocked.id:
        raise ToolError(f"Task (id={blocker.id}) cannot block itself.")
    if _depends_on(tasks, blocker.id, blocked.id):
        raise ToolError(f"Task (id={blocker.id}) blocking task (id={blocked.id}) would make a "
                        "cycle: it already waits for it.")
    if blocked.id not in blocker.blocks:
        blocker.blocks.append(blocked.id)
    if blocker.id not in blocked.blocked_by:
        blocked.blocked_by.append(blocker.id)


def task_create(subject: str, description: str = "", owner: str = "",
                blocked_by: list[str] | None = None, metadata: dict[str, Any] | None = None, *,
                _ctx: ToolContext) -> str:
    if not subject.strip():
        raise ToolError("A task needs a subject: one short line saying what to do.")
    tasks = _ctx.store.load_tasks(_ctx.session_id)
    for blocker in blocked_by or []:
        _find(tasks, str(blocker))  # refuse unknown ids before anything changes
    task = TaskRecord(id=_next_id(tasks, _ctx.state), subject=subject.strip(),
                      description=description, owner=owner, metadata=dict(metadata or {}),
                      created_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    tasks.append(task)
    for blocker in blocked_by or []:
        _link(tasks, str(blocker), task.id)
    _save(_ctx, tasks)
    _ctx.state["last_task_id"] = int(task.id)
    return f"Task (id={task.id}) created successfully: {task.subject}"


def _line(task: TaskRecord) -> str:
    extras = []
    if task.owner:
        extras.append(f"owner {task.owner}")
    if task.blocked_by:
        extras.append(f"blocked by {', '.join(task.blocked_by)}")
    line = f"{task.id} [{task.state}] {task.subject}"
    return line + (f" ({'; '.join(extras)})" if extras else "")


def task_list(*, _ctx: ToolContext) -> str:
    tasks = _ctx.store.load_tasks(_ctx.session_id)
    return "\n".join(_line(t) for t in tasks) if tasks else "No tasks yet."


def task_get(task_id: str, *, _ctx: ToolContext) -> str:
    task = _find(_ctx.store.load_tasks(_ctx.session_id), task_id)
    metadata = ", ".join(f"{k}={v}" for k, v in task.metadata.items())
    return "\n".join([
        f"Task (id={task.id}): {task.subject}", f"state: {task.state}",
        f"description: {task.description or '-'}", f"owner: {task.owner or '-'}",
        f"blocks: {', '.join(task.blocks) or '-'}",
        f"blocked_by: {', '.join(task.blocked_by) or '-'}",
        f"metadata: {metadata or '-'}", f"created_at: {task.created_at or '-'}"])


def task_update(task_id: str, status: str | None = None, subject: str | None = None,
                description: str | None = None, owner: str | None = None,
                add_blocks: list[str] | None = None, add_blocked_by: list[str] | None = None,
                metadata: dict[str, Any] | None = None, *, _ctx: ToolContext) -> str:
    tasks = _ctx.store.load_tasks(_ctx.session_id)
    task = _find(tasks, task_id)
    if status is not None and status not in STATUSES:
        raise ToolError(f"status must be one of {', '.join(STATUSES)} (got {status!r}).")
    if status == "deleted":  # a command, not a state: the task is removed, nothing else applies
        tasks.remove(task)
        for other in tasks:
            other.blocks = [i for i in other.blocks if i != task.id]
            other.blocked_by = [i for i in other.blocked_by if i != task.id]
        _save(_ctx, tasks)
        return f"Task (id={task.id}) deleted."
    changed = []
    for name, value in (("subject", subject), ("description", description), ("owner", owner)):
        if value is not None and getattr(task, name) != value:
            setattr(task, name, value)
            changed.append(name)
    for blocked in add_blocks or []:
        _link(tasks, task.id, str(blocked))
        changed.append("blocks")
    for blocker in add_blocked_by or []:
        _link(tasks, str(blocker), task.id)
        changed.append("blocked_by")
    if metadata:
        for key, value in metadata.items():  # a null value removes the key
            if value is None:
                task.metadata.pop(key, None)
            else:
                task.metadata[key] = value
        changed.append("metadata")
    unblocked: list[str] = []
    if status is not None and status != task.state:
        task.state = status
        changed.insert(0, "status")
        if status == "completed":
            for other in tasks:
                if task.id in other.blocked_by:
                    other.blocked_by.remove(task.id)
                    unblocked.append(other.id)
            task.blocks = [i for i in task.blocks if i not in unblocked]
    if not changed:
        return f"No changes to task (id={task.id})."
    _save(_ctx, tasks)
    fields = ", ".join(dict.fromkeys(changed))
    suffix = f" Unblocked: {', '.join(unblocked)}." if unblocked else ""
    return f"Update task (id={task.id}) {fields}.{suffix}"


def tools() -> list[Tool]:
    ids = {"type": "array", "items": {"type": "string"}}
    task_id = {"type": "string", "description": "The task id, e.g. \"1\"."}
    small = ToolBoundary(max_result_rows=500, max_result_length=4000)
    return [
        Tool(name="TaskCreate", description=(
                 "Create a task in the task list (state pending). Use it for work of more than "
                 "three steps; ids count up from 1."),
             parameters={"type": "object", "properties": {
                 "subject": {"type": "string", "description": "One-line title."},
                 "description": {"type": "string"}, "owner": {"type": "string"},
                 "blocked_by": {**ids, "description": "Ids of tasks that must finish first."},
                 "metadata": {"type": "object"}}, "required": ["subject"]},
             func=task_create, inline=True, boundary=small),
        Tool(name="TaskList", description="Show every task with its id and state.",
             parameters={"type": "object", "properties": {}}, func=task_list, inline=True,
             boundary=small),
        Tool(name="TaskGet", description="Show one task with all its fields.",
             parameters={"type": "object", "properties": {"task_id": task_id},
                         "required": ["task_id"]},
             func=task_get, inline=True, boundary=small),
        Tool(name="TaskUpdate", description=(
                 "Update a task: status pending / in_progress / completed, or deleted to remove "
                 "it; also subject, description, owner, dependencies and metadata."),
             parameters={"type": "object", "properties": {
                 "task_id": task_id, "status": {"type": "string", "enum": list(STATUSES)},
                 "subject": {"type": "string"}, "description": {"type": "string"},
                 "owner": {"type": "string"}, "add_blocks": ids, "add_blocked_by": ids,
                 "metadata": {"type": "object", "description": "Keys to set; null removes one."}},
                 "required": ["task_id"]},
             func=task_update, inline=True, boundary=small),
    ]
