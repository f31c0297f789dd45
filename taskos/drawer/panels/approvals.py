"""Ask before a tool acts (feature T11): the calls waiting for a person, and the decisions.

A pending call shows its arguments and, for a write, the diff it would make, with
Approve and Deny-with-a-reason (taskos/web/approval_views.py). What the panel shows lives
on ToolApproval rows, so a page rendered while nobody runs the session (it waits for
approval) is as current as a live one; the events only say when to draw it again.
"""
from __future__ import annotations

import json
from typing import Any

from agents import Event, EventType
from taskos.drawer.base import Panel
from taskos.runs.models import ToolApproval


def shown_arguments(text: str) -> str:
    """The call's arguments as indented JSON (as written, when they are not JSON)."""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        return text


def diff_lines(preview: str) -> list[tuple[str, str]]:
    """(kind, line) for a unified diff: add, remove, hunk or context."""
    out = []
    for line in preview.splitlines():
        kind = ("file" if line.startswith(("+++", "---")) else "add" if line.startswith("+")
                else "remove" if line.startswith("-") else "hunk" if line.startswith("@@")
                else "context")
        out.append((kind, line))
    return out


class ApprovalsPanel(Panel):
    name = "approvals"
    title = "Approvals"
    template = "drawer/panels/approvals.html"
    event_types = (EventType.APPROVAL_REQUESTED, EventType.APPROVAL_DECIDED,
                   EventType.SESSION_WAITING, EventType.SESSION_FINISHED)

    def get_context(self, session, events: list[Event]) -> dict[str, Any]:
        rows = []
        for approval in ToolApproval.objects.filter(session=session).select_related(
                "decided_by").order_by("-id"):
            rows.append({"approval": approval, "arguments": shown_arguments(approval.arguments),
                         "diff": diff_lines(approval.preview),
                         "by": approval.decided_how or (approval.decided_by.get_username()
                                                        if approval.decided_by_id else "")})
        pending = [row for row in rows if row["approval"].status == ToolApproval.Decision.PENDING]
        return {"pending": pending, "decided": [row for row in rows if row not in pending],
                "ask_first": session.ask_first}

    def badge(self, context: dict[str, Any]) -> str:
        return f"{len(context['pending'])} waiting" if context["pending"] else ""
