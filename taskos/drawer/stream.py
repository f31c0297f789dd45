"""What the session page, the resync view and the websocket consumer send to a browser.

The database is the truth (feature W5): a browser that has events up to seq N asks for
"everything after N" and gets the transcript entries it lacks, every panel the new
events touch (or all of them on a resync), the status header and its new last seq,
all as htmx out-of-band fragments swapped by id.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from operator import attrgetter

from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from agents import Event, EventType
from taskos.drawer.base import Panel, panel_events, render_panel
from taskos.drawer.events import latest_seq, load_events, load_newest
from taskos.drawer.feed import EventFeed
from taskos.drawer.panels import PANELS
from taskos.runs.models import Session
from taskos.store.stored_events import discards_before

TRANSCRIPT_TYPES = (EventType.USER_MESSAGE, EventType.ASSISTANT_MESSAGE, EventType.TOOL_CALL,
                    EventType.TOOL_RESULT, EventType.COMPACTION, EventType.ERROR,
                    EventType.APPROVAL_REQUESTED, EventType.APPROVAL_DECIDED,
                    EventType.SESSION_FINISHED)
# The types by name, for drawer/transcript.html: {% if ev.type == types.TOOL_RESULT %}.
TYPES = {kind.name: kind for kind in EventType}
# Transcript entries per page: a 1000-turn session shows its end and loads older pages
# on request instead of rendering ~5 000 entries up front. The transcript reads newest
# first: a live page gains entries at the top, where a person following the run already
# looks, and its oldest leave at the bottom (static/js/taskos.js), so the page stays
# as light at turn 1000 as at turn 10 without ever being scrolled.
TRANSCRIPT_PAGE = 60
seq_of = attrgetter("seq")


@dataclass(frozen=True)
class Update:
    """HTML fragments for a browser and the seq it has once it applied them."""

    html: str
    last_seq: int
    active: bool  # the session was still queued or running when this was rendered


def render_panels(session: Session, panels: tuple[Panel, ...] | list[Panel], *,
                  oob: bool, feed: EventFeed | None = None,
                  new: list[Event] | None = None,
                  everything: list[Event] | None = None) -> SafeString:
    """Render `panels` from a live page's `feed`, else from `everything` (every event of
    the session, when the caller has read them all already), else from one query over
    the union of the event types they read.

    With a feed and the `new` events of this update, a panel the page holds current up to
    them gets only what changed (its `delta`); the others are sent whole. Every panel
    rendered is current afterwards.
    """
    if feed is not None:
        parts = []
        for panel in panels:
            own_new = None
            if new is not None and panel.name in feed.current:
                own_new = [ev for ev in new if panel.handles(ev.type) and panel.wants(ev)]
            html = render_panel(panel, session, feed.events_for(panel), oob=oob, new=own_new,
                                open_parts=feed.open_parts)
            parts.extend(feed.not_sent(panel.name, fragments(html), skip=own_new is not None)
                         if oob else [html])
            feed.current.add(panel.name)
            feed.folded.pop(panel.name, None)
        return mark_safe("\n".join(parts))
    if everything is not None:
        wanted = {t for panel in panels for t in panel.event_types}
        events = [ev for ev in everything if ev.type in wanted]
    else:
        events = panel_events(session, panels)
    # Each panel's events picked by type from one split, not by a pass over all of them
    # per panel (~2 500 events x 11 panels on a finished long-1000 page).
    by_type: dict[str, list[Event]] = {}
    for ev in events:
        by_type.setdefault(ev.type, []).append(ev)
    parts = []
    for panel in panels:
        own = sorted((ev for kind, of_kind in by_type.items() if panel.handles(kind)
                      for ev in of_kind if panel.wants(ev)), key=seq_of)
        parts.append(render_panel(panel, session, own, oob=oob))
    return mark_safe("\n".join(parts))  # joined template output, escaped when rendered


# An out-of-band fragment starts a line with a tag carrying hx-swap-oob (drawer/panel.html
# and the panels' deltas put each on its own line; nested rows carry none).
FRAGMENT_START = re.compile(r"\n(?=<[a-z][a-z0-9]* [^>]*hx-swap-oob=)")


def fragments(html: str) -> list[str]:
    return [part for part in FRAGMENT_START.split(html) if part.strip()]


def render_drawer(session: Session) -> SafeString:
    """Every panel, whole, for the session page."""
    return render_panels(session, PANELS, oob=False)


def render_transcript(session: Session, events: list[Event]) -> SafeString:
    """Transcript entries, newest first, for the events among `events` (by seq) that
    belong in a transcript."""
    entries = [ev for ev in reversed(events) if ev.type in TRANSCRIPT_TYPES]
    if not entries:
        return SafeString("")
    return render_to_string("drawer/transcript.html", {"session": session, "events": entries,
                                                        "types": TYPES})


def render_older(session: Session, events: list[Event], more: bool) -> SafeString:
    """The "load older" button below `events` (by seq), when there are entries before them."""
    if not more or not events:
        return SafeString("")
    return render_to_string("drawer/_older.html", {"session": session, "before": events[0].seq})


def transcript_page(session: Session, before: int | None = None) -> SafeString:
    """The newest TRANSCRIPT_PAGE entries before seq `before`, newest first, and under them
    a button for older ones."""
    events, more = load_newest(session, TRANSCRIPT_TYPES, TRANSCRIPT_PAGE, before)
    return mark_safe(render_transcript(session, events) + render_older(session, events, more))


def render_status(session: Session, *, oob: bool) -> SafeString:
    """The status header: status, turns, tokens, cost and the cancel button."""
    return render_to_string("web/_status.html", {"session": session, "oob": oob})


# The status header's name among what a live page's feed remembers it sent, and what the
# page asks to have again when a patch of the header does not fit (static/js/fragments.js).
STATUS = "status"


def status_fragments(session: Session, feed: EventFeed | None) -> str:
    """The status header out of band; to a live page, only the figures that changed since
    it was last sent (nothing when none did). Sent whole on each of long-1000's ~600
    updates it was ~0.3 MB of the websocket, almost all of it figures the page had."""
    html = render_status(session, oob=True).strip()
    if feed is None:
        return html
    return "\n".join(feed.not_sent(STATUS, [html], skip=False))


def render_update(session: Session, after: int, *, full: bool = False,
                  open_panels: set[str] | None = None, feed: EventFeed | None = None) -> Update:
    """Fragments that bring a browser holding events up to seq `after` up to date.

    With `full` every panel is rendered (a connect or reconnect); otherwise only the
    panels that read one of the new event types and, when the page said which of its
    panels are open (`open_panels`), only open ones: a folded panel is brought up to
    date when it is unfolded (`render_named_panels`). Nothing new and not `full`: empty.
    A live page passes its `feed`: panels are then rendered from it, and the database is
    read only for the events after `after`.
    """
    new = load_events(session, after=after)
    if not new and not full:
        return Update("", after, session.is_active)
    # A resume discarded events the page may hold (the interrupted turn's): it gets every
    # panel and the transcript again, from the live rows only (issue 25 item 2).
    discarded = after > 0 and discards_before(new)
    full = full or discarded
    # A browser claiming more than is stored (a reset database) is set back to what is.
    last = new[-1].seq if new else min(max(after, 0), latest_seq(session))
    if feed is not None:
        if (feed.seq > last and not new) or discarded:
            feed.load(session)  # the feed holds events the database no longer has
        else:
            feed.advance(session, new)
    if full:
        panels: tuple[Panel, ...] | list[Panel] = PANELS
        if feed is not None:
            feed.current.clear()
            feed.folded.clear()
    else:
        touched = [panel for panel in PANELS
                   if any(panel.handles(ev.type) and panel.wants(ev) for ev in new)]
        panels = [panel for panel in touched
                  if open_panels is None or panel.name in open_panels]
        if feed is not None:  # a folded panel falls behind: caught up when unfolded
            for panel in touched:
                if panel not in panels and panel.name in feed.current:
                    feed.folded.setdefault(panel.name, after)
    parts = []
    if discarded:
        parts.append(render_to_string("drawer/_transcript_whole.html", {
            "session": session, "transcript": transcript_page(session, last + 1)}))
    elif transcript := render_transcript(session, new):
        parts.append(f'<div hx-swap-oob="afterbegin:#transcript">{transcript}</div>')
    # From the start (a page that has nothing yet), `new` is every event: read once.
    parts.append(render_panels(session, panels, oob=True, feed=feed, new=None if full else new,
                               everything=new if after <= 0 else None))
    parts.append(status_fragments(session, feed))
    parts.append(f'<input type="hidden" id="last-seq" value="{last}" hx-swap-oob="true">')
    return Update("\n".join(parts), last, session.is_active)


def children_state(session_pk: int) -> tuple:
    """What the Sub-agents panel shows of the children, to notice when it changed: a
    child's progress is stored on its own rows, never as an event of the parent."""
    return tuple(Session.objects.filter(parent_id=session_pk).order_by("id").values_list(
        "pk", "status", "turns", "total_input_tokens", "cost"))


def render_children_update(session: Session, feed: EventFeed | None = None) -> str:
    """The Sub-agents panel and the status header (cost with sub-agents), out of band."""
    panels = [panel for panel in PANELS if panel.name == "children"]
    return "\n".join([render_panels(session, panels, oob=True, feed=feed),
                      status_fragments(session, feed)])


# Panels that show buttons acting on a running session (unpin, approve or deny): what a
# change of the session's status alone changes in the drawer.
STATUS_PANELS = ("approvals", "anchors", "children")


def render_status_update(session: Session, feed: EventFeed | None = None) -> str:
    """The status header and the panels that change with the session's status, out of
    band: for a status written with no event after it (a session's final status). Every
    panel re-rendered for it took a full sync: at the end of long-1000, while the finished
    page was being opened in another tab, on the same web server."""
    panels = [panel for panel in PANELS if panel.name in STATUS_PANELS]
    return "\n".join([render_panels(session, panels, oob=True, feed=feed),
                      status_fragments(session, feed)])


def render_named_panels(session: Session, names: set[str], feed: EventFeed | None = None) -> str:
    """The named panels' badges and bodies, out of band: a panel the page just unfolded.

    A live page's panel that fell behind while folded gets what came after the seq its
    body is current up to (nothing when nothing came); one the page lost track of (the
    consumer forgot it) or was never sent is rendered whole."""
    panels = [panel for panel in PANELS if panel.name in names]
    # The status header, asked for again: a patch of it did not fit (the page was sent it
    # whole over HTTP since, after an approval).
    parts = [status_fragments(session, feed)] if STATUS in names else []
    if feed is None or not panels:
        if panels:
            parts.append(render_panels(session, panels, oob=True, feed=feed))
        return "\n".join(parts)
    for panel in panels:
        if panel.name not in feed.current:  # never sent, or the page lost track of it
            parts.append(render_panels(session, [panel], oob=True, feed=feed))
            continue
        behind = feed.folded.pop(panel.name, feed.seq)  # not behind: nothing to send
        since = [ev for ev in feed.events_for(panel) if ev.seq > behind]
        if since:
            parts.append(render_panels(session, [panel], oob=True, feed=feed, new=since))
    return "\n".join(parts)


def page_state(session: Session) -> dict[str, object]:
    """What the session page renders at load: transcript, drawer and the seq they reach."""
    last = latest_seq(session)
    return {"transcript": transcript_page(session, last + 1), "drawer": render_drawer(session),
            "status": render_status(session, oob=False), "last_seq": last}
