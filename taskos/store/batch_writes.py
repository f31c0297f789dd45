"""PostgreSQL: a batch's writes sent together, as one query, instead of one at a time (issue 8).

A batch writes a dozen rows whose results the turn never reads: events, an archive row, an
anchor or two (their ids reserved beforehand, taskos/store/row_ids.py), the call counters,
state pieces. Sent one at a time, each waited a round trip (0.2–0.5 ms on a loaded 2-core
machine), and that was most of what a turn cost on PostgreSQL. Written inside `writing()`
they are kept in order instead, and `flush()` sends them as one multi-statement query
(Django's psycopg cursor binds parameters client-side, which allows it): one round trip.

Anything else that runs on the connection meanwhile — a read, an ORM call, the commit —
is preceded by a flush (a guard on every statement; the store flushes before committing),
so it sees exactly what it would have seen had each write gone out at once. An error of a
kept write is raised by that flush. psycopg's pipeline mode was tried first: on this
machine it cost more per statement than it saved.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from django.db import connection

SEPARATOR = ";\n"  # between the statements of a batch's one query


class BatchWrites:
    """One per connection (for_connection); `start()` when a batch opens, `stop()` once
    it is committed or rolled back. On any database but PostgreSQL writes run at once."""

    def __init__(self) -> None:
        self._kept: list[tuple[str, list[Any]]] = []
        self._keeping = False
        self._flushing = False
        self._guarded = False

    @property
    def supported(self) -> bool:
        return connection.vendor == "postgresql"

    @property
    def active(self) -> bool:
        """A batch is open on PostgreSQL: writes made in `writing()` are kept."""
        return self._guarded

    def start(self) -> None:
        if self.supported and not self._guarded:
            connection.execute_wrappers.append(self._guard)
            self._guarded = True

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Statements run inside are kept for the next flush (at once outside a batch)."""
        self._keeping = self._guarded
        try:
            yield
        finally:
            self._keeping = False

    def flush(self) -> int:
        """Send what was kept, as one query; the row count of its last statement (-1
        when nothing was kept)."""
        kept, self._kept = self._kept, []
        if not kept:
            return -1
        sql = SEPARATOR.join(statement for statement, _ in kept)
        params = [value for _, values in kept for value in values]
        keeping, self._keeping = self._keeping, False  # this query goes out
        self._flushing = True
        try:
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                while cursor.nextset():
                    pass  # to the last statement's result
                return cursor.rowcount
        finally:
            self._keeping, self._flushing = keeping, False

    def stop(self) -> None:
        """The batch is committed or rolled back: nothing is kept (a rollback drops what
        was), and statements run at once again."""
        self._kept, self._keeping = [], False
        if self._guarded:
            self._guarded = False
            try:
                connection.execute_wrappers.remove(self._guard)
            except ValueError:  # a test replaced the wrapper list meanwhile
                pass

    def _guard(self, execute, sql, params, many, context):
        # `context` is shared with the wrappers around this one (a statement counter, the
        # db-path bench): a kept write is a statement but no query of its own, a flush a
        # query of statements already seen.
        if self._keeping and not many:
            self._kept.append((sql, list(params or [])))
            context["kept"] = True
            return None
        if self._kept:
            self.flush()
        context["flush"] = self._flushing
        return execute(sql, params, many, context)


def for_connection() -> BatchWrites:
    """The batch writes of this thread's connection: the store starts, flushes and stops
    them, the event sink writes through them."""
    writes = getattr(connection, "_taskos_batch_writes", None)
    if writes is None:
        writes = BatchWrites()
        setattr(connection, "_taskos_batch_writes", writes)
    return writes
