"""Stored SessionEvent rows read back as the engine's typed events (agents.event_from).

A row keeps an event's type and payload JSON; `stored_event` gives the typed event back,
each key an older row lacks at its default and keys the engine no longer emits left out,
so readers read fields (`call.input_tokens`), never payload keys. Where a few keys of many
rows are wanted (the drawer charting a 1000-call run), `select` reads only those keys in
SQL: its events are partial, every other field at its default, and are read for the keys
asked for only.

Every reader takes its rows from `SessionEvent.objects`, which never returns an event of a
turn that a resume discarded (taskos/runs/models.py); `all_objects` is for the event log's
own numbering, a call's message parts (addressed by seq) and the chaos run's audit, which
tests/django/test_discarded_turns.py holds to that list.
"""
from __future__ import annotations

import datetime as dt
from typing import Any, Iterable, TypeVar

from django.db.models import F, QuerySet

from agents import ErrorEvent, Event, EventType, event_from

E = TypeVar("E", bound=Event)

KNOWN_TYPES = frozenset(t.value for t in EventType)
# The notice a resume emits right after it marked the interrupted turn's events discarded
# (agents/loop/agent_loop.py): `SessionEvent.objects` no longer reads them, but whoever
# holds them already (a live page, its feed) must drop them too (issue 25 item 2).
DISCARD_NOTICE = "turn_interrupted"


def stored_event(type: str, payload: dict[str, Any] | None, *, seq: int = 0, turn: int = 0,
                 at: Any = None) -> Event | None:
    """The typed event of a stored row, its `at` (a datetime from the database) as the
    engine writes it; None for a type the engine does not emit (no page shows one)."""
    if type not in KNOWN_TYPES:
        return None
    if at is None:
        return event_from(type, payload, seq=seq, turn=turn)
    return event_from(type, payload, seq=seq, turn=turn,
                      at=at.isoformat() if isinstance(at, dt.datetime) else at)


def stored_events(rows: Iterable[tuple[int, str, int, Any, dict[str, Any]]]) -> list[Event]:
    """Typed events of rows given as (seq, type, turn, at, payload), in their order."""
    events = []
    for seq, kind, turn, at, payload in rows:
        event = stored_event(kind, payload, seq=seq, turn=turn, at=at)
        if event is not None:
            events.append(event)
    return events


def payload_lookups(cls: type[Event], keys: Iterable[str]) -> dict[str, F]:
    """ORM expressions reading payload `keys` of `cls` rows, by key (alias "p_<key>"); a
    key that is not a field of `cls` is an error, not a column of NULLs."""
    keys = tuple(keys)
    unknown = set(keys) - set(cls.payload_keys())
    if unknown:
        raise ValueError(f"{cls.__name__} has no field {', '.join(sorted(unknown))}")
    return {f"p_{key}": F(f"payload__{key}") for key in keys}


def select(rows: QuerySet, cls: type[E], keys: Iterable[str]) -> list[E]:
    """The `cls` events among `rows` with only `keys` of their payloads read, in SQL.

    A key the row lacks reads as NULL: it takes its default, as in `stored_event`."""
    keys = tuple(keys)
    found = rows.filter(type=cls.TYPE).values("seq", "turn", "at", **payload_lookups(cls, keys))
    events = []
    for row in found:
        payload = {key: value for key in keys if (value := row[f"p_{key}"]) is not None}
        events.append(stored_event(cls.TYPE, payload, seq=row["seq"], turn=row["turn"],
                                   at=row["at"]))
    return events  # type: ignore[return-value]  # of cls.TYPE: a cls


def discards_before(events: Iterable[Event]) -> bool:
    """True when `events` report that events stored before them were discarded since."""
    return any(isinstance(event, ErrorEvent) and event.code == DISCARD_NOTICE
               for event in events)
