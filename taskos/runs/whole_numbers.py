"""Whole numbers as people type them into URLs (?call=, ?after=, ?runs=): read the same way
by the web views (taskos.web.params) and the live socket (taskos.live.consumer).

str.isdigit() accepts "²" and "٣", which int() then refuses or reads as another number, and
an unbounded number overflows the database's integer columns (SQLite: "datatype mismatch";
PostgreSQL: "out of range"): only ASCII digits within PostgreSQL's integer reach a query.
"""
from __future__ import annotations

import re

MAX_PARAM = 2**31 - 1  # PostgreSQL's integer: the smallest column a number is compared with
DIGITS = re.compile(r"[0-9]+")


def whole_number(raw: str, maximum: int = MAX_PARAM) -> int | None:
    """`raw` as an int when it is ASCII digits no larger than `maximum`, else None."""
    if not DIGITS.fullmatch(raw):
        return None
    value = int(raw)
    return value if value <= maximum else None
