"""Ids of new rows handed out before the rows are written (issue 8).

An insert kept for its batch's one query (taskos/store/batch_writes.py) must not wait for
`RETURNING id`: the engine needs an archive row's ref and an anchor's id at once, and
waiting for each would send the batch out statement by statement again. On PostgreSQL the table's own sequence hands out a block of ids in one read; an
id taken is never given out again, used or not (a rollback only leaves a gap). Elsewhere
`next()` returns None and the insert returns its id as before.
"""
from __future__ import annotations

from django.db import connection

BLOCK = 64  # ids read ahead per table: one read per 64 rows


class RowIds:
    def __init__(self, table: str) -> None:
        self.table = table
        self._free: list[int] = []
        self._sequence: str | None = None

    def next(self) -> int | None:
        if connection.vendor != "postgresql":
            return None
        if not self._free:
            self._free = self._reserve(BLOCK)
        return self._free.pop()

    def _reserve(self, count: int) -> list[int]:
        with connection.cursor() as cursor:
            if self._sequence is None:
                cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [self.table])
                self._sequence = cursor.fetchone()[0]
            cursor.execute("SELECT nextval(%s) FROM generate_series(1, %s)",
                           [self._sequence, count])
            return sorted((row[0] for row in cursor.fetchall()), reverse=True)  # pop: lowest
