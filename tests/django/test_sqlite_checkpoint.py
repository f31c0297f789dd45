"""SQLite: the engine's connection leaves checkpoints to a thread (taskos/runs/
sqlite_checkpoint.py), and that thread copies the log back while the engine writes on."""
from __future__ import annotations

import sqlite3
import time

import pytest
from django.db import connection

from taskos.runs import sqlite_checkpoint

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif("connection.vendor != 'sqlite'")]


def rows_in_the_database_file(path: str) -> int:
    """Rows of the probe table in the database file itself, the log left out (immutable:
    this reader never checkpoints, and sees only what was copied back)."""
    db = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    try:
        return db.execute("SELECT count(*) FROM checkpoint_probe").fetchone()[0]
    except sqlite3.OperationalError:  # the table itself is still only in the log
        return 0
    finally:
        db.close()


def test_the_engines_connection_stops_checkpointing_and_the_thread_does_it(monkeypatch):
    monkeypatch.setattr(sqlite_checkpoint, "CHECKPOINT_EVERY_S", 0.05)
    sqlite_checkpoint.take_over()
    path = str(connection.settings_dict["NAME"])
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_autocheckpoint")
        assert cursor.fetchone()[0] == 0
        cursor.execute("CREATE TABLE checkpoint_probe (v TEXT)")
        for _ in range(50):  # ~40 pages: SQLite's own checkpoint would wait for 1000
            cursor.execute("INSERT INTO checkpoint_probe (v) VALUES (%s)", ["x" * 3000])
    thread = sqlite_checkpoint._threads[path]
    assert thread.is_alive() and thread.daemon
    deadline = time.monotonic() + 10
    while rows_in_the_database_file(path) < 50 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert rows_in_the_database_file(path) == 50
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE checkpoint_probe")


def test_a_new_connection_is_taken_over_again():
    sqlite_checkpoint.take_over()
    connection.close()
    connection.ensure_connection()
    assert not connection._taskos_checkpointed
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_autocheckpoint")
        assert cursor.fetchone()[0] == 1000  # SQLite's own again, until taken over
    sqlite_checkpoint.take_over()
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_autocheckpoint")
        assert cursor.fetchone()[0] == 0
