"""The statements a turn runs every time, written out once instead of built by the ORM.

On long-200 the ORM spent more time compiling a turn's small UPDATEs and INSERTs (the
call counters' F()/Greatest expressions, an anchor, an archived row, the state head,
the per-turn poll) than the database spent running them: about 3 ms of a 10 ms turn on
SQLite. These are the same statements as plain SQL, with their text built once per
database vendor. Only the engine's per-turn path uses them; the rest of the app stays on
the ORM. Values go through the model fields' own conversions (JSON, datetimes), so a row
written here reads back exactly as one the ORM wrote.
"""
from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Callable

from django.db import connection
from django.utils import timezone

from agents import storable_value
from taskos.runs.models import (Anchor, ArchivedTurn, PendingMessage, Session,
                                WorkspaceFile)

ANCHOR_FIELDS = ("tier", "text", "key", "source", "active", "turn")
ARCHIVE_FIELDS = ("session_id", "turn", "role", "content", "tool_name", "tool_args",
                  "token_count", "is_binary", "search_text", "search_pending", "created_at")


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


def _table(model) -> str:
    return _q(model._meta.db_table)


def _greatest() -> str:
    return "MAX" if connection.vendor == "sqlite" else "GREATEST"


def _now() -> Any:
    return connection.ops.adapt_datetimefield_value(timezone.now())


def _json(model, field: str, value: Any) -> Any:
    return model._meta.get_field(field).get_db_prep_save(value, connection)


def _run(sql: str, params: list[Any], fetch: bool = False,
         settle: Callable[[], int] | None = None) -> Any:
    """The first row when `fetch`, else the number of rows changed. A statement kept for a
    batch's next flush (taskos/store/batch_writes.py) has no count yet: `settle` sends it and
    returns it."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        if fetch:
            return cursor.fetchone()
        rows = cursor.rowcount
    if settle is not None:
        flushed = settle()
        rows = flushed if flushed >= 0 else rows  # -1: nothing was kept, it ran at once
    return rows


@lru_cache(maxsize=None)
def _counters_sql(vendor: str) -> str:
    s, g = _table(Session), _greatest()
    total, peak, turns, cost, comp = (_q(n) for n in (
        "total_input_tokens", "peak_input_tokens", "turns", "cost", "compactions"))
    return (f"UPDATE {s} SET {total} = {total} + %s, {peak} = {g}({peak}, %s), "
            f"{turns} = {g}({turns}, %s), {cost} = {cost} + %s, {comp} = {comp} + %s "
            f"WHERE {_q('id')} = %s")


def add_to_counters(session_pk: int, tokens: int, peak: int, turn: int, cost: float,
                    compactions: int) -> None:
    """The dashboard counters of a batch of calls and compactions, in one UPDATE."""
    _run(_counters_sql(connection.vendor),
         [tokens, peak, turn, cost, compactions, session_pk])


@lru_cache(maxsize=None)
def _insert_sql(vendor: str, table: str, columns: tuple[str, ...], returning: bool) -> str:
    cols = ", ".join(_q(c) for c in columns)
    values = ", ".join(["%s"] * len(columns))
    back = f" RETURNING {_q('id')}" if returning else ""
    return f"INSERT INTO {_q(table)} ({cols}) VALUES ({values}){back}"


def _insert(model, columns: tuple[str, ...], params: list[Any], row_id: int | None) -> int:
    """The new row's id: `row_id` when given (reserved ahead, taskos/store/row_ids.py: the
    statement then waits for nothing), else what the database gave it."""
    if row_id is not None:
        _run(_insert_sql(connection.vendor, model._meta.db_table, ("id", *columns), False),
             [row_id, *params])
        return row_id
    returning = connection.features.can_return_columns_from_insert
    sql = _insert_sql(connection.vendor, model._meta.db_table, columns, returning)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0] if returning else cursor.lastrowid


def insert_anchor(session_pk: int, fields: dict[str, Any], anchor_id: int | None = None) -> int:
    now = _now()
    return _insert(Anchor, ("session_id", *ANCHOR_FIELDS, "created_at", "updated_at"),
                   [session_pk, *(fields[f] for f in ANCHOR_FIELDS), now, now], anchor_id)


@lru_cache(maxsize=None)
def _anchor_upsert_sql(vendor: str) -> str:
    columns = ("id", "session_id", *ANCHOR_FIELDS, "created_at", "updated_at")
    sets = ", ".join(f"{_q(f)} = excluded.{_q(f)}" for f in (*ANCHOR_FIELDS, "updated_at"))
    return (f"INSERT INTO {_table(Anchor)} ({', '.join(_q(c) for c in columns)}) "
            f"VALUES ({', '.join(['%s'] * len(columns))}) ON CONFLICT ({_q('id')}) "
            f"DO UPDATE SET {sets} WHERE {_table(Anchor)}.{_q('session_id')} = "
            f"excluded.{_q('session_id')}")


def upsert_anchor(session_pk: int, anchor_id: int, fields: dict[str, Any]) -> None:
    """The anchor as the engine has it now; written again under its id if a person deleted
    it meanwhile. No row count to wait for, so it can be kept for the batch's one query."""
    now = _now()
    _run(_anchor_upsert_sql(connection.vendor),
         [anchor_id, session_pk, *(fields[f] for f in ANCHOR_FIELDS), now, now])


def insert_archived(session_pk: int, row: dict[str, Any], row_id: int | None = None) -> int:
    """One archive row; `row` holds every ARCHIVE_FIELDS value but the session and time.
    The full-text index follows `search_text` by itself (SQLite: triggers; PostgreSQL: a
    generated column), as it does for the ORM's inserts."""
    values = {**row, "session_id": session_pk, "created_at": _now(),
              "tool_args": _json(ArchivedTurn, "tool_args", row["tool_args"])}
    return _insert(ArchivedTurn, ARCHIVE_FIELDS, [values[f] for f in ARCHIVE_FIELDS], row_id)


@lru_cache(maxsize=None)
def _head_sql(vendor: str, fenced: bool) -> str:
    sql = (f"UPDATE {_table(Session)} SET {_q('engine_state')} = %s"
           + (f", {_q('lease_expires')} = %s" if fenced else "")
           + f" WHERE {_q('id')} = %s")
    return sql + (f" AND {_q('lease_owner')} = %s" if fenced else "")


def save_head(session_pk: int, head: dict[str, Any], lease: Any = None,
              settle: Callable[[], int] | None = None) -> bool:
    """The state head on the session row; with a lease, only while it is ours (and
    renewed by the same write). False when no row was written."""
    state = _json(Session, "engine_state", storable_value(head))  # jsonb refuses "\\u0000"
    if lease is None:
        return _run(_head_sql(connection.vendor, False), [state, session_pk],
                    settle=settle) > 0
    expires = connection.ops.adapt_datetimefield_value(lease.expiry())
    return _run(_head_sql(connection.vendor, True),
                [state, expires, session_pk, lease.owner], settle=settle) > 0


@lru_cache(maxsize=None)
def _fence_sql(vendor: str) -> str:
    return (f"UPDATE {_table(Session)} SET {_q('lease_expires')} = %s "
            f"WHERE {_q('id')} = %s AND {_q('lease_owner')} = %s")


def hold_lease(lease: Any, settle: Callable[[], int] | None = None) -> None:
    """The fence of an executor's transaction (issue 25 item 3): renew `lease` in the
    caller's transaction only while the session row still names it; when another executor
    holds the session now, LeaseLost (`lease.fence`), and the caller's transaction rolls
    back with everything it wrote. On PostgreSQL the row lock taken here makes a takeover
    wait for this commit (and then find the lease renewed); on SQLite the transaction
    holds the write lock already."""
    lease.check()
    expires = connection.ops.adapt_datetimefield_value(lease.expiry())
    written = _run(_fence_sql(connection.vendor), [expires, lease.session_pk, lease.owner],
                   settle=settle)
    lease.fence(written > 0)


@lru_cache(maxsize=None)
def _poll_sql(vendor: str) -> str:
    s, p = _table(Session), _table(PendingMessage)
    waiting = (f"EXISTS (SELECT 1 FROM {p} WHERE {p}.{_q('session_id')} = {s}.{_q('id')} "
               f"AND NOT {p}.{_q('taken')})")
    w = _table(WorkspaceFile)
    files = (f"EXISTS (SELECT 1 FROM {w} WHERE {w}.{_q('session_id')} = {s}.{_q('id')} "
             f"AND {w}.{_q('announced_turn')} IS NULL)")
    return (f"SELECT {_q('cancel_requested')}, {waiting}, {_q('notes')}, "
            f"{_q('person_edits')}, {_q('compact_request')} IS NOT NULL, {files} "
            f"FROM {s} WHERE {_q('id')} = %s")


def poll(session_pk: int) -> dict[str, Any] | None:
    """Whether people asked to cancel, left a message, asked for a compaction or added
    files, with the notes and the edit count: everything a turn asks of them, in one read."""
    row = _run(_poll_sql(connection.vendor), [session_pk], fetch=True)
    if row is None:
        return None
    cancel, pending, notes, edits, compact, files = row
    if isinstance(notes, (str, bytes)):  # JSON comes back as text from a plain cursor
        notes = json.loads(notes)
    return {"cancel_requested": bool(cancel), "pending": bool(pending), "notes": notes,
            "person_edits": edits, "compact": bool(compact), "files": bool(files)}


@lru_cache(maxsize=None)
def _edits_sql(vendor: str) -> str:
    return f"SELECT {_q('person_edits')} FROM {_table(Session)} WHERE {_q('id')} = %s"


def person_edits(session_pk: int) -> int | None:
    row = _run(_edits_sql(connection.vendor), [session_pk], fetch=True)
    return row[0] if row else None
