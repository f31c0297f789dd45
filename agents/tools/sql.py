"""SQL over the session database (feature T5): csv_load writes it, sql_query only reads it.

The database is `<workspace>/session.sqlite3`. sql_query accepts only SELECT / WITH, opens
the file with `mode=ro`, sets `query_only`, and an authorizer denies every action that is
not a read — three independent locks, so a clever WITH ... DELETE still cannot write.

Results are bounded while they are read (issue 25 item 6): each text or blob value is cut
to a share of the per-row cap as SQLite hands it over, and rows stop before the result's
cap is passed, the first row included; the result says what was cut or left out.
"""
from __future__ import annotations

import os
import re
import sqlite3
import time
from contextlib import ExitStack, closing
from pathlib import Path
from urllib.parse import quote

from agents.tools.base import Table, Tool, ToolBoundary, ToolContext, ToolError
from agents.tools.data import load_csv
from agents.tools.tabular import is_missing, to_number
from agents.tools.workspace import check_workspace_file, same_file

DATABASE_NAME = "session.sqlite3"
# Files SQLite opens next to the database; each must be a real file of the workspace too.
COMPANION_SUFFIXES = ("", "-journal", "-wal", "-shm")
MAX_FETCH_ROWS = 1000
# Caps applied while rows are read, before they pile up in memory or reach the archive.
MAX_VALUE_BYTES = 100_000  # one text or blob value; SQLite refuses to build a longer one
MAX_COLUMNS = 200  # so one row is at most MAX_COLUMNS x MAX_VALUE_BYTES however it is built
MAX_RESULT_BYTES = 2_000_000  # all fetched values together
# What one row may hold once read: each text or blob value is cut to an equal share of it
# (never under MIN_CELL_BYTES), so one row of MAX_COLUMNS long values stays small.
MAX_ROW_BYTES = 100_000
MIN_CELL_BYTES = 200
CUT_MARKER_CHARS = 40  # room for the " [... n more bytes cut]" a cut text ends with
QUERY_SECONDS = 15.0  # below the tool's timeout, so the query stops instead of being abandoned
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_COMMENTS = re.compile(r"^\s*(?:--[^\n]*\n|/\*.*?\*/|\s)*", re.S)
_READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                 getattr(sqlite3, "SQLITE_RECURSIVE", 33)}


def _quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _table_name(path: str, table: str | None) -> str:
    if table:
        if not _IDENTIFIER.match(table):
            raise ToolError(f"Table name {table!r} must start with a letter or _ and hold only "
                            "letters, digits and _.")
        return table
    stem = re.sub(r"[^A-Za-z0-9_]+", "_", Path(path).stem).strip("_").lower() or "data"
    return stem if not stem[0].isdigit() else f"t_{stem}"


def _refused(name: str) -> ToolError:
    return ToolError(f"{name} in the workspace is a link or not a regular file; the SQL tools "
                     "only use a real file inside the workspace. Remove it, then load the CSV "
                     "again.")


def session_database(workspace: Path, stack: ExitStack) -> tuple[Path, os.stat_result | None]:
    """The session database's path and fstat (None when it does not exist yet), refusing a
    database or journal that is a symlink, a hard link or not a regular file: SQLite would
    follow it, read and write. The checked descriptors stay open on `stack`; call
    `still_the_checked_database` once SQLite has opened the file."""
    checked = None
    for suffix in COMPANION_SUFFIXES:
        name = DATABASE_NAME + suffix
        try:
            found = check_workspace_file(workspace, name, stack)
        except ToolError:
            raise _refused(name) from None
        if not suffix:
            checked = found
    return workspace.resolve() / DATABASE_NAME, checked


def still_the_checked_database(workspace: Path, checked: os.stat_result | None) -> None:
    """SQLite opens files by name, not by descriptor: after it opened the database, the name
    must still be the file that was checked (or a new file of one link), else a link was
    swapped in meanwhile and nothing is read or written."""
    if not same_file(workspace, DATABASE_NAME, checked):
        raise _refused(DATABASE_NAME)


def _column_types(workspace: Path, path: str) -> tuple[list[str], list[str]]:
    """(columns, SQL types) from a first pass over the CSV: INTEGER or REAL when every
    present value is such a number, else TEXT."""
    with load_csv(workspace, path) as data:
        columns = data.columns
        present = [False] * len(columns)
        numeric = [True] * len(columns)
        integral = [True] * len(columns)
        for row in data.rows:
            for i, value in enumerate(row):
                if not numeric[i] or is_missing(value):
                    continue
                present[i] = True
                number = to_number(value)
                if number is None:
                    numeric[i] = False
                elif integral[i] and number != int(number):
                    integral[i] = False
    types = ["TEXT" if not (p and n) else "INTEGER" if whole else "REAL"
             for p, n, whole in zip(present, numeric, integral)]
    return columns, types


def csv_load(path: str, table: str | None = None, *, _ctx: ToolContext) -> str:
    name = _table_name(path, table)
    columns, types = _column_types(_ctx.workspace, path)

    def cell(value: str | None, kind: str):
        if is_missing(value):
            return None
        return value if kind == "TEXT" else to_number(value)

    with ExitStack() as stack:
        target, checked = session_database(_ctx.workspace, stack)
        with closing(sqlite3.connect(target)) as db, db:
            still_the_checked_database(_ctx.workspace, checked)
            db.execute(f"DROP TABLE IF EXISTS {_quote_identifier(name)}")
            db.execute(f"CREATE TABLE {_quote_identifier(name)} ("
                       + ", ".join(f"{_quote_identifier(c)} {t}" for c, t in zip(columns, types))
                       + ")")
            with load_csv(_ctx.workspace, path) as data:
                if data.columns != columns:
                    raise ToolError(f"{path!r} changed while it was loaded; load it again.")
                insert = db.executemany(f"INSERT INTO {_quote_identifier(name)} VALUES "
                                        f"({', '.join('?' for _ in columns)})",
                                        ([cell(v, t) for v, t in zip(row, types)]
                                         for row in data.rows))
                rows = insert.rowcount
    described = ", ".join(f"{c} {t}" for c, t in zip(columns, types))
    return (f"Loaded {rows} rows from {path} into table {name} of {DATABASE_NAME} "
            f"(missing values stored as NULL). Columns: {described}.")


def _first_keyword(sql: str) -> str:
    rest = _COMMENTS.sub("", sql, count=1)
    match = re.match(r"[A-Za-z]+", rest)
    return match.group(0).upper() if match else ""


def _explain(exc: Exception) -> str:
    detail = str(exc).rstrip(".")
    if "one statement at a time" in detail:
        return "sql_query runs one statement at a time; send a single SELECT."
    if "too big" in detail:
        return (f"A value in the result is longer than {MAX_VALUE_BYTES:,} bytes, the most "
                "sql_query returns; select a substr() of it or aggregate.")
    if "interrupted" in detail:
        return (f"The query ran longer than {QUERY_SECONDS:g} s and was stopped; add a LIMIT "
                "or aggregate.")
    if "not authorized" in detail or "readonly" in detail:
        return "sql_query is read-only: the query tried to change the database, which is refused."
    return f"SQL error: {detail}."


class _CellCap:
    """Cuts each text value to `limit` bytes as SQLite hands it over (the connection's
    text_factory), so a long value is never kept whole; blobs are cut in `_fetch_capped`."""

    def __init__(self) -> None:
        self.limit = MAX_VALUE_BYTES
        self.cut = 0

    def __call__(self, raw: bytes) -> str:
        if len(raw) <= self.limit:
            return raw.decode("utf-8", "replace")
        self.cut += 1
        # "ignore" drops only a character split by the cut; the marker says what is missing.
        return (raw[:self.limit].decode("utf-8", "ignore")
                + f" [... {len(raw) - self.limit:,} more bytes cut]")


def _cell_limit(columns: int) -> int:
    return max(MIN_CELL_BYTES, min(MAX_VALUE_BYTES, MAX_ROW_BYTES // max(columns, 1)))


def sql_query(sql: str, *, _ctx: ToolContext) -> Table:
    keyword = _first_keyword(sql)
    if keyword not in ("SELECT", "WITH"):
        shown = keyword or sql.strip()[:20]
        raise ToolError(f"sql_query is read-only: only SELECT or WITH queries are allowed "
                        f"(got {shown!r}). To add data, load a CSV with csv_load.")
    with ExitStack() as stack:
        target, checked = session_database(_ctx.workspace, stack)
        if checked is None:
            raise ToolError(f"There is no session database yet ({DATABASE_NAME}). Load a CSV "
                            "first, e.g. csv_load(path='sales.csv').")
        deadline = time.monotonic() + QUERY_SECONDS
        uri = f"file:{quote(str(target))}?mode=ro"
        db = stack.enter_context(closing(sqlite3.connect(uri, uri=True)))
        still_the_checked_database(_ctx.workspace, checked)
        cap = _CellCap()
        db.text_factory = cap
        db.execute("PRAGMA query_only = ON")
        db.set_authorizer(lambda action, *_: sqlite3.SQLITE_OK if action in _READ_ACTIONS
                          else sqlite3.SQLITE_DENY)
        db.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        db.setlimit(sqlite3.SQLITE_LIMIT_COLUMN, MAX_COLUMNS)
        try:
            cursor = db.execute(sql)
            columns = [d[0] for d in cursor.description or ()]
            cap.limit = _cell_limit(len(columns))
            rows, stopped, cut_here = _fetch_capped(cursor, cap.limit)
        except (sqlite3.Error, sqlite3.Warning) as exc:
            raise ToolError(_explain(exc)) from None
    title = f"{len(rows)} rows" + (f" ({stopped}; the query returns more — add a LIMIT or "
                                   "aggregate)" if stopped else "") + "."
    cut = cap.cut + cut_here
    note = (f"{cut} long value{'s' if cut > 1 else ''} cut to {cap.limit:,} bytes (with "
            f"{len(columns)} columns, a row keeps at most {MAX_ROW_BYTES:,}); select substr() "
            "of a column for the rest." if cut else "")
    return Table(columns=columns, rows=rows, title=title, note=note)


def _fetch_capped(cursor: sqlite3.Cursor, cell_limit: int) -> tuple[list[list], str, int]:
    """Rows one at a time until the row or byte cap, blobs cut to `cell_limit`: (rows, the
    reason it stopped or "", values cut here). A row that would pass the byte cap is not added,
    whichever row it is."""
    rows: list[list] = []
    size = 0
    cut = 0
    for row in cursor:
        if len(rows) == MAX_FETCH_ROWS:
            return rows, f"stopped after {MAX_FETCH_ROWS}", cut
        values = list(row)
        for i, value in enumerate(values):
            if isinstance(value, bytes) and len(value) > cell_limit:
                values[i] = value[:cell_limit]
                cut += 1
            elif isinstance(value, str) and len(value) > cell_limit + CUT_MARKER_CHARS:
                # Only a text converted before the limit was known (a Python that fetches
                # the first row inside execute) is still long here.
                values[i] = value[:cell_limit] + f" [... {len(value) - cell_limit:,} more " \
                    "characters cut]"
                cut += 1
        size += sum(len(v) if isinstance(v, (str, bytes)) else 8 for v in values)
        if size > MAX_RESULT_BYTES:
            return rows, f"stopped at {MAX_RESULT_BYTES:,} bytes of values", cut
        rows.append(values)
    return rows, "", cut


def tools() -> list[Tool]:
    return [
        Tool(name="csv_load", description=(
                 f"Load a CSV file of the workspace into a table of the session database "
                 f"({DATABASE_NAME}) so sql_query can read it."),
             parameters={"type": "object", "properties": {
                 "path": {"type": "string", "description": "CSV file, e.g. 'sales.csv'."},
                 "table": {"type": "string",
                           "description": "Table name; default from the file name."}},
                 "required": ["path"]},
             func=csv_load, boundary=ToolBoundary(max_result_length=3000)),
        Tool(name="sql_query", description=(
                 f"Run one read-only SQL query (SELECT or WITH) on the session database "
                 f"({DATABASE_NAME}); at most {MAX_FETCH_ROWS} rows are fetched."),
             parameters={"type": "object", "properties": {"sql": {"type": "string"}},
                         "required": ["sql"]},
             func=sql_query, boundary=ToolBoundary(max_result_rows=50, max_result_length=8000)),
    ]
