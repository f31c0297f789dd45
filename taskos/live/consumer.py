"""Websocket consumer: streams a session's drawer to its owner as htmx fragments (feature W5).

Protocol. The page connects to ws/sessions/<pk>/ and, on every (re)connect, sends
{"after": N}, N being the last seq it holds (the ws extension's open event; see
static/js/taskos.js). Clients that cannot send may put ?after=N in the URL instead.
The consumer answers with every fragment the page lacks, rendered from the database,
and from then on treats each group message as a signal to send what was stored after
the last seq it sent. Rendering from the database, not from the message, means a lost
or reordered message never leaves a gap: the next one brings everything after it.
Until the page has said where it stands, group messages are ignored (they are stored,
so the first sync includes them), which keeps the transcript free of duplicates.

The channel layer drops messages for a consumer that falls behind (its capacity), so
the newest events of a burst may never announce themselves. While connected, the
consumer therefore also checks the database every IDLE_CHECK_S seconds for events it
has not sent; the stream stays the fast path, the check is the guarantee. The same check
notices sub-agents (feature T6) changing: their progress is on their own rows, so a waiting
parent's page gets its Sub-agents panel re-rendered without any event of its own.
It also notices the session's status changing without an event: the worker stores
SESSION_FINISHED before it writes the final status on the row, so the sync that event
triggered can render "running" with nothing after it to correct the page (seen as a page
stuck at "running" in browser tests on a loaded machine).
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from taskos.drawer.events import latest_seq
from taskos.drawer.feed import EventFeed
from taskos.drawer.panels import PANELS
from taskos.drawer.stream import (Update, children_state, render_children_update,
                                  render_named_panels, render_status_update, render_update)
from taskos.live.sending import group_name
from taskos.runs.models import Session
from taskos.runs.whole_numbers import MAX_PARAM, whole_number

log = logging.getLogger("taskos.live")

FORBIDDEN = 4403  # close code: not signed in, or not this person's session


class SessionConsumer(AsyncWebsocketConsumer):
    IDLE_CHECK_S = 3.0
    session_pk: int
    group: str | None = None
    synced_seq: int | None = None  # last seq sent to this page; None until it said where it is
    active = True  # the session was queued or running at the last sync
    watchdog: asyncio.Task | None = None
    children_seen: tuple = ()  # the sub-agents as last rendered for this page
    status_seen = ""  # the session's status as last rendered for this page
    open_panels: set[str] | None = None  # None until the page says which panels are open
    last_sync = 0.0  # time.monotonic() of the last sync
    pending: asyncio.Task | None = None  # a sync scheduled for the end of the interval

    @property
    def refresh_s(self) -> float:
        return settings.TASKOS_DRAWER_REFRESH_S

    async def connect(self) -> None:
        self.session_pk = int(self.scope["url_route"]["kwargs"]["pk"])
        # Accept, then close with a code: a refusal during the handshake reaches the browser
        # as 1006, which the htmx ws extension would retry forever.
        await self.accept()
        if not await self.allowed():
            await self.close(code=FORBIDDEN)
            return
        self.lock = asyncio.Lock()  # one sync at a time: the watchdog and messages share it
        # The panels' events for this page, read once and then only what is new.
        self.feed = EventFeed(PANELS)
        self.group = group_name(self.session_pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        self.watchdog = asyncio.create_task(self.watch())
        after = parse_qs(self.scope.get("query_string", b"").decode()).get("after")
        if after and whole_number(after[0]) is not None:
            await self.sync(int(after[0]), full=True)

    async def disconnect(self, code: int) -> None:
        if self.watchdog is not None:
            self.watchdog.cancel()
        if self.pending is not None:
            self.pending.cancel()
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """{"after": N} from the page: send everything after seq N, all panels fresh.

        The page may add "open": [panel names] (then folded panels are not re-rendered
        while the task runs), "parts": [ids] of the folded lists inside panels it has
        open (the others are not sent their rows: taskos/drawer/feed.py `open_parts`)
        and "refresh": [names] for panels it just unfolded, with "stale": true when it
        does not show what it was sent of them (a patch did not fit, or a list it opened
        was left behind while folded): then they come whole.
        """
        if self.group is None:
            return
        try:
            data = json.loads(text_data or "")
            after = int(data["after"]) if "after" in data else None
            opened = data.get("open")
            parts = data.get("parts")
            refresh = {str(name) for name in data.get("refresh") or ()}
            stale = bool(data.get("stale"))
        except (ValueError, TypeError, AttributeError):
            data = None
        if data is None or (after is None and opened is None):
            log.info("Ignored a websocket message for session %s that is not {\"after\": N}",
                     self.session_pk)
            return
        if isinstance(opened, list):
            self.open_panels = {str(name) for name in opened}
        if isinstance(parts, list):
            self.feed.open_parts = {str(part) for part in parts}
        if after is not None:
            self.feed.sent.clear()  # where the page stands: it is sent everything whole
            await self.sync(min(max(0, after), MAX_PARAM), full=True)
        elif refresh and self.synced_seq is not None:
            async with self.lock:
                if stale:
                    self.feed.forget(refresh)
                html = await self.render_named(refresh)
                if html:
                    await self.send(text_data=html)

    async def session_event(self, message: dict) -> None:
        """A stored event was published: send what this page has not seen yet.

        Events of a busy run arrive many per second; rendering each alone re-renders the
        same panels over and over. At most one sync per settings.TASKOS_DRAWER_REFRESH_S
        is sent, covering every event stored by then (one is scheduled for the end of the
        interval).
        """
        if self.synced_seq is None:
            return
        seq = int((message.get("event") or {}).get("seq") or 0)
        if seq and seq <= self.synced_seq:
            return  # already sent by an earlier sync
        if self.pending is not None and not self.pending.done():
            return  # the scheduled sync will include this event
        wait = self.last_sync + self.refresh_s - time.monotonic()
        if wait <= 0:
            await self.sync()
        else:
            self.pending = asyncio.create_task(self.sync_later(wait))

    async def sync_later(self, delay: float) -> None:
        await asyncio.sleep(delay)
        await self.sync()

    async def watch(self) -> None:
        """Send stored events whose announcements the channel layer dropped."""
        while True:
            await asyncio.sleep(self.IDLE_CHECK_S)
            if self.synced_seq is None:
                continue
            try:
                if await self.stored_seq() > self.synced_seq:
                    await self.sync()
                elif await self.stored_status() != self.status_seen:
                    await self.send_status()
                elif await self.children_changed():
                    await self.send_children()
                elif not self.active:
                    return  # the session ended and the page has all of it
            except Exception:  # noqa: BLE001 - a failed check must not end the live page
                log.warning("Checking session %s for unsent events failed", self.session_pk,
                            exc_info=True)

    async def sync(self, after: int | None = None, *, full: bool = False) -> None:
        """Send the fragments after seq `after` (default: after what was sent last)."""
        async with self.lock:
            start = self.synced_seq if after is None else after
            if start is None:
                return
            update = await self.render(start, full)
            if update is None:
                await self.close(code=FORBIDDEN)  # the session was deleted meanwhile
                return
            self.synced_seq, self.active = update.last_seq, update.active
            self.last_sync = time.monotonic()
            if update.html:
                await self.send(text_data=update.html)

    async def send_status(self) -> None:
        """The status header and the panels that change with it (a status written after
        the last event)."""
        async with self.lock:
            html = await self.render_status_change()
            if html:
                await self.send(text_data=html)

    async def send_children(self) -> None:
        async with self.lock:
            html = await self.render_children()
            if html:
                await self.send(text_data=html)

    @database_sync_to_async
    def children_changed(self) -> bool:
        return children_state(self.session_pk) != self.children_seen

    @database_sync_to_async
    def render_status_change(self) -> str:
        session = Session.objects.select_related("profile").filter(pk=self.session_pk).first()
        if session is None:
            return ""
        self.status_seen, self.active = session.status, session.is_active
        return render_status_update(session, self.feed if self.feed.loaded else None)

    @database_sync_to_async
    def render_children(self) -> str:
        session = Session.objects.select_related("profile").filter(pk=self.session_pk).first()
        if session is None:
            return ""
        self.children_seen = children_state(self.session_pk)
        return render_children_update(session, self.feed if self.feed.loaded else None)

    @database_sync_to_async
    def allowed(self) -> bool:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            return False
        return Session.objects.filter(pk=self.session_pk, owner=user).exists()

    @database_sync_to_async
    def stored_seq(self) -> int:
        return latest_seq(self.session_pk)

    @database_sync_to_async
    def stored_status(self) -> str:
        return (Session.objects.filter(pk=self.session_pk).values_list("status", flat=True)
                .first() or "")

    @database_sync_to_async
    def render(self, after: int, full: bool) -> Update | None:
        session = Session.objects.select_related("profile").filter(pk=self.session_pk).first()
        if session is None:
            return None
        self.children_seen = children_state(self.session_pk)  # what this render shows
        update = render_update(session, after, full=full, open_panels=self.open_panels,
                               feed=self.feed)
        # Only a sync that sends something carries the status header. A sync with nothing
        # new (a scheduled one firing after the worker's last write) sends nothing, so the
        # page still shows the old status: the watchdog must still see it as unsent.
        if update.html:
            self.status_seen = session.status
        return update

    @database_sync_to_async
    def render_named(self, names: set[str]) -> str:
        session = Session.objects.select_related("profile").filter(pk=self.session_pk).first()
        if session is None:
            return ""
        return render_named_panels(session, names, self.feed if self.feed.loaded else None)
