"""Websocket consumer: streams a session's drawer to its owner as htmx fragments (SPEC W5).

Protocol. The page connects to ws/sessions/<pk>/ and, on every (re)connect, sends
{"after": N}, N being the last seq it holds (the ws extension's open event; see
static/js/taskos.js). Clients that cannot send may put ?after=N in the URL instead.
The consumer answers with every fragment the page lacks, rendered from the database,
and from then on treats each group message as a signal to send what was stored after
the last seq it sent. Rendering from the database, not from the message, means a lost
or reordered message never leaves a gap: the next one brings everything after it.
Until the page has said where it stands, group messages are ignored (they are stored,
so the first sync includes them), which keeps the transcript free of duplicates.
"""
from __future__ import annotations

import json
import logging
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from taskos.drawer.stream import Update, render_update
from taskos.live.publisher import group_name
from taskos.runs.models import Session

log = logging.getLogger("taskos.live")

FORBIDDEN = 4403  # close code: not signed in, or not this person's session


class SessionConsumer(AsyncWebsocketConsumer):
    session_pk: int
    group: str | None = None
    synced_seq: int | None = None  # last seq sent to this page; None until it said where it is

    async def connect(self) -> None:
        self.session_pk = int(self.scope["url_route"]["kwargs"]["pk"])
        # Accept, then close with a code: a refusal during the handshake reaches the browser
        # as 1006, which the htmx ws extension would retry forever.
        await self.accept()
        if not await self.allowed():
            await self.close(code=FORBIDDEN)
            return
        self.group = group_name(self.session_pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        after = parse_qs(self.scope.get("query_string", b"").decode()).get("after")
        if after and after[0].isdigit():
            await self.sync(int(after[0]), full=True)

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """{"after": N} from the page: send everything after seq N, all panels fresh."""
        if self.group is None:
            return
        try:
            after = int(json.loads(text_data or "")["after"])
        except (ValueError, TypeError, KeyError):
            log.info("Ignored a websocket message for session %s that is not {\"after\": N}",
                     self.session_pk)
            return
        await self.sync(max(0, after), full=True)

    async def session_event(self, message: dict) -> None:
        """A stored event was published: send what this page has not seen yet."""
        if self.synced_seq is None:
            return
        seq = int((message.get("event") or {}).get("seq") or 0)
        if seq and seq <= self.synced_seq:
            return  # already sent by an earlier sync
        await self.sync(self.synced_seq, full=False)

    async def sync(self, after: int, *, full: bool) -> None:
        update = await self.render(after, full)
        if update is None:
            await self.close(code=FORBIDDEN)  # the session was deleted meanwhile
            return
        self.synced_seq = update.last_seq
        if update.html:
            await self.send(text_data=update.html)

    @database_sync_to_async
    def allowed(self) -> bool:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            return False
        return Session.objects.filter(pk=self.session_pk, owner=user).exists()

    @database_sync_to_async
    def render(self, after: int, full: bool) -> Update | None:
        session = Session.objects.select_related("profile").filter(pk=self.session_pk).first()
        if session is None:
            return None
        return render_update(session, after, full=full)
