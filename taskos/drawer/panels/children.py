"""Sub-agents (feature T6): the children a session delegated to, with status and cost."""
from __future__ import annotations

from typing import Any

from taskos.drawer.base import Panel
from taskos.drawer.events import Ev


class ChildrenPanel(Panel):
    name = "children"
    title = "Sub-agents"
    template = "drawer/panels/children.html"
    # A delegate call starting a child, the wait, and each answer arriving.
    event_types = ("SESSION_WAITING", "TOOL_RESULT", "SESSION_FINISHED")

    def wants(self, ev: Ev) -> bool:
        return ev.type != "TOOL_RESULT" or bool(ev.payload.get("child"))

    def get_context(self, session, events: list[Ev]) -> dict[str, Any]:
        rows = []
        for child in session.children.select_related("profile").order_by("id"):
            rows.append({"pk": child.pk, "goal": child.goal, "status": child.status,
                         "turns": child.turns, "input_tokens": child.total_input_tokens,
                         "peak": child.peak_input_tokens, "window": child.window,
                         "profile": child.profile.name, "cost": child.cost_with_children(),
                         "error": child.error})
        answers = {str(ev.payload.get("child")): ev.payload.get("kept_tokens")
                   for ev in events if ev.type == "TOOL_RESULT" and ev.payload.get("child")}
        for row in rows:
            row["answer_tokens"] = answers.get(str(row["pk"]))
        # A replay (E2) runs no sub-agent: it reused the recorded ones' answers.
        reused = [{"pk": ev.payload.get("child"), "status": ev.payload.get("child_status"),
                   "answer_tokens": ev.payload.get("kept_tokens"),
                   "input_tokens": ev.payload.get("child_input_tokens") or 0}
                  for ev in events if ev.type == "TOOL_RESULT" and ev.payload.get("reused")]
        return {"children": rows, "parent": session.parent, "reused": reused,
                "own_cost": session.cost,
                "total_cost": session.cost + sum(r["cost"] for r in rows),
                "answers_tokens": sum(t or 0 for t in answers.values()),
                "children_tokens": sum(r["input_tokens"] for r in rows)}

    def badge(self, context: dict[str, Any]) -> str:
        count = len(context["children"]) or len(context["reused"])
        return str(count) if count else ""
