"""JSON inside a model's text: small models wrap it in fences, tags and chatter.

`json_values` finds every complete JSON object or array in a text, left to right, with
where it starts and ends, so callers can take the first one (a summary followed by "I hope
this helps") or every one (several tool calls in a row).
"""
from __future__ import annotations

import json
from typing import Any, Iterator

_DECODER = json.JSONDecoder()


def json_values(text: str, opening: str = "{[") -> Iterator[tuple[Any, int, int]]:
    """(value, start, end) of each complete JSON value that starts with one of `opening`;
    a value found inside another is not reported again."""
    position = 0
    while True:
        starts = [i for i in (text.find(ch, position) for ch in opening) if i >= 0]
        if not starts:
            return
        start = min(starts)
        try:
            value, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            position = start + 1
            continue
        yield value, start, end
        position = end


def first_json_object(text: str) -> tuple[dict[str, Any], int, int] | None:
    """The first complete JSON object in `text` with its span, else None."""
    for value, start, end in json_values(text or "", "{"):
        if isinstance(value, dict):
            return value, start, end
    return None
