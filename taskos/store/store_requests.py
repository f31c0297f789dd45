"""What people ask of a running session (cancel, messages, Compact now, notes, edits),
read by the Django Store once a turn (SPEC W4, C13)."""
from __future__ import annotations

import json
from typing import Any

from django.db import transaction

from taskos.runs.models import PendingMessage, Session

from . import turn_sql
from .store_base import session_pk


class PeopleRequests:
    """The poll a turn starts with, and the requests it finds; mixed into DjangoStore,
    which owns `_poll` (cleared at every commit point)."""

    _poll: tuple[int, dict[str, Any]] | None

    def load_notes(self, session_id) -> dict[str, Any]:
        notes = self._polled(session_id, "notes", lambda: Session.objects.filter(
            pk=session_pk(session_id)).values_list("notes", flat=True).first())
        return json.loads(json.dumps(notes or {}))  # a copy: the poll's stays as read

    def save_notes(self, session_id, notes) -> None:
        self._poll = None
        Session.objects.filter(pk=session_pk(session_id)).update(notes=notes)

    # Both take_* run every turn and nearly always find nothing: a plain read first, and the
    # locking transaction (a commit, so a disk flush on PostgreSQL) only when there is work.
    def take_user_messages(self, session_id, turn=0) -> list[str]:
        def untaken():
            return PendingMessage.objects.filter(session_id=session_pk(session_id), taken=False)
        if not self._polled(session_id, "pending", lambda: untaken().exists()):
            return []
        waiting = untaken()
        with transaction.atomic():
            pending = list(waiting.select_for_update().order_by("id").values_list("id", "text"))
            PendingMessage.objects.filter(pk__in=[pk for pk, _ in pending]).update(
                taken=True, taken_turn=turn)
        return [text for _, text in pending]

    def take_compaction_request(self, session_id) -> str | None:
        if not self._polled(session_id, "compact", lambda: Session.objects.filter(
                pk=session_pk(session_id), compact_request__isnull=False).exists()):
            return None
        sessions = Session.objects.filter(pk=session_pk(session_id))
        with transaction.atomic():
            request = sessions.select_for_update().values_list("compact_request",
                                                               flat=True).first()
            if request is not None:
                sessions.update(compact_request=None)
        return request

    def cancel_requested(self, session_id) -> bool:
        """Read fresh, every time; with it, in the same statement, whether people left a
        message or a compaction request and the notes: the loop asks for those right after,
        before the turn's first model call, and finds the answers here (one read a turn
        instead of four)."""
        pk = session_pk(session_id)
        row = turn_sql.poll(pk)
        self._poll = (pk, row) if row is not None else None
        return bool(row and row["cancel_requested"])

    def person_edits(self, session_id, fresh: bool = False) -> int | None:
        """How many times people edited this session's anchors and tasks (taskos/runs/
        edits.py): from the turn's poll, or `fresh` (one column of one row) mid-turn."""
        if fresh:
            return turn_sql.person_edits(session_pk(session_id))
        return self._polled(session_id, "person_edits", lambda: self.person_edits(
            session_id, fresh=True))

    def _polled(self, session_id, name: str, read):
        """`name` from this turn's poll when it is still current, else read(). The poll
        lasts until the next commit point (a model call starts there) or notes write."""
        poll = self._poll
        if poll is not None and poll[0] == session_pk(session_id):
            return poll[1][name]
        return read()
