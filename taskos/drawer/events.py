"""Read stored SessionEvents for rendering, as the engine's typed events, without dragging
whole prompts along.

A MODEL_CALL payload carries every message the model saw. Panels that chart or sum
calls need its figures, so those keys are selected in the database and the message list
is read only for the one call the inspector shows.
"""
from __future__ import annotations

from typing import Any, Iterable

from django.db.models import Q

from agents import Event, EventType, ModelCall, event_from
from taskos.runs.models import Session, SessionEvent
from taskos.store.call_messages import full_payload
from taskos.store.stored_events import select, stored_event, stored_events

# What a call sent and got back: read for the one call the inspector shows (`load_call`).
CALL_BODY = ("messages", "request", "reply")
# Every other field of a MODEL_CALL: what the panels chart and sum, selected in SQL. The
# stored row's "message_parts" and "message_meta" (taskos/store/call_messages.py) are no
# fields: never read here either.
CALL_KEYS = tuple(key for key in ModelCall.payload_keys() if key not in CALL_BODY)
ROW = ("seq", "type", "turn", "at", "payload")
# What panels read of a row: no panel shows when an event happened, and converting the
# timestamps of a finished long-1000 page's ~2 600 events (to a datetime, then back to the
# event's text) was ~15 % of its server time. Their events have `at` "".
PANEL_ROW = ("seq", "type", "turn", "payload")


def _undated(rows) -> Iterable[tuple]:
    """(seq, type, turn, payload) rows as `stored_events` reads them, `at` left empty."""
    return ((seq, kind, turn, "", payload) for seq, kind, turn, payload in rows)


def load_events(session: Session, types: Iterable[str] | None = None,
                after: int = 0,
                newest: dict[str, tuple[int, Q | None, tuple[str, ...] | None]] | None = None
                ) -> list[Event]:
    """Events of `session` with seq > `after`, optionally only of `types`, by seq. Calls
    come without their CALL_BODY (`messages` empty, `request` empty, `reply` None).

    `newest` reads other types in part, each {type: (n, older, keys)}: its newest n events
    and, of those before them, the ones whose rows match `older` (a Q; None for none), with
    only the payload `keys` read (`select`; None for whole rows).

    Calls and the other events are two queries; both stop at the seq stored when the read
    began. Without that bound, a call stored between the two was missing while a later
    event was not, and a page that records "I have everything up to seq N" (a live feed)
    never got that call (seen in a browser test: the curve one call short). Events are
    committed in seq order by the session's one worker, so the bounded read is a prefix.
    """
    top = latest_seq(session)
    # Unordered: the events are sorted below. Ordered by seq, or bounded above twice,
    # SQLite read the rows of a few types through the (session, seq) index, every event
    # of the session (~10 000 on long-1000), instead of through (session, type, seq).
    since = SessionEvent.objects.filter(session=session, seq__gt=after).order_by()
    rows = since.filter(seq__lte=top)
    wanted = None if types is None else set(types)
    events: list[Event] = []
    if wanted is None or EventType.MODEL_CALL in wanted:
        events.extend(select(rows, ModelCall, CALL_KEYS, dated=False))
    others = (rows.exclude(type=EventType.MODEL_CALL) if wanted is None
              else rows.filter(type__in=wanted - {EventType.MODEL_CALL}))
    if wanted is None or wanted - {EventType.MODEL_CALL}:
        events.extend(stored_events(_undated(others.values_list(*PANEL_ROW))))
    for kind, (count, older, keys) in (newest or {}).items():
        if wanted is not None and kind in wanted:
            continue  # read whole above
        of_kind = rows.filter(type=kind)
        found = list(of_kind.order_by("-seq").values_list(*PANEL_ROW)[:count])
        events.extend(stored_events(_undated(found)))
        if older is not None and len(found) == count:
            before = (since.filter(older, type=kind, seq__lt=found[-1][0]) if found
                      else of_kind.filter(older))
            events.extend(stored_events(_undated(before.values_list(*PANEL_ROW))) if keys is None
                          else select(before, type(event_from(kind)), keys, dated=False))
    events.sort(key=lambda ev: ev.seq)
    return events


def _stored_call(session: Session, number: int) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The row (seq, turn, at) of MODEL_CALL number `number` and its whole payload."""
    row = (SessionEvent.objects.filter(session=session, type=EventType.MODEL_CALL,
                                       payload__call=number)
           .values("payload", "seq", "turn", "at").first())
    if row is None:
        return None
    # Stored as what is new since the previous call: rebuilt to the exact list sent.
    return row, full_payload(session.pk, row["seq"], row["payload"])


def call_payload(session: Session, number: int) -> dict[str, Any] | None:
    """The full payload (messages included) of MODEL_CALL number `number` with its seq
    and turn, as stored: the call's record for export. None when there is no such call."""
    found = _stored_call(session, number)
    if found is None:
        return None
    row, payload = found
    return {**payload, "seq": row["seq"], "turn": row["turn"]}


def load_call(session: Session, number: int) -> ModelCall | None:
    """MODEL_CALL number `number`, whole (messages included), or None."""
    found = _stored_call(session, number)
    if found is None:
        return None
    row, payload = found
    return stored_event(EventType.MODEL_CALL, payload, seq=row["seq"], turn=row["turn"],
                        at=row["at"])  # type: ignore[return-value]  # a MODEL_CALL row


def latest_seq(session: Session | int) -> int:
    """The highest stored seq of the session (a row or its pk); 0 when nothing is stored."""
    pk = session.pk if isinstance(session, Session) else session
    row = SessionEvent.objects.filter(session_id=pk).order_by("-seq").values("seq").first()
    return row["seq"] if row else 0


def load_newest(session: Session, types: Iterable[str], limit: int,
                before: int | None = None) -> tuple[list[Event], bool]:
    """The newest `limit` events of `types` (before seq `before`), by seq, and whether
    older ones remain: how the transcript shows a long session a page at a time."""
    rows = SessionEvent.objects.filter(session=session, type__in=set(types))
    if before is not None:
        rows = rows.filter(seq__lt=before)
    found = list(rows.order_by("-seq").values_list(*ROW)[:limit + 1])
    return stored_events(reversed(found[:limit])), len(found) > limit
