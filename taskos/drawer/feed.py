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
from taskos.drawer.base import Panel, panel_events
from taskos.drawer.patches import NotPatchable, Sent, diff, find, parse
from taskos.runs.models import Session

# The opening tag of an element sent whole: its id.
WHOLE = re.compile(r'<[a-z][a-z0-9]* [^>]*?\bid="([^"]+)"[^>]*hx-swap-oob="true"')
# What any other fragment changes on the page: the element it adds to (…:#id) or the one
# it removes or changes (its id).
TARGET = re.compile(r'<[a-z]+ [^>]*?(?:hx-swap-oob="[a-z]+:#([^"]+)"|\bid="([^"]+)")')
SENT_WHOLE = ' hx-swap-oob="true"'
BESIDE = re.compile(r'<[a-z]+ [^>]*?hx-swap-oob="(?:afterend|beforebegin):#')
ELEMENT_ID = re.compile(r'<[a-z][a-z0-9]* [^>]*?\bid="([^"]+)"')
# Rows inserted that the feed notes as if sent whole (their next change a patch).
NOTED = " data-noted"
# Notes kept per panel: a row removed in a range (a compaction's) leaves its note behind.
NOTES_KEPT = 400
# A folded list in a panel: <details data-part="ID"> around the element with id ID.
PART = re.compile(r'<details [^>]*?\bdata-part="([^"]+)"')


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
        # Folded panels not sent their updates: the seq their body on the page is current
        # up to, so unfolding sends what came after it (their `delta`), not the body whole.
        self.folded: dict[str, int] = {}
        # What the page was last sent of each element a panel replaces whole, by id: the
        # next time only what differs is sent (taskos/drawer/patches.py).
        self.sent: dict[str, dict[str, Sent]] = defaultdict(dict)
        self.revision = 0  # of the elements sent whole, so a patch names the one it fits
        # The folded lists inside panels (a <details data-part="ID"> around the element
        # ID: retired anchors, the anchor change log) that the page has open; None until
        # the page said, then every other part is folded on it. A folded part is not sent
        # what changed in it: its rows are not seen, and were most of a long run's bytes
        # (long-1000: ~2 MB of the anchors panel's 3 MB). Opened, it is brought up to date.
        self.open_parts: set[str] | None = None

    def load(self, session: Session) -> None:
        """Fill the feed from the database (the first sync, or after a reset)."""
        self.by_type.clear()
        self.current.clear()
        self.folded.clear()
        self.sent.clear()
        self.seq = 0
        self.add(panel_events(session, self.panels))
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
        """`parts` (a panel's fragments) with each element replaced whole that the page was
        sent before cut down to the patches that make it what it is now (none when it did
        not change: nothing to parse or lay out on the page).

        The page changes inside an element through other fragments too (rows appended, an
        element deleted): what was noted of the elements holding their target is void, and
        so is a body's note when a part of it is sent, and its parts' when it is."""
        sent = self.sent[panel]
        kept = []
        for part in parts:
            found = WHOLE.match(part)
            if found is None:
                target = TARGET.match(part)
                changed = (target.group(1) or target.group(2)) if target else None
                # The elements it carries (rows appended) arrive without a revision, in
                # place of any of theirs the page shows: a note of one, kept from before it
                # left the page (a patch of its list removed it), would make its next change
                # a patch the page cannot place, and the page would ask for the panel whole.
                carried = set(ELEMENT_ID.findall(part))
                # Rows placed beside an element change its parent, not the element.
                beside = BESIDE.match(part) is not None
                for dom_id in [k for k, note in sent.items()
                               if changed is None
                               or (changed in note.ids and not (beside and k == changed))
                               or not carried.isdisjoint(note.ids)]:
                    del sent[dom_id]
                kept.append(self.noted(sent, part) if NOTED in part else part)
                continue
            kept.extend(self.patched(sent, found.group(1), part))
        return kept

    def patched(self, sent: dict[str, Sent], dom_id: str, part: str) -> list[str]:
        """The element `part` (sent whole) as patches of what the page was sent, or whole
        with a new revision."""
        html = part.strip().replace(SENT_WHOLE, "", 1)
        old = sent.pop(dom_id, None)
        try:
            new = parse(html, 0)
        except NotPatchable:
            sent.clear()  # not one well-formed element: whole, and nothing noted
            return [part]
        patches = None
        if old is not None:
            kept_html, kept = self.folded_kept(old, html, new)
            try:
                patches = diff(old, kept_html, kept)
            except NotPatchable:
                pass  # sent whole, folded parts and all: the page then shows `html`
            else:
                html, new = kept_html, kept
        # Elements it holds change with it on the page (and lose their revision when
        # merged): sent whole again next time. One that holds it now holds it as sent.
        for other, note in list(sent.items()):
            if other in new.ids:
                del sent[other]
            elif dom_id in note.ids:
                held = spliced(note, dom_id, html)
                if held is None:
                    del sent[other]
                else:
                    sent[other] = held
        if patches is not None:
            new.rev = old.rev
            sent[dom_id] = new
            return patches
        self.revision += 1
        new.rev = self.revision
        sent[dom_id] = new
        return [part.replace(SENT_WHOLE, f'{SENT_WHOLE} data-rev="{new.rev}"', 1)]

    def noted(self, sent: dict[str, Sent], part: str) -> str:
        """`part` (rows inserted) with each row marked data-noted given a revision and
        noted as sent whole: its next change is then a patch, not the row again (the
        inspector's rows: a tool result cleared, a row's zone in a summary request)."""
        try:
            wrapper = parse(part.strip(), 0)
        except NotPatchable:
            return part
        html = part.strip()
        pieces, at = [], 0
        for row in wrapper.root.children:
            start_tag = html[row.start:row.open_end]
            if row.dom_id is None or NOTED not in start_tag:
                continue
            plain = html[row.start:row.end].replace(NOTED, "", 1)
            try:
                note = parse(plain, 0)
            except NotPatchable:
                continue
            self.revision += 1
            note.rev = self.revision
            sent[row.dom_id] = note
            while len(sent) > NOTES_KEPT:  # rows long gone from the page: the oldest first
                del sent[next(iter(sent))]
            pieces += [html[at:row.start],
                       start_tag.replace(NOTED, f' data-rev="{note.rev}"', 1)]
            at = row.open_end
        return "".join(pieces) + html[at:]

    def folded_parts(self, html: str) -> set[str]:
        """The parts `html` holds that are folded on the page."""
        if self.open_parts is None:
            return set()
        return {part for part in PART.findall(html) if part not in self.open_parts}

    def folded_kept(self, old: Sent, html: str, new: Sent) -> tuple[str, Sent]:
        """`html` with each part folded on the page as the page shows it (as `old` had it),
        so the patches leave it alone and the note says what the page holds."""
        for part in self.folded_parts(html) & old.ids & new.ids:
            was, now = find(old.root, part), find(new.root, part)
            if was is None or now is None:
                continue
            kept = html[:now.start] + old.html[was.start:was.end] + html[now.end:]
            try:
                new = parse(kept, new.rev)
            except NotPatchable:
                continue
            html = kept
        return html, new

    def forget(self, panels: set[str]) -> None:
        """The page does not show what it was sent of these panels (a patch did not fit,
        or a person swapped a part): they are sent whole next."""
        for name in panels:
            self.sent.pop(name, None)
            self.folded.pop(name, None)
            self.current.discard(name)



def spliced(note: Sent, dom_id: str, html: str) -> Sent | None:
    """`note` with its element `dom_id` now `html` (None when that cannot be told)."""
    node = find(note.root, dom_id)
    if node is None:
        return None
    try:
        held = parse(note.html[:node.start] + html + note.html[node.end:], note.rev)
    except NotPatchable:
        return None
    return held
