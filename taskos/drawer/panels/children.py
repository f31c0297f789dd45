"""Sub-agents (feature T6): the children a session delegated to, with status and cost."""
from __future__ import annotations

from typing import Any

from django.db.models import Q

from agents import Event, EventType, ToolResult
from taskos.drawer.base import Panel


class ChildrenPanel(Panel):
    name = "children"
    title = "Sub-agents"
    template = "drawer/panels/children.html"
    # A delegate call starting a child, the wait, and each answer arriving.
    event_types = (EventType.SESSION_WAITING, EventType.TOOL_RESULT, EventType.SESSION_FINISHED)

    # Of tool results, the answers of sub-agents only, and only what the panel shows.
    newest_read = {EventType.TOOL_RESULT: 0}
    older_keys = {EventType.TOOL_RESULT: ("child", "child_status", "child_input_tokens",
                                          "kept_tokens", "reused")}

    def older_read(self, event_type: str) -> Q:
        return Q(payload__child__isnull=False)

    def wants(self, ev: Event) -> bool:
        return not isinstance(ev, ToolResult) or bool(ev.child)

    def get_context(self, session, events: list[Event]) -> dict[str, Any]:
        rows = []
        for child in session.children.select_related("profile").order_by("id"):
            rows.append({"pk": child.pk, "goal": child.goal, "status": child.status,
                         "turns": child.turns, "input_tokens": child.total_input_tokens,
                         "peak": child.peak_input_tokens, "window": child.window,
                         "profile": child.profile.name, "cost": child.cost_with_children(),
                         "error": child.error})
        results = [ev for ev in events if isinstance(ev, ToolResult)]
        answers = {str(ev.child): ev.kept_tokens for ev in results if ev.child}
        for row in rows:
            row["answer_tokens"] = answers.get(str(row["pk"]))
        # A replay (E2) runs no sub-agent: it reused the recorded ones' answers.
        reused = [{"pk": ev.child, "status": ev.child_status, "answer_tokens": ev.kept_tokens,
                   "input_tokens": ev.child_input_tokens or 0}
                  for ev in results if ev.reused]
        return {"children": rows, "parent": session.parent, "reused": reused,
                "own_cost": session.cost,
                "total_cost": session.cost + sum(r["cost"] for r in rows),
                "answers_tokens": sum(answers.values()),
                "children_tokens": sum(r["input_tokens"] for r in rows)}

    def badge(self, context: dict[str, Any]) -> str:
        count = len(context["children"]) or len(context["reused"])
        return str(count) if count else ""
