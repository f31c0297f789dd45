"""The drawer's panel contract, in the manner of django-debug-toolbar's panels.

A panel is a small class: which event types it reads, how it turns them (and, for
anchors and tasks, the database rows) into a template context, and which template
draws it. The page, the resync view and the websocket consumer all render panels
through `render_panel`, so the three can never disagree about what a panel shows.
"""
from __future__ import annotations

import operator
from abc import ABC, abstractmethod
from functools import reduce
from typing import Any, ClassVar

from django.db.models import Q
from django.template.loader import render_to_string

from agents import Event, EventType
from taskos.drawer.events import load_events
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
    # Types of which the panel shows the newest few ({type: how many}) and, of the older
    # ones, only those `older_read` names, only their `older_keys` if it names them: the
    # rest is not read when it is rendered whole.
    newest_read: ClassVar[dict[EventType, int]] = {}
    older_keys: ClassVar[dict[EventType, tuple[str, ...]]] = {}

    def older_read(self, event_type: str) -> Q | None:
        """The rows of `event_type` (one of `newest_read`) before its newest few that the
        panel reads still (a Q on SessionEvent), or None for none."""
        return None

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


def panel_events(session: Session, panels: tuple[Panel, ...] | list[Panel]) -> list[Event]:
    """The events `panels` read to be rendered whole, by seq: of a type every panel reading
    it shows the newest of only (`latest_only`, `newest_read`), only those are read. On a
    finished long-1000 page that left out ~1 000 budget events and ~3 900 anchor changes
    of the ~7 500 it read, and the summaries of the ~390 earlier compactions (4 of their
    4.5 MB)."""
    types = {t for panel in panels for t in panel.event_types}
    whole, newest = set(), {}
    for kind in types:
        readers = [panel for panel in panels if panel.handles(kind)]
        if all(kind in panel.latest_only for panel in readers):
            newest[kind] = (1, None, None)
        elif all(kind in panel.newest_read for panel in readers):
            older = [panel.older_read(kind) for panel in readers]
            keys = [panel.older_keys.get(kind) for panel in readers]
            newest[kind] = (max(panel.newest_read[kind] for panel in readers),
                            None if None in older else reduce(operator.or_, older),
                            None if None in keys else tuple(sorted(set().union(*keys))))
        else:
            whole.add(kind)
    return load_events(session, whole, newest=newest) if types else []


def render_panel(panel: Panel, session: Session, events: list[Event], *, oob: bool = False,
                 new: list[Event] | None = None, open_parts: set[str] | None = None) -> str:
    """The panel's HTML: the whole <details> on the page, its badge and body when `oob`.

    Live updates replace only the badge and the body so that a panel a person folded
    stays folded while the task runs. Given `new` (the page holds the body as it was
    before those events), the body part is the panel's `delta` when it has one;
    `open_parts` are the folded lists in panels the page has open (None: all of them), of
    which a delta leaves the others out (taskos/drawer/feed.py `open_parts`).
    """
    context = panel.get_context(session, events)
    if oob and new:
        delta = panel.delta(session, {**context, "open_parts": open_parts}, events, new)
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
