"""SQLite: the write-ahead log is copied back into the database by a thread of its own.

In WAL mode SQLite copies the log back into the database file (a checkpoint, with a disk
flush) from inside whichever commit pushes the log past 1000 pages: on long-200 about
every 40th turn paid ~10 ms for it, 0.1–0.2 ms a turn on average. The engine's connection
turns that off (`take_over`) and a daemon thread per process checkpoints every
CHECKPOINT_EVERY_S instead, on its own connection; a PASSIVE checkpoint never waits for a
writer and is never waited for, and SQLite releases the GIL while it copies and flushes,
so it runs beside the engine on the other core. Other connections (the web process) keep
SQLite's own checkpoints.
"""
from __future__ import annotations

import logging
import sqlite3
import threading
import time

from django.db import connection
from django.db.backends.signals import connection_created

log = logging.getLogger("taskos.runs")

CHECKPOINT_EVERY_S = 0.25
_threads: dict[str, threading.Thread] = {}  # by database file, one per process
_lock = threading.Lock()


def take_over() -> None:
    """Stop this connection's own checkpoints and make sure the thread runs (once)."""
    if connection.vendor != "sqlite":
        return
    path = str(connection.settings_dict["NAME"])
    if not path or path == ":memory:" or "mode=memory" in path:
        return
    connection.ensure_connection()  # a new connection clears the mark (_reconnected)
    if getattr(connection, "_taskos_checkpointed", False):
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_autocheckpoint=0")
    connection._taskos_checkpointed = True
    with _lock:
        thread = _threads.get(path)
        if thread is None or not thread.is_alive():
            thread = threading.Thread(target=_checkpoint_forever, args=(path,), daemon=True,
                                      name="taskos-sqlite-checkpoint")
            _threads[path] = thread
            thread.start()


def _reconnected(sender, connection, **kwargs) -> None:
    connection._taskos_checkpointed = False  # a new connection checkpoints by itself again


connection_created.connect(_reconnected, dispatch_uid="taskos-sqlite-checkpoint")


def checkpoint(path: str) -> tuple[int, int, int]:
    """One PASSIVE checkpoint on a connection of its own: (busy, frames in the log, frames
    copied back), as SQLite reports them."""
    db = sqlite3.connect(path, timeout=1, isolation_level=None)
    try:
        return tuple(db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone())
    finally:
        db.close()


def _checkpoint_forever(path: str) -> None:
    failed = False
    while True:
        time.sleep(CHECKPOINT_EVERY_S)
        try:
            checkpoint(path)
            failed = False
        except sqlite3.Error as exc:  # a deleted test database, a locked file: try later
            if not failed:
                log.warning("SQLite checkpoint of %s failed (%s); retrying", path, exc)
            failed = True
