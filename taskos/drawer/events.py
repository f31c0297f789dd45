"""Read stored SessionEvents for rendering, without dragging whole prompts along.

A MODEL_CALL payload carries every message the model saw. Panels that chart or sum
calls need a dozen scalar keys of each, so those keys are selected in the database
and the message list is read only for the one call the inspector shows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from django.db.models import F

from taskos.runs.models import Session, SessionEvent
from taskos.store.call_messages import full_payload

MODEL_CALL = "MODEL_CALL"
# Every key of a MODEL_CALL payload except "messages" and "message_parts" (see
# agents/events.py and taskos/store/call_messages.py).
CALL_KEYS = ("call", "kind", "input_tokens", "zones", "output_tokens", "cached_tokens",
             "finish_reason", "latency_ms", "cost", "over_window", "limit", "model")


@dataclass(frozen=True)
class Ev:
    """One stored event as panels and the transcript see it."""

    seq: int
    type: str
    turn: int
    at: Any
    payload: dict[str, Any]


def load_events(session: Session, types: Iterable[str] | None = None,
                after: int = 0) -> list[Ev]:
    """Events of `session` with seq > `after`, optionally only of `types`, by seq.

    Calls and the other events are two queries; both stop at the seq stored when the read
    began. Without that bound, a call stored between the two was missing while a later
    event was not, and a page that records "I have everything up to seq N" (a live feed)
    never got that call (seen in a browser test: the curve one call short). Events are
    committed in seq order by the session's one worker, so the bounded read is a prefix.
    """
    top = latest_seq(session)
    rows = SessionEvent.objects.filter(session=session, seq__gt=after, seq__lte=top)
    wanted = None if types is None else set(types)
    if wanted is not None:
        rows = rows.filter(type__in=wanted)
    events: list[Ev] = []
    if wanted is None or MODEL_CALL in wanted:
        calls = rows.filter(type=MODEL_CALL).values(
            "seq", "turn", "at", **{key: F(f"payload__{key}") for key in CALL_KEYS})
        for row in calls:
            payload = {key: row[key] for key in CALL_KEYS}
            events.append(Ev(row["seq"], MODEL_CALL, row["turn"], row["at"], payload))
    others = rows.exclude(type=MODEL_CALL).values("seq", "type", "turn", "at", "payload")
    events.extend(Ev(r["seq"], r["type"], r["turn"], r["at"], r["payload"] or {})
                  for r in others)
    events.sort(key=lambda ev: ev.seq)
    return events


def call_payload(session: Session, number: int) -> dict[str, Any] | None:
    """The full payload (messages included) of MODEL_CALL number `number`, or None."""
    row = (SessionEvent.objects.filter(session=session, type=MODEL_CALL, payload__call=number)
           .values("payload", "seq", "turn").first())
    if row is None:
        return None
    # Stored as what is new since the previous call: rebuilt to the exact list sent.
    payload = full_payload(session.pk, row["seq"], row["payload"])
    return {**payload, "seq": row["seq"], "turn": row["turn"]}


def latest_seq(session: Session | int) -> int:
    """The highest stored seq of the session (a row or its pk); 0 when nothing is stored."""
    pk = session.pk if isinstance(session, Session) else session
    row = SessionEvent.objects.filter(session_id=pk).order_by("-seq").values("seq").first()
    return row["seq"] if row else 0


def load_newest(session: Session, types: Iterable[str], limit: int,
                before: int | None = None) -> tuple[list[Ev], bool]:
    """The newest `limit` events of `types` (before seq `before`), by seq, and whether
    older ones remain: how the transcript shows a long session a page at a time."""
    rows = SessionEvent.objects.filter(session=session, type__in=set(types))
    if before is not None:
        rows = rows.filter(seq__lt=before)
    found = list(rows.order_by("-seq").values("seq", "type", "turn", "at", "payload")[:limit + 1])
    events = [Ev(r["seq"], r["type"], r["turn"], r["at"], r["payload"] or {})
              for r in reversed(found[:limit])]
    return events, len(found) > limit
