"""The drawer's panel contract, in the manner of django-debug-toolbar's panels.

A panel is a small class: which event types it reads, how it turns them (and, for
anchors and tasks, the database rows) into a template context, and which template
draws it. The page, the resync view and the websocket consumer all render panels
through `render_panel`, so the three can never disagree about what a panel shows.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from django.template.loader import render_to_string

from agents import Event, EventType
from taskos.runs.models import Session


class Panel(ABC):
    """One concern of the drawer; subclasses set the class attributes and `get_context`."""

    name: ClassVar[str]  # short id: the panel's DOM ids derive from it
    title: ClassVar[str]
    template: ClassVar[str]
    event_types: ClassVar[tuple[EventType, ...]] = ()
    open_by_default: ClassVar[bool] = True
    # Types of which the panel shows only the newest event: a live page keeps just that one.
    latest_only: ClassVar[frozenset[EventType]] = frozenset()

    def handles(self, event_type: str) -> bool:
        """True when an event of this type changes what the panel shows."""
        return event_type in self.event_types

    def wants(self, ev: Event) -> bool:
        """False for events of its types that the panel ignores (not kept for it live)."""
        return True

    @abstractmethod
    def get_context(self, session: Session, events: list[Event]) -> dict[str, Any]:
        """Template context from the session and its events of `event_types`, by seq."""

    def badge(self, context: dict[str, Any]) -> str:
        """A few characters shown next to the title (a count, a percentage)."""
        return ""

    def delta(self, session: Session, context: dict[str, Any], events: list[Event],
              new: list[Event]) -> str | None:
        """Out-of-band fragments that bring the body on a page, current up to the events
        before `new` (the last ones of `events`), to `context`: rows appended to its logs,
        small parts sent whole. None when the panel has no such update (or not for this
        change): the body is sent whole."""
        return None

    @property
    def dom_id(self) -> str:
        return f"panel-{self.name}"


def render_panel(panel: Panel, session: Session, events: list[Event], *, oob: bool = False,
                 new: list[Event] | None = None) -> str:
    """The panel's HTML: the whole <details> on the page, its badge and body when `oob`.

    Live updates replace only the badge and the body so that a panel a person folded
    stays folded while the task runs. Given `new` (the page holds the body as it was
    before those events), the body part is the panel's `delta` when it has one.
    """
    context = panel.get_context(session, events)
    if oob and new:
        delta = panel.delta(session, context, events, new)
        if delta is not None:
            return render_to_string("drawer/panel.html", {
                "panel": panel, "oob": True, "badge": panel.badge(context), "delta": delta})
    return render_to_string("drawer/panel.html", {
        "panel": panel, "session": session, "oob": oob, "badge": panel.badge(context),
        # on_page: the page's own render, which may leave a finished session's folded
        # details to be fetched when opened (a live update always sends what it shows).
        "body": render_to_string(panel.template, {**context, "session": session,
                                                  "on_page": not oob}),
    })
