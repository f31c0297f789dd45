"""The events a page's panels read, held in memory while the page is connected.

Re-reading every event of a panel's types on each live update made a long run quadratic:
on long-1000 the server spent seconds per update re-selecting thousands of rows, and the
drawer fell seconds behind the database. A feed reads them once (the first sync), then
only the events stored after the last seq it holds, so an update costs what is new.

What it keeps is bounded by what panels read: only the types some panel handles, only
the events a panel `wants` (a sub-agent's answer, not every tool result), and only the
newest one of a type every panel reading it shows just the latest of (`latest_only`).
"""
from __future__ import annotations

import re
from collections import defaultdict

from agents import Event
from taskos.drawer.base import Panel
from taskos.drawer.events import load_events
from taskos.runs.models import Session

# The opening tag of an element sent whole: its id.
WHOLE = re.compile(r'<[a-z]+ id="([^"]+)"[^>]*hx-swap-oob="true"')


class EventFeed:
    """Panel events of one session up to `seq`; `advance` adds the ones after it."""

    def __init__(self, panels: tuple[Panel, ...] | list[Panel]) -> None:
        self.panels = tuple(panels)
        self.types = {t for panel in self.panels for t in panel.event_types}
        # A type is capped to its newest event only when no panel needs more of it.
        self.latest_only = {t for t in self.types
                            if all(t in panel.latest_only for panel in self.panels
                                   if panel.handles(t))}
        self.by_type: dict[str, list[Event]] = defaultdict(list)
        self.seq = 0
        self.loaded = False
        # Panels whose body on the page is current up to `seq`: those can be brought up to
        # date with their `delta` (rows appended); any other is sent whole.
        self.current: set[str] = set()
        # What the page was last sent of each element a panel replaces whole, by id.
        self.sent: dict[str, dict[str, int]] = defaultdict(dict)

    def load(self, session: Session) -> None:
        """Fill the feed from the database (the first sync, or after a reset)."""
        self.by_type.clear()
        self.current.clear()
        self.sent.clear()
        self.seq = 0
        self.add(load_events(session, self.types))
        self.loaded = True

    def advance(self, session: Session, new: list[Event]) -> None:
        """Add `new` (every event stored after some seq, in order), loading first if needed."""
        if not self.loaded:
            self.load(session)
            return
        self.add([ev for ev in new if ev.type in self.types])

    def add(self, events: list[Event]) -> None:
        for ev in events:
            if ev.seq <= self.seq and self.loaded:
                continue  # already held: the page asked again from an earlier seq
            if any(panel.handles(ev.type) and panel.wants(ev) for panel in self.panels):
                kept = self.by_type[ev.type]
                if ev.type in self.latest_only:
                    kept.clear()
                kept.append(ev)
        if events:
            self.seq = max(self.seq, events[-1].seq)

    def events_for(self, panel: Panel) -> list[Event]:
        """The panel's events, by seq."""
        found = [ev for t in panel.event_types for ev in self.by_type.get(t, ())
                 if panel.wants(ev)]
        if len(panel.event_types) > 1:
            found.sort(key=lambda ev: ev.seq)
        return found

    def not_sent(self, panel: str, parts: list[str], *, skip: bool) -> list[str]:
        """`parts` (a panel's fragments) less, when `skip`, the elements replaced whole that
        the page already shows exactly (a list that did not change: nothing to parse).

        A panel's body sent whole makes what was noted of its parts void."""
        sent = self.sent[panel]
        kept = []
        for part in parts:
            found = WHOLE.match(part)
            if found is None:
                kept.append(part)
                continue
            if found.group(1).endswith("-body"):
                sent.clear()
            digest = hash(part)
            if skip and sent.get(found.group(1)) == digest:
                continue
            sent[found.group(1)] = digest
            kept.append(part)
        return kept
