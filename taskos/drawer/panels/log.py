"""Hints and Errors: the HINT_BLOCK and ERROR events, newest first."""
from __future__ import annotations

from collections import Counter
from typing import Any

from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

from agents import ErrorEvent, Event, EventType
from taskos.drawer.base import Panel

SHOWN = 60  # older entries are counted, not listed: the drawer stays light on long runs


class HintsPanel(Panel):
    name = "hints"
    title = "Hints"
    template = "drawer/panels/hints.html"
    event_types = (EventType.HINT_BLOCK,)
    open_by_default = False

    def get_context(self, session, events: list[Event]) -> dict[str, Any]:
        # HintBlocks: the panel reads no other type.
        kinds = Counter(ev.kind for ev in events)
        hints = [{"seq": ev.seq, "turn": ev.turn, "kind": ev.kind, "text": ev.text}
                 for ev in reversed(events[-SHOWN:])]
        return {"hints": hints, "count": len(events), "hidden": max(0, len(events) - SHOWN),
                "kinds": sorted(kinds.items()), "shown": SHOWN}

    def badge(self, context: dict[str, Any]) -> str:
        return str(context["count"]) if context["count"] else ""

    def delta(self, session, context: dict[str, Any], events: list[Event],
              new: list[Event]) -> str | None:
        """The new hints on top of the list (the page keeps the newest SHOWN) and the
        counts; whole when the page has no list yet."""
        if len(events) == len(new) or len(new) > SHOWN:
            return None
        oob = {**context, "oob": True}
        rows = render_to_string("drawer/panels/_hint_rows.html",
                                {"hints": context["hints"][:len(new)]})
        return mark_safe("\n".join([
            render_to_string("drawer/panels/_hints_kinds.html", oob),
            f'<div hx-swap-oob="afterbegin:#hints-list">{rows}</div>',
            render_to_string("drawer/panels/_hints_hidden.html", oob)]))


class ErrorsPanel(Panel):
    name = "errors"
    title = "Errors"
    template = "drawer/panels/errors.html"
    event_types = (EventType.ERROR, EventType.SESSION_FINISHED)

    def get_context(self, session, events: list[Event]) -> dict[str, Any]:
        errors = [{"seq": ev.seq, "turn": ev.turn, "code": ev.code, "message": ev.message,
                   "cause": ev.cause, "action": ev.action, "fatal": ev.fatal}
                  for ev in reversed(events) if isinstance(ev, ErrorEvent)]
        # A worker crash can fail a session without an ERROR event; its message is here.
        reported = {e["message"] for e in errors}
        # Session.error quotes the fatal event's message (with its code and action).
        failure = (session.error if session.error
                   and not any(m and m in session.error for m in reported) else "")
        return {"errors": errors[:SHOWN], "count": len(errors), "failure": failure}

    def badge(self, context: dict[str, Any]) -> str:
        count = context["count"] + (1 if context["failure"] else 0)
        return str(count) if count else ""
