"""CSV data tools (feature T5): describe, group-by aggregate, top-k. Standard library only.

Missing values (empty, NA, null, ...) are counted and reported in one phrasing,
"missing: 3 of 120 (2.5%)", so a later phase can still quote phase 1's figure.

Every tool reads its CSV in one streaming pass (csv_load in two), keeping running figures
rather than rows: memory follows the number of columns and groups, not the file's size, so
a file just under the 50 MB cap is no heavier than a small one (issue 25 item 6).
"""
from __future__ import annotations

import csv
import heapq
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from agents.tools.base import Table, Tool, ToolBoundary, ToolContext, ToolError, ToolReply
from agents.tools.tabular import (ColumnStats, distinct_cap, fmt_num, is_missing, missing_text,
                                  to_number)
from agents.tools.workspace import open_in_workspace

AGGREGATES = ("sum", "mean", "count", "min", "max")
MAX_CSV_BYTES = 50_000_000
MAX_CSV_COLUMNS = 2000  # SQLite's own column limit, so csv_load takes any file the tools read
MAX_LINE_CHARS = 1_000_000  # one physical line; a quoted field may span several
MAX_TOP_K = 1000


@dataclass
class CsvRows:
    """The header of a CSV file and its rows, read one at a time."""

    columns: list[str]
    rows: Iterator[list[str | None]]  # one value per column, None where a row is short


def _lines(handle, path: str) -> Iterator[str]:
    number = 0
    while line := handle.readline(MAX_LINE_CHARS + 1):
        number += 1
        if len(line) > MAX_LINE_CHARS:
            raise ToolError(f"Line {number} of {path!r} is longer than {MAX_LINE_CHARS:,} "
                            "characters; the CSV tools read shorter lines only.")
        yield line


def not_utf8(path: str) -> str:
    """A binary file (e.g. a person's upload, feature T9) is named as a possibility."""
    return (f"{path!r} is not UTF-8 text (a binary file, or text in another encoding); the "
            "CSV tools read UTF-8 only.")


def _explained(path: str, rows: Iterator[list[str]], width: int) -> Iterator[list[str | None]]:
    """The rows cut or padded to the header's width, decoding and CSV errors as ToolErrors
    (they surface while the caller iterates, not when the file is opened)."""
    try:
        for row in rows:
            if not row:
                continue  # a blank line, which csv.DictReader skipped too
            yield row[:width] if len(row) >= width else row + [None] * (width - len(row))
    except UnicodeDecodeError:
        raise ToolError(not_utf8(path)) from None
    except csv.Error as exc:
        raise ToolError(f"{path!r} is not a readable CSV file ({exc}).") from None


@contextmanager
def _csv_errors(path: str) -> Iterator[None]:
    try:
        yield
    except UnicodeDecodeError:
        raise ToolError(not_utf8(path)) from None
    except csv.Error as exc:
        raise ToolError(f"{path!r} is not a readable CSV file ({exc}).") from None


def _rows(path: str, reader: Iterator[list[str]], width: int) -> Iterator[list[str | None]]:
    """The rows cut or padded to the header's width; a bad byte or quote deep in the file
    becomes a ToolError while the caller iterates."""
    with _csv_errors(path):
        for row in reader:
            if not row:
                continue  # a blank line, skipped as csv.DictReader did
            yield row[:width] if len(row) >= width else row + [None] * (width - len(row))


@contextmanager
def load_csv(workspace: Path, path: str) -> Iterator[CsvRows]:
    """The CSV file of the workspace as its header and a stream of rows, or a ToolError
    saying what is wrong. The rows can be read once, inside the `with`."""
    with open_in_workspace(workspace, path, "r", encoding="utf-8-sig", newline="") as handle:
        if os.fstat(handle.fileno()).st_size > MAX_CSV_BYTES:
            raise ToolError(f"{path!r} is larger than {MAX_CSV_BYTES} bytes; the CSV tools "
                            "refuse it.")
        reader = csv.reader(_lines(handle, path))
        with _csv_errors(path):
            columns = next(reader, [])
        if not columns:
            raise ToolError(f"{path!r} is empty: a CSV file needs a header line.")
        if len(columns) > MAX_CSV_COLUMNS:
            raise ToolError(f"{path!r} has {len(columns)} columns; the CSV tools read at most "
                            f"{MAX_CSV_COLUMNS}.")
        yield CsvRows(columns, _rows(path, reader, len(columns)))


def _check_columns(path: str, columns: list[str], wanted: list[str]) -> None:
    unknown = [c for c in wanted if c not in columns]
    if unknown:
        raise ToolError(f"No column {', '.join(repr(c) for c in unknown)} in {path}; "
                        f"its columns are: {', '.join(columns)}.")


def _value(number: float) -> int | float:
    return int(number) if number == int(number) and abs(number) < 1e15 else round(number, 2)


def csv_describe(path: str, *, _ctx: ToolContext) -> ToolReply:
    with load_csv(_ctx.workspace, path) as data:
        columns = data.columns
        cap = distinct_cap(len(columns))
        stats = [ColumnStats(name, distinct_cap=cap) for name in columns]
        rows = 0
        for row in data.rows:
            rows += 1
            for col, value in zip(stats, row):
                col.add(value)
    lines = [f"{path}: {rows} rows, {len(columns)} columns"]
    lines += [col.describe() for col in stats]
    missing_total = sum(col.missing for col in stats)
    with_missing = [col for col in stats if col.missing]
    where = ", ".join(f"{col.name} ({col.missing})" for col in with_missing)
    cells = rows * len(columns)
    share = 100.0 * missing_total / cells if cells else 0.0
    lines.append(f"Missing values in total: {missing_total} of {cells} cells ({share:.1f}%)"
                 + (f", in {where}." if where else "."))
    conclusions = [f"{path}: {col.name} {missing_text(col.missing, col.count)}"
                   for col in with_missing]
    return ToolReply("\n".join(lines), conclusions)


def _group_columns(by: str) -> list[str]:
    names = [name.strip() for name in by.split(",") if name.strip()]
    if not names:
        raise ToolError("Give at least one column to group by, e.g. by='region'.")
    return names


def _sort_key(key: tuple[str, ...]) -> tuple:
    """Numbers sort numerically, text alphabetically, '(missing)' last."""
    return tuple((2, 0.0, k) if k == "(missing)" else
                 (0, to_number(k), "") if to_number(k) is not None else (1, 0.0, k) for k in key)


def _add_exactly(partials: list[float], x: float) -> None:
    """Add x to a sum kept as non-overlapping partials (the algorithm math.fsum uses), so
    fsum(partials) is the correctly rounded sum of everything added, as fsum of a list."""
    i = 0
    for y in partials:
        if abs(x) < abs(y):
            x, y = y, x
        high = x + y
        low = y - (high - x)
        if low:
            partials[i] = low
            i += 1
        x = high
    partials[i:] = [x]


@dataclass
class _Group:
    """The running figures of one group: what the aggregates need, not its values."""

    count: int = 0
    total: float = 0.0  # added in row order, as sum() did
    partials: list[float] = field(default_factory=list)  # the exact sum, for the mean
    low: float = math.inf
    high: float = -math.inf

    def add(self, number: float) -> None:
        self.count += 1
        self.total += number
        _add_exactly(self.partials, number)
        self.low = min(self.low, number)
        self.high = max(self.high, number)

    def result(self, agg: str) -> Any:
        if agg == "count":
            return self.count
        if not self.count:
            return None
        return _value({"sum": self.total, "mean": math.fsum(self.partials) / self.count,
                       "min": self.low, "max": self.high}[agg])


def csv_group_aggregate(path: str, by: str, column: str, agg: str = "sum", *,
                        _ctx: ToolContext) -> ToolReply:
    if agg not in AGGREGATES:
        raise ToolError(f"agg must be one of {', '.join(AGGREGATES)} (got {agg!r}).")
    group_by = _group_columns(by)
    groups: dict[tuple[str, ...], _Group] = {}
    missing = rows = 0
    with load_csv(_ctx.workspace, path) as data:
        _check_columns(path, data.columns, group_by + [column])
        keys = [data.columns.index(c) for c in group_by]
        where = data.columns.index(column)
        for row in data.rows:
            rows += 1
            key = tuple("(missing)" if is_missing(row[i]) else row[i] for i in keys)
            group = groups.setdefault(key, _Group())
            value = row[where]
            if is_missing(value):
                missing += 1
                continue
            if agg == "count":
                group.count += 1
                continue
            number = to_number(value)
            if number is None:
                raise ToolError(f"Column {column!r} is not numeric (it holds {value!r}); "
                                f"only agg='count' works on it.")
            group.add(number)
    table_rows = [[*key, groups[key].result(agg), groups[key].count]
                  for key in sorted(groups, key=_sort_key)]
    title = (f"{agg} of {column} by {', '.join(group_by)} in {path}: {len(table_rows)} groups; "
             f"{column} {missing_text(missing, rows)}, those rows skipped.")
    table = Table(columns=[*group_by, f"{agg}_{column}", "rows"], rows=table_rows, title=title)
    ranked = [r for r in table_rows if r[-2] is not None]
    conclusions = []
    if len(ranked) >= 2:
        high = max(ranked, key=lambda r: r[-2])
        low = min(ranked, key=lambda r: r[-2])
        conclusions.append(f"{agg} of {column} by {', '.join(group_by)} ({path}): highest "
                           f"{'/'.join(high[:-2])} {fmt_num(high[-2])}, lowest "
                           f"{'/'.join(low[:-2])} {fmt_num(low[-2])}")
    return ToolReply(table, conclusions)


def csv_top_k(path: str, column: str, k: int = 5, by: str | None = None, *,
              _ctx: ToolContext) -> Table:
    if k < 1:
        raise ToolError(f"k must be at least 1 (got {k}).")
    if k > MAX_TOP_K:
        raise ToolError(f"k must be at most {MAX_TOP_K} (got {k}); for more rows load the CSV "
                        "with csv_load and use sql_query.")
    group_by = _group_columns(by) if by else []
    # Per group a heap of its k best rows so far: (number, -row index, row), worst first.
    best: dict[tuple[str, ...], list[tuple[float, int, list]]] = {}
    missing = rows = 0
    with load_csv(_ctx.workspace, path) as data:
        columns = data.columns
        _check_columns(path, columns, [column] + group_by)
        keys = [columns.index(c) for c in group_by]
        where = columns.index(column)
        for index, row in enumerate(data.rows):
            rows += 1
            number = to_number(row[where])
            if is_missing(row[where]) or number is None:
                missing += 1
                continue
            key = tuple("(missing)" if is_missing(row[i]) else row[i] for i in keys)
            heap = best.setdefault(key, [])
            entry = (number, -index, row)
            if len(heap) < k:
                heapq.heappush(heap, entry)
            elif entry[:2] > heap[0][:2]:
                heapq.heapreplace(heap, entry)
    if not best:
        raise ToolError(f"Column {column!r} of {path} has no numeric values; top-k ranks rows "
                        "by a numeric column.")
    picked = []
    for key in sorted(best, key=_sort_key):
        ranked = sorted(best[key], key=lambda item: (-item[0], -item[1]))
        picked += [[row_rank, *row] for row_rank, (_, _, row) in enumerate(ranked, start=1)]
    within = f" within each {', '.join(group_by)}" if group_by else ""
    title = (f"Top {k} rows of {path} by {column}{within}: {len(picked)} rows; {column} "
             f"{missing_text(missing, rows)} or not numeric, those rows skipped.")
    return Table(columns=["rank", *columns], rows=picked, title=title)


def tools() -> list[Tool]:
    path = {"type": "string", "description": "CSV file in the workspace, e.g. 'sales.csv'."}
    return [
        Tool(name="csv_describe", description=(
                 "Describe a CSV file: rows, columns, per column type, min/max/mean or distinct "
                 "values, and missing values."),
             parameters={"type": "object", "properties": {"path": path}, "required": ["path"]},
             func=csv_describe, boundary=ToolBoundary(max_result_rows=200, max_result_length=8000)),
        Tool(name="csv_group_aggregate", description=(
                 "Group a CSV by one or more columns and aggregate another column."),
             parameters={"type": "object", "properties": {
                 "path": path,
                 "by": {"type": "string", "description": "Column(s) to group by, comma-separated."},
                 "column": {"type": "string", "description": "Column to aggregate."},
                 "agg": {"type": "string", "enum": list(AGGREGATES)}},
                 "required": ["path", "by", "column"]},
             func=csv_group_aggregate,
             boundary=ToolBoundary(max_result_rows=60, max_result_length=8000)),
        Tool(name="csv_top_k", description=(
                 "The k rows with the largest values of a numeric column, optionally per group."),
             parameters={"type": "object", "properties": {
                 "path": path, "column": {"type": "string"},
                 "k": {"type": "integer", "description": "How many rows (per group)."},
                 "by": {"type": "string", "description": "Optional column(s) to rank within."}},
                 "required": ["path", "column"]},
             func=csv_top_k, boundary=ToolBoundary(max_result_rows=25, max_result_length=6000)),
    ]
