"""Pins (issue 13): a person makes any sentence of the transcript a hard constraint.

A pin is an active tier-1 Anchor row with source "pin". The engine reloads anchors at the
start of every turn (agents.words.book.AnchorBook.sync), the same path an admin edit
takes, so a pin is in the frozen snapshot of the very next model call; unpinning
deactivates the row, which stays in the database, and the next call no longer has it.
"""
from __future__ import annotations

import hashlib

from agents import storable_text

from .models import Anchor, ArchivedTurn, Session
from .services import SessionError, _require_active

PIN_MAX_CHARS = 500  # a sentence or two; longer selections are refused, not clipped


def _flat(text: str) -> str:
    return " ".join(text.split())


def in_transcript(session: Session, text: str) -> bool:
    """True when `text` occurs in a raw message or tool output of the session (whitespace
    may differ: a selection in the page turns line breaks into spaces)."""
    rows = ArchivedTurn.objects.filter(session=session)
    if rows.filter(content__contains=text).exists():
        return True
    flat = _flat(text)
    return any(flat in _flat(content)
               for content in rows.values_list("content", flat=True).iterator())


def pin_sentence(session: Session, text: str) -> tuple[Anchor, bool]:
    """Pin `text` as a hard constraint; returns (anchor, created)."""
    _require_active(session, "pin a sentence")
    # The transcript holds NUL and lone surrogates as the storable rule's marks
    # (agents/storable.py): a selection that still has them is the same sentence.
    text = storable_text(_flat(text or ""))
    if not text:
        raise SessionError("Nothing to pin: select a sentence of the transcript first.")
    if len(text) > PIN_MAX_CHARS:
        raise SessionError(f"A pin holds at most {PIN_MAX_CHARS} characters; this selection "
                           f"has {len(text)}. Select one sentence.")
    if not in_transcript(session, text):
        raise SessionError("That text is not in this session's transcript, so it cannot be "
                           "pinned. Select a sentence of the transcript.")
    existing = session.anchors.filter(active=True, tier=Anchor.Tier.HARD_CONSTRAINT,
                                      text=text).first()
    if existing is not None:
        return existing, False
    digest = hashlib.sha1(text.encode()).hexdigest()[:12]
    anchor = Anchor.objects.create(session=session, tier=Anchor.Tier.HARD_CONSTRAINT, text=text,
                                   key=f"pin:{digest}", source=Anchor.Source.PIN,
                                   turn=session.turns)
    return anchor, True


def unpin(session: Session, anchor_id: int) -> Anchor:
    """Deactivate a pin of this session (kept in the database, inactive)."""
    _require_active(session, "unpin a sentence")
    anchor = session.anchors.filter(pk=anchor_id, source=Anchor.Source.PIN).first()
    if anchor is None:
        raise SessionError("No such pin in this session.")
    if anchor.active:
        anchor.active = False
        anchor.save(update_fields=["active", "updated_at"])
    return anchor
