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
import json
from typing import Any, Iterable, TypeVar

from django.db import connections
from django.db.models import (Case, ExpressionWrapper, F, Func, JSONField, QuerySet,
                              TextField, When)

from agents import ErrorEvent, Event, EventType, event_from
from taskos.runs.models import BULK_KEYS

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
    return event_from(type, payload, seq=seq, turn=turn, at=_iso(at))


def _iso(at: Any) -> Any:
    return at.isoformat() if isinstance(at, dt.datetime) else at


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
    _check_fields(cls, keys)
    return {f"p_{key}": F(f"payload__{key}") for key in keys}


def _check_fields(cls: type[Event], keys: tuple[str, ...]) -> None:
    unknown = set(keys) - set(cls.payload_keys())
    if unknown:
        raise ValueError(f"{cls.__name__} has no field {', '.join(sorted(unknown))}")


class PayloadOf(Func):
    """A row's payload cut to `keys` in PostgreSQL, as one object (keys it lacks absent).

    A payload of a few KB is stored compressed (TOAST) and every `payload -> key` reads
    it out again, once per key: the drawer's 23 keys of a long-1000 run's 1024 calls took
    215 ms to select that way and take 43 ms this way, one read of each payload."""

    output_field = JSONField()

    def __init__(self, keys: tuple[str, ...]) -> None:
        super().__init__(F("payload"))
        self.keys = list(keys)

    def as_sql(self, compiler, connection, **extra_context):
        sql, params = compiler.compile(self.source_expressions[0])
        return (f"(SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each({sql}) AS e "
                f"WHERE e.key = ANY(%s))", (*params, self.keys))


class PayloadValues(Func):
    """A row's payload values at `keys` in SQLite, as one JSON array (null where absent).

    A lookup per key made Django decode each value on its own: the drawer's 23 keys of a
    long-1000 run's 1024 calls took 330-550 ms to read that way (most of a finished page's
    server time) and ~130 ms as one array a row. json_extract with several paths gives
    the values as JSON (false stays false; with one path it would give 0)."""

    output_field = TextField()

    def __init__(self, keys: tuple[str, ...]) -> None:
        super().__init__(F("payload"))
        self.paths = [f'$."{key}"' for key in keys] * (2 if len(keys) == 1 else 1)

    def as_sql(self, compiler, connection, **extra_context):
        sql, params = compiler.compile(self.source_expressions[0])
        return (f"json_extract({sql}, {', '.join(['%s'] * len(self.paths))})",
                (*params, *self.paths))


def select(rows: QuerySet, cls: type[E], keys: Iterable[str], *, dated: bool = True) -> list[E]:
    """The `cls` events among `rows` with only `keys` of their payloads read, in SQL.

    A key the row lacks reads as NULL: it takes its default, as in `stored_event`. Not
    `dated`, the row's `at` is not read either: the events' `at` is ""."""
    keys = tuple(keys)
    rows = rows.filter(type=cls.TYPE)
    envelope = ("seq", "turn", "at") if dated else ("seq", "turn")
    bulk = BULK_KEYS.get(cls.TYPE)
    if bulk is not None and bulk.isdisjoint(keys):
        payloads = _from_figures(rows, cls, keys, envelope)
    else:
        payloads = _from_payloads(rows, cls, keys, envelope)
    # The keys were checked to be fields of `cls` (none of the envelope): made directly,
    # not through event_from's sorting of a stored payload's keys.
    if dated:
        return [cls(seq=row[0], turn=row[1], at=_iso(row[2]), **payload)  # type: ignore[misc]
                for row, payload in payloads]
    return [cls(seq=row[0], turn=row[1], at="", **payload)  # type: ignore[misc]
            for row, payload in payloads]


def _from_figures(rows: QuerySet, cls: type[Event], keys: tuple[str, ...],
                  envelope: tuple[str, ...]) -> Iterable[tuple[tuple, dict[str, Any]]]:
    """(row, payload cut to `keys`) of rows whose `keys` are all among their figures
    (SessionEvent.figures): the figures column read, the payload only of a row without it
    (stored before the column came). A finished long-1000 page reads its calls' figures,
    ~0.4 MB, where it parsed their ~5 MB of payloads."""
    _check_fields(cls, keys)
    vendor = connections[rows.db].vendor
    # As text, decoded here: without JSONField's converter, a call on each of ~1 000 rows.
    figures = ExpressionWrapper(F("figures"), output_field=TextField())
    if vendor in ("postgresql", "sqlite"):
        older = PayloadOf(keys) if vendor == "postgresql" else PayloadValues(keys)
        found = rows.annotate(figures_text=figures, older=Case(
            When(figures__isnull=True, then=older), output_field=older.output_field)
        ).values_list(*envelope, "figures_text", "older")
    else:
        found = rows.annotate(figures_text=figures).values_list(*envelope, "figures_text",
                                                                "payload")
    loads, wanted = json.loads, frozenset(keys)
    for row in found:
        text, older = row[-2], row[-1]
        if text is not None:
            yield row, {key: value for key, value in loads(text).items()
                        if value is not None and key in wanted}
        elif vendor == "sqlite":
            yield row, {key: value for key, value in zip(keys, loads(older))
                        if value is not None}
        else:
            yield row, {key: value for key, value in (older or {}).items()
                        if value is not None and key in wanted}


def _from_payloads(rows: QuerySet, cls: type[Event], keys: tuple[str, ...],
                   envelope: tuple[str, ...]) -> Iterable[tuple[tuple, dict[str, Any]]]:
    """(row, payload cut to `keys`) read from each row's payload."""
    # Rows as tuples and each payload built in one pass: a finished long-1000 page reads
    # ~2 400 events this way, and a dict a row (then one without the NULLs) was a tenth
    # of their reading.
    vendor = connections[rows.db].vendor
    if vendor == "postgresql":
        _check_fields(cls, keys)
        found = rows.annotate(payload_of=PayloadOf(keys)).values_list(*envelope, "payload_of")
        return ((row, {key: value for key, value in (row[-1] or {}).items()
                       if value is not None}) for row in found)
    if vendor == "sqlite":
        _check_fields(cls, keys)
        loads = json.loads
        found = rows.annotate(values_of=PayloadValues(keys)).values_list(*envelope, "values_of")
        return ((row, {key: value for key, value in zip(keys, loads(row[-1]))
                       if value is not None}) for row in found)
    lookups = payload_lookups(cls, keys)  # a lookup per key
    found = rows.annotate(**lookups).values_list(*envelope, *lookups)
    return ((row, {key: value for key, value in zip(keys, row[len(envelope):])
                   if value is not None}) for row in found)


def discards_before(events: Iterable[Event]) -> bool:
    """True when `events` report that events stored before them were discarded since."""
    return any(isinstance(event, ErrorEvent) and event.code == DISCARD_NOTICE
               for event in events)
