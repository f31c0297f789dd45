"""CSV data tools (feature T5): describe, group-by aggregate, top-k. Standard library only.

Missing values (empty, NA, null, ...) are counted and reported in one phrasing,
"missing: 3 of 120 (2.5%)", so a later phase can still quote phase 1's figure.
"""
from __future__ import annotations

import csv
import os
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from agents.tools.base import Table, Tool, ToolBoundary, ToolContext, ToolError, ToolReply
from agents.tools.tabular import column_stats, fmt_num, is_missing, missing_text, to_number
from agents.tools.workspace import open_in_workspace

AGGREGATES = ("sum", "mean", "count", "min", "max")
MAX_CSV_BYTES = 50_000_000


def load_csv(workspace: Path, path: str) -> tuple[list[str], list[dict[str, str]]]:
    """(columns, rows) of a CSV file in the workspace, or a ToolError saying what is wrong."""
    try:
        with open_in_workspace(workspace, path, "r", encoding="utf-8-sig", newline="") as handle:
            if os.fstat(handle.fileno()).st_size > MAX_CSV_BYTES:
                raise ToolError(f"{path!r} is larger than {MAX_CSV_BYTES} bytes; the CSV tools "
                                "refuse it.")
            reader = csv.DictReader(handle)
            rows = list(reader)
            columns = list(reader.fieldnames or [])
    except UnicodeDecodeError:
        raise ToolError(f"{path!r} is not UTF-8 text; the CSV tools read UTF-8 only.") from None
    except csv.Error as exc:
        raise ToolError(f"{path!r} is not a readable CSV file ({exc}).") from None
    if not columns:
        raise ToolError(f"{path!r} is empty: a CSV file needs a header line.")
    return columns, rows


def _check_columns(path: str, columns: list[str], wanted: list[str]) -> None:
    unknown = [c for c in wanted if c not in columns]
    if unknown:
        raise ToolError(f"No column {', '.join(repr(c) for c in unknown)} in {path}; "
                        f"its columns are: {', '.join(columns)}.")


def _value(number: float) -> int | float:
    return int(number) if number == int(number) and abs(number) < 1e15 else round(number, 2)


def csv_describe(path: str, *, _ctx: ToolContext) -> ToolReply:
    columns, rows = load_csv(_ctx.workspace, path)
    stats = column_stats(columns, ([row.get(c) for c in columns] for row in rows))
    lines = [f"{path}: {len(rows)} rows, {len(columns)} columns"]
    lines += [col.describe() for col in stats]
    missing_total = sum(col.missing for col in stats)
    with_missing = [col for col in stats if col.missing]
    where = ", ".join(f"{col.name} ({col.missing})" for col in with_missing)
    cells = len(rows) * len(columns)
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


def csv_group_aggregate(path: str, by: str, column: str, agg: str = "sum", *,
                        _ctx: ToolContext) -> ToolReply:
    if agg not in AGGREGATES:
        raise ToolError(f"agg must be one of {', '.join(AGGREGATES)} (got {agg!r}).")
    columns, rows = load_csv(_ctx.workspace, path)
    group_by = _group_columns(by)
    _check_columns(path, columns, group_by + [column])
    groups: dict[tuple[str, ...], list[Any]] = defaultdict(list)
    missing = 0
    for row in rows:
        key = tuple("(missing)" if is_missing(row.get(c)) else row[c] for c in group_by)
        value = row.get(column)
        if is_missing(value):
            missing += 1
            groups.setdefault(key, [])
            continue
        if agg != "count":
            number = to_number(value)
            if number is None:
                raise ToolError(f"Column {column!r} is not numeric (it holds {value!r}); "
                                f"only agg='count' works on it.")
            value = number
        groups[key].append(value)
    table_rows = []
    for key in sorted(groups, key=_sort_key):
        values = groups[key]
        if agg == "count":
            result: Any = len(values)
        elif not values:
            result = None
        else:
            result = _value({"sum": sum, "mean": statistics.fmean, "min": min,
                             "max": max}[agg](values))
        table_rows.append([*key, result, len(values)])
    title = (f"{agg} of {column} by {', '.join(group_by)} in {path}: {len(table_rows)} groups; "
             f"{column} {missing_text(missing, len(rows))}, those rows skipped.")
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
    columns, rows = load_csv(_ctx.workspace, path)
    group_by = _group_columns(by) if by else []
    _check_columns(path, columns, [column] + group_by)
    ranked: dict[tuple[str, ...], list[tuple[float, int]]] = defaultdict(list)
    missing = 0
    for index, row in enumerate(rows):
        number = to_number(row.get(column))
        if is_missing(row.get(column)) or number is None:
            missing += 1
            continue
        key = tuple("(missing)" if is_missing(row.get(c)) else row[c] for c in group_by)
        ranked[key].append((number, index))
    if not ranked:
        raise ToolError(f"Column {column!r} of {path} has no numeric values; top-k ranks rows "
                        "by a numeric column.")
    picked = []
    for key in sorted(ranked, key=_sort_key):
        best = sorted(ranked[key], key=lambda item: (-item[0], item[1]))[:k]
        picked += [[row_rank, *(rows[i].get(c) for c in columns)]
                   for row_rank, (_, i) in enumerate(best, start=1)]
    within = f" within each {', '.join(group_by)}" if group_by else ""
    title = (f"Top {k} rows of {path} by {column}{within}: {len(picked)} rows; {column} "
             f"{missing_text(missing, len(rows))} or not numeric, those rows skipped.")
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
