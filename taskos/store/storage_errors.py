"""Storage errors told plainly: a full disk, a read-only or locked database, a database
server that is gone (issue 25 item 7).

They are not bugs: the run cannot go on until someone frees space or brings the database
back, so whoever meets one says which it is and what to do, in one line, and retries its
own write with backoff where waiting can help, instead of logging a traceback and leaving
the session `running`. Anything else (a programming error that SQLite also reports as an
OperationalError, such as "no such column") is not one and keeps its traceback.
"""
from __future__ import annotations

import errno
import time
from dataclasses import dataclass
from typing import Callable, Iterator, TypeVar

from django.db import DEFAULT_DB_ALIAS, InterfaceError, InternalError, OperationalError, connections

T = TypeVar("T")

# What SQLite says, lower-cased, for each kind (sqlite3 puts no error code on the exception
# before Python 3.11's sqlite_errorname, and Django's wrapper keeps only the text).
_SQLITE_TEXTS = (
    ("database or disk is full", "full"),
    ("readonly database", "read_only"),
    ("database is locked", "locked"),
    ("database table is locked", "locked"),
    ("disk i/o error", "io"),
    ("unable to open database file", "io"),
    ("database disk image is malformed", "io"),
)
_ERRNOS = {errno.ENOSPC: "full", errno.EDQUOT: "full", errno.EROFS: "read_only",
           errno.EIO: "io"}
# PostgreSQL SQLSTATEs (psycopg's exception.sqlstate): the class, or the exact code.
_SQLSTATES = {"53100": "full", "25006": "read_only", "08": "unreachable", "57P": "unreachable",
              "53": "io", "58": "io"}

_WHAT = {
    "full": "the disk holding the database is full",
    "read_only": "the database is read-only",
    "locked": "the database stayed locked by another writer",
    "unreachable": "the database server cannot be reached",
    "io": "the database could not read or write its storage",
}


@dataclass(frozen=True)
class StorageProblem:
    kind: str  # full, read_only, locked, unreachable, io
    text: str  # the database's or the operating system's own words

    def what(self) -> str:
        return f"{_WHAT[self.kind]} ({self.text})"

    def action(self) -> str:
        where = database_place()
        return {
            "full": f"Free disk space where the database lives ({where}); nothing saved so "
                    "far is lost.",
            "read_only": f"Make the database writable for this user ({where}).",
            "locked": "Another process held SQLite's write lock for the whole busy timeout: "
                      "wait and try again; for several workers use PostgreSQL (DATABASE_URL).",
            "unreachable": f"Check that the database server runs and answers ({where}), "
                           "and that DATABASE_URL is right.",
            "io": f"Check the disk and the database files ({where}).",
        }[self.kind]

    def line(self) -> str:
        """One line: what went wrong, in the database's words, and what to do."""
        return f"Storage error: {self.what()}. {self.action()}"


def database_place(alias: str = DEFAULT_DB_ALIAS) -> str:
    """The SQLite file, or the PostgreSQL host and database, without a password."""
    settings = connections[alias].settings_dict
    if connections[alias].vendor == "sqlite":
        return str(settings.get("NAME"))
    host = settings.get("HOST") or "localhost"
    port = f":{settings['PORT']}" if settings.get("PORT") else ""
    return f"{host}{port}/{settings.get('NAME')}"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen and len(seen) < 20:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _sqlstate_kind(exc: BaseException) -> str | None:
    state = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
    if not state:
        return None
    for prefix, kind in _SQLSTATES.items():  # the exact code before its class
        if state.startswith(prefix):
            return kind
    return None


def storage_problem(exc: BaseException) -> StorageProblem | None:
    """The storage problem behind `exc` (it or what it was raised from), or None."""
    for link in _chain(exc):
        text = str(link).strip().splitlines()[0] if str(link).strip() else type(link).__name__
        if isinstance(link, OSError) and link.errno in _ERRNOS:
            return StorageProblem(_ERRNOS[link.errno], link.strerror or text)
        if not isinstance(link, (OperationalError, InterfaceError, InternalError)):
            continue
        lowered = text.lower()
        for words, kind in _SQLITE_TEXTS:
            if words in lowered:
                return StorageProblem(kind, text)
        if "no space left on device" in lowered:
            return StorageProblem("full", text)
        cause = link.__cause__
        kind = _sqlstate_kind(cause) if cause is not None else None
        if kind:
            return StorageProblem(kind, text)
        if isinstance(link, InterfaceError):  # psycopg: "connection already closed"
            return StorageProblem("unreachable", text)
        if (isinstance(link, OperationalError) and cause is not None
                and type(cause).__module__.startswith("psycopg")
                and not getattr(cause, "sqlstate", None)):
            # No SQLSTATE: the server never answered (refused, reset, timed out).
            return StorageProblem("unreachable", text)
    return None


# Injected in tests; looked up at each call.
sleep: Callable[[float], None] = time.sleep
clock: Callable[[], float] = time.monotonic


def backoff(first: float, cap: float) -> Iterator[float]:
    """first, 2×first, 4×first … up to cap, then cap for ever."""
    delay = first
    while True:
        yield delay
        delay = min(delay * 2, cap)


def keep_trying(write: Callable[[], T], patience: float, first: float = 0.5,
                cap: float = 15.0, on_retry: Callable[[StorageProblem, float], None] | None = None
                ) -> T:
    """`write()`, tried again with backoff while it fails with a storage error, for up to
    `patience` seconds; then that error is raised. Any other error is raised at once."""
    deadline = clock() + patience
    delays = backoff(first, cap)
    while True:
        try:
            return write()
        except Exception as exc:
            problem, delay = storage_problem(exc), next(delays)
            if problem is None or clock() + delay > deadline:
                raise
            # The failed statement may have left the connection unusable (PostgreSQL
            # aborts the transaction, a dropped server closes it): the next try starts
            # on a fresh one.
            _reset_connection()
            if on_retry is not None:
                on_retry(problem, delay)
        sleep(delay)


def _reset_connection() -> None:
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.in_atomic_block:
        return  # a caller's transaction (a test's): not ours to close
    try:
        connection.close()
    except Exception:  # noqa: BLE001 - closing a connection to a gone server can fail too
        pass
