"""What every part of the Django Store shares: session ids, and how its commits reach the disk."""
from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any

from django.db import connection


class UnknownSession(LookupError):
    """The engine was given a session id that has no row."""


def session_pk(session_id: str | int) -> int:
    try:
        return int(session_id)
    except (TypeError, ValueError):
        raise UnknownSession(f"Session id must be a number, got {session_id!r}") from None


def storable_text(content: str) -> bool:
    """PostgreSQL text cannot hold NUL, and no database takes lone surrogates."""
    if "\x00" in content:
        return False
    try:
        content.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


@contextmanager
def relaxed_commits():
    """While a session runs in this connection, its commits do not wait for the disk flush
    (PostgreSQL synchronous_commit off; SQLite in WAL mode with synchronous=NORMAL behaves
    so anyway) except the one of a batch holding a state save, which flushes every
    earlier commit with it: a crash of the database server loses at most the turn in
    flight, which the engine redoes (agents/loop/agent_loop.py)."""
    relaxed = connection.vendor == "postgresql"
    if relaxed:
        with connection.cursor() as cursor:
            cursor.execute("SET synchronous_commit TO OFF")
    try:
        yield
    finally:
        if relaxed and connection.connection is not None and not connection.in_atomic_block:
            with connection.cursor() as cursor:
                cursor.execute("SET synchronous_commit TO DEFAULT")


def durable_commit() -> None:
    """Inside a transaction: its commit waits for the disk, whatever relaxed_commits set."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO ON")
