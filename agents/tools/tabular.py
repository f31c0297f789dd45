"""Shared pieces for tabular results: numbers, missing values, column statistics, CSV lines.

Used by the bounding of tabular results (feature C10) and by the CSV data tools (feature T5), so
a statistic reads the same wherever the model meets it.
"""
from __future__ import annotations

import csv
import hashlib
import io
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

MISSING_MARKERS = frozenset({"", "na", "n/a", "nan", "null", "none", "-"})
# A CSV-like text must have a header of plausible column names: short, non-empty fields.
MAX_HEADER_FIELD = 64
# Distinct values counted per column (at most MAX_DISTINCT, at least MIN_DISTINCT, about
# MAX_DISTINCT_IN_ALL over all columns), each under a key of at most MAX_KEY_CHARS.
MAX_DISTINCT = 10_000
MIN_DISTINCT = 50
MAX_DISTINCT_IN_ALL = 100_000
MAX_KEY_CHARS = 100


def is_missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    return isinstance(value, str) and value.strip().lower() in MISSING_MARKERS


def to_number(value: Any) -> float | None:
    """The value as a float when it is a finite number (or a numeric string), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip().replace(",", "")) if value.strip() else math.nan
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def fmt_num(number: float) -> str:
    """Short, stable number text: integers without decimals, others with two."""
    if not math.isfinite(number):  # a sum of huge values overflows to inf
        return str(number)
    if abs(number) >= 1e15:
        return f"{number:.6g}"
    if number == int(number):
        return str(int(number))
    if abs(number) >= 0.01:
        return f"{number:.2f}".rstrip("0").rstrip(".")
    return f"{number:.4g}"


def missing_text(missing: int, total: int) -> str:
    """'missing: 3 of 120 (2.5%)': the one phrasing the model sees for missing values."""
    share = (100.0 * missing / total) if total else 0.0
    return f"missing: {missing} of {total} ({share:.1f}%)"


def distinct_cap(columns: int) -> int:
    """Distinct values counted per column when a table has `columns` columns: a fixed number
    in all, so a wide table counts fewer per column and memory stays bounded."""
    return max(MIN_DISTINCT, min(MAX_DISTINCT, MAX_DISTINCT_IN_ALL // max(columns, 1)))


def _distinct_key(value: Any) -> str:
    """The text a value is counted under; a long one keeps its head (which is all a
    description shows) and a digest of the rest, so it stays distinct in little memory."""
    text = str(value)
    if len(text) <= MAX_KEY_CHARS:
        return text
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return f"{text[:MAX_KEY_CHARS - 20]}\u2026#{digest}"


@dataclass
class ColumnStats:
    """Running statistics of one column: counts, range and sum, and the distinct values up
    to `distinct_cap`; nothing grows with the number of rows."""

    name: str
    distinct_cap: int = MAX_DISTINCT
    count: int = 0
    missing: int = 0
    numeric_count: int = 0
    non_numeric: int = 0
    low: float = math.inf
    high: float = -math.inf
    total: float = 0.0  # added in row order, as sum() over the values did
    values: Counter = field(default_factory=Counter)
    uncounted: int = 0  # values not counted because they came after the cap was reached

    @property
    def numeric(self) -> bool:
        return self.numeric_count > 0 and self.non_numeric == 0

    def add(self, value: Any) -> None:
        self.count += 1
        if is_missing(value):
            self.missing += 1
            return
        number = to_number(value)
        if number is None:
            self.non_numeric += 1
        else:
            self.numeric_count += 1
            self.total += number
            if number < self.low:
                self.low = number
            if number > self.high:
                self.high = number
        key = _distinct_key(value)
        if key in self.values or len(self.values) < self.distinct_cap:
            self.values[key] += 1
        else:
            self.uncounted += 1

    def describe(self) -> str:
        """One line: type, range or distinct values, and the missing share."""
        if self.numeric:
            body = (f"numeric, min {fmt_num(self.low)}, max {fmt_num(self.high)}, "
                    f"mean {fmt_num(self.total / self.numeric_count)}")
        else:
            common = ", ".join(f"{v[:40]} ({n})" for v, n in self.values.most_common(3))
            if self.uncounted:
                body = (f"text, more than {len(self.values)} distinct (only the first "
                        f"{len(self.values)} counted)")
            else:
                body = f"text, {len(self.values)} distinct"
            body += f", most common {common}" if common else ""
        return f"- {self.name}: {body}; {missing_text(self.missing, self.count)}"


def column_stats(columns: list[str], rows: Iterable[list[Any]]) -> list[ColumnStats]:
    stats = [ColumnStats(name) for name in columns]
    for row in rows:
        for i, col in enumerate(stats):
            col.add(row[i] if i < len(row) else None)
    return stats


def stats_lines(columns: list[str], rows: list[list[Any]]) -> list[str]:
    """The statistics block kept with every cut table."""
    head = f"Statistics over all {len(rows)} rows, {len(columns)} columns:"
    return [head] + [col.describe() for col in column_stats(columns, rows)]


def csv_line(values: Iterable[Any]) -> str:
    """One CSV record without its line ending; None becomes an empty field."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="").writerow(["" if v is None else v for v in values])
    return buffer.getvalue()


def parse_csv_like(text: str) -> tuple[list[str], list[str], list[list[str]]] | None:
    """(columns, row lines, parsed rows) when `text` is one-record-per-line CSV, else None.

    Strict on purpose: prose with commas must not be mistaken for a table, and a quoted
    field spanning lines would break the line-to-row mapping that offsets rely on.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 3 or text.count('"') % 2:
        return None
    delimiter = "\t" if lines[0].count("\t") >= 1 else ","
    header = next(csv.reader([lines[0]], delimiter=delimiter))
    if len(header) < 2 or any(not h.strip() or len(h) > MAX_HEADER_FIELD for h in header):
        return None
    if any(to_number(h) is not None for h in header):
        return None
    def parse(line: str) -> list[str]:
        return next(csv.reader([line], delimiter=delimiter), [])

    sample = [parse(line) for line in lines[1:201]]  # cheap rejection of long non-tables
    if sum(1 for r in sample if len(r) == len(header)) < 0.9 * len(sample):
        return None
    rows = sample + [parse(line) for line in lines[201:]]
    matching = sum(1 for r in rows if len(r) == len(header))
    if matching < 0.9 * len(rows):
        return None
    return header, lines[1:], rows
