"""Turn whatever a tool returned into archivable text, safely.

Tools may return text, bytes, a Table, a list of dicts, or any JSON-like value. Nothing
here may raise or recurse: a 10 000-level nested list is serialised with an explicit
stack, cycles become "<cycle>", bytes that are not clean UTF-8 text are kept as bytes so
the archive stays lossless (the Store keeps them as base64).
"""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from agents.tools.base import Table, ToolReply
from agents.tools.tabular import csv_line


@dataclass
class Rendered:
    """A tool result ready to be archived and bounded."""

    kind: str  # text | json | table | binary
    text: str  # the full text as archived; for binary, a readable decoding for previews
    raw_bytes: bytes | None = None  # exact bytes for binary results (archived as base64)
    table: Table | None = None
    conclusions: list[str] = field(default_factory=list)


def is_clean_text(text: str) -> bool:
    """True when `text` is valid UTF-8 without NUL, i.e. text any database column can hold."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates, e.g. from errors="surrogateescape"
        return False
    return True


def _binary(raw: bytes) -> Rendered:
    return Rendered(kind="binary", text=raw.decode("utf-8", errors="replace"), raw_bytes=raw)


def _str_to_bytes(text: str) -> bytes:
    """Exact bytes of a str that holds lone surrogates (decoded with surrogateescape)."""
    try:
        return text.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="surrogatepass")


def render_result(value: Any) -> Rendered:
    conclusions: list[str] = []
    if isinstance(value, ToolReply):
        conclusions = [str(c) for c in value.conclusions]
        value = value.value
    rendered = _render_value(value)
    if rendered.kind != "binary" and not is_clean_text(rendered.text):
        rendered = _binary(_str_to_bytes(rendered.text))  # e.g. a table cell holding NUL
    rendered.conclusions = conclusions
    return rendered


def _render_value(value: Any) -> Rendered:
    if value is None:
        return Rendered(kind="text", text="(no output)")
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return _binary(raw)
        return Rendered(kind="text", text=text) if is_clean_text(text) else _binary(raw)
    if isinstance(value, str):
        if not is_clean_text(value):
            return _binary(_str_to_bytes(value))
        return Rendered(kind="text", text=value)
    if isinstance(value, Table):
        return Rendered(kind="table", text=render_table(value), table=value)
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        table = table_from_dicts(value)
        return Rendered(kind="table", text=render_table(table), table=table)
    text = to_json_text(value)
    return Rendered(kind="json", text=text)


def table_from_dicts(rows: list[dict[Any, Any]]) -> Table:
    normalised = [{str(k): v for k, v in row.items()} for row in rows]
    names = list(dict.fromkeys(k for row in normalised for k in row))
    return Table(columns=names, rows=[[_cell(row.get(c)) for c in names] for row in normalised])


def _cell(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return to_json_text(value)


def table_lines(table: Table) -> tuple[list[str], str, list[str], list[str]]:
    """(lines above the header, header line, one line per row, lines below)."""
    above = [table.title] if table.title else []
    below = [table.note] if table.note else []
    return (above, csv_line(table.columns), [csv_line(_cell(v) for v in row) for row in table.rows],
            below)


def render_table(table: Table) -> str:
    above, header, rows, below = table_lines(table)
    return "\n".join(above + [header] + rows + below)


def _scalar_json(value: Any) -> str:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return json.dumps(value, ensure_ascii=False)
        except UnicodeEncodeError:
            return json.dumps(value)  # ASCII escapes keep lone surrogates lossless
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return json.dumps("base64:" + base64.b64encode(bytes(value)).decode("ascii"))
    try:
        return json.dumps(str(value), ensure_ascii=False)
    except Exception as exc:  # a __str__ that raises must not break the session
        return json.dumps(f"<unprintable {type(value).__name__}: {type(exc).__name__}>")


def to_json_text(value: Any) -> str:
    """JSON text of any value without recursion: depth costs heap, never the C stack."""
    out: list[str] = []
    pending: list[tuple[str, Any]] = [("value", value)]
    open_containers: set[int] = set()  # ids on the current path, to detect cycles
    while pending:
        kind, item = pending.pop()
        if kind == "text":
            out.append(item)
            continue
        if kind == "close":
            open_containers.discard(item)
            continue
        if isinstance(item, dict):
            entries: list[tuple[str, Any]] = [(_scalar_json(str(k)), v) for k, v in item.items()]
        elif isinstance(item, (list, tuple, set, frozenset)):
            entries = [("", v) for v in item]
        else:
            out.append(_scalar_json(item))
            continue
        if id(item) in open_containers:
            out.append('"<cycle>"')
            continue
        open_containers.add(id(item))
        opening, closing = ("{", "}") if isinstance(item, dict) else ("[", "]")
        out.append(opening)
        pending.append(("close", id(item)))
        pending.append(("text", closing))
        for index in range(len(entries) - 1, -1, -1):
            key, child = entries[index]
            pending.append(("value", child))
            prefix = ", " if index else ""
            if key:
                pending.append(("text", f"{prefix}{key}: "))
            elif prefix:
                pending.append(("text", prefix))
    return "".join(out)
