"""SQLite: the engine's connection leaves checkpoints to a thread (taskos/store/
sqlite_checkpoint.py), and that thread copies the log back while the engine writes on."""
from __future__ import annotations

import time

import pytest
from django.db import connection

from taskos.store import sqlite_checkpoint

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif("connection.vendor != 'sqlite'")]


def test_the_engines_connection_stops_checkpointing_and_the_thread_does_it(monkeypatch):
    passes: list[tuple[int, int, int]] = []
    real = sqlite_checkpoint.checkpoint
    monkeypatch.setattr(sqlite_checkpoint, "checkpoint",
                        lambda path: passes.append(real(path)) or passes[-1])
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
    while len(passes) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    # The thread checkpoints a log that holds the engine's writes (what it can copy back
    # depends on the readers still open elsewhere in the suite).
    assert len(passes) >= 3 and any(frames >= 40 for _, frames, _ in passes), passes
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
