"""Undoing what a turn wrote before its worker died, so the turn can be run again
(SPEC T1, agents/loop/agent_loop.py): the Django Store's part of exactly-once."""
from __future__ import annotations

import logging

from django.db import transaction

from taskos.runs.edits import engine_writes
from taskos.runs.models import Anchor, ArchivedTurn, PendingMessage, Session, SessionEvent

from .store_base import session_pk

log = logging.getLogger("taskos.runs")


class RedoneTurns:
    """Mixed into DjangoStore; `_check_lease` is the store's."""

    def discard_uncommitted(self, session_id, from_turn) -> dict[str, int]:
        """Undo what turns >= from_turn wrote before their worker died: the turn is run again.

        Their archive rows go (the re-run writes them anew, so a ref never points at a
        half-done attempt) and the people's messages they took wait again for the re-run.
        Their anchor changes are undone before the engine starts (undo_uncommitted_anchors).
        """
        self._check_lease()
        pk = session_pk(session_id)
        with transaction.atomic():
            removed, _ = ArchivedTurn.objects.filter(session_id=pk, turn__gte=from_turn).delete()
            returned = PendingMessage.objects.filter(
                session_id=pk, taken=True, taken_turn__gte=from_turn).update(
                    taken=False, taken_turn=None)
            # Sub-agents the undone turn asked for and that never started: asked again.
            Session.objects.filter(parent_id=pk, parent_turn__gte=from_turn,
                                   status=Session.Status.QUEUED, enqueued_at__isnull=True
                                   ).delete()
        return {"archive_rows": removed, "messages": returned}

    def undo_uncommitted_anchors(self, session_id) -> None:
        """Anchors the engine added in an uncommitted turn go, those it retired come back.

        Called before the engine is built (it reads the anchors once when built, and would
        report the undo as admin edits). Found by time: the engine saves an anchor before it
        emits the event that reports it, so every anchor it touched up to the commit is
        older than the last committed event (the state's `events_seq`); a newer one was
        touched by the dying turn. Without
        this the re-run found them already there and reported nothing (the chaos run's
        ANCHOR_CHANGED events went missing). Edits made in the admin are left alone.
        """
        pk = session_pk(session_id)
        state = Session.objects.filter(pk=pk).values_list("engine_state", flat=True).first()
        from_turn, seq = (state or {}).get("turn", 0), (state or {}).get("events_seq")
        events = SessionEvent.all_objects.filter(session_id=pk)
        committed_at = events.filter(seq=seq).values_list("at", flat=True).first() \
            if seq else None
        # Before any commit, only what came after the run's first event is the engine's:
        # anchors that were there before it (a sub-agent's inherited ones) stay.
        since = committed_at or events.order_by("seq").values_list("at", flat=True).first()
        if since is None:
            return  # the engine never ran: nothing of it to undo
        engine_made = Anchor.objects.filter(session_id=pk).exclude(source=Anchor.Source.ADMIN)
        added = engine_made.filter(turn__gte=from_turn)
        added = added.filter(updated_at__gt=committed_at) if committed_at is not None \
            else added.filter(updated_at__gte=since)
        with transaction.atomic(), engine_writes():
            dropped, _ = added.delete()
            revived = 0
            if committed_at is not None:
                revived = engine_made.filter(active=False, turn__lt=from_turn,
                                             updated_at__gt=committed_at).update(active=True)
        if dropped or revived:
            log.info("Session %s: undid the anchor changes of uncommitted turn %s (%d added, "
                     "%d retired)", pk, from_turn, dropped, revived)
