"""Bound a tool result to its ToolBoundary (feature C10).

Tables keep head rows + tail rows + statistics over all rows; text keeps its head and
tail. The cut part is replaced by one marker line that names the archive ref and the
exact character offset where the cut part starts in the archived text, e.g.

  [... 48210 chars offloaded to arc:s1:7 — read them with read_ref(ref="arc:s1:7", offset=5310) ...]

Whatever the input, the content returned is never longer than max_result_length.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents.tools.base import ToolBoundary
from agents.tools.render import Rendered, table_lines
from agents.tools.tabular import parse_csv_like, stats_lines

LLM_FALLBACK_NOTE = ("(summary_mode llm is not available in the tool layer; "
                     "kept the head and tail instead)")
TABLE_DETECTION_LIMIT = 4_000_000  # longer text is bounded as text: parsing it is not worth it


@dataclass
class Bounded:
    content: str
    truncated: bool


def offload_marker(what: str, ref: str, offset: int) -> str:
    return (f'[... {what} offloaded to {ref} — read them with '
            f'read_ref(ref="{ref}", offset={offset}) ...]')


def _hard_fit(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit]


def bound_rendered(rendered: Rendered, boundary: ToolBoundary, ref: str) -> Bounded:
    if rendered.kind == "binary":
        return bound_binary(rendered, boundary, ref)
    if rendered.kind == "table" and rendered.table is not None:
        above, header, row_lines, below = table_lines(rendered.table)
        return bound_table(above, header, row_lines, below, rendered.table.columns,
                           rendered.table.rows, boundary, ref)
    text = rendered.text
    if len(text) <= TABLE_DETECTION_LIMIT:
        parsed = parse_csv_like(text)
        if parsed is not None:
            columns, row_lines, rows = parsed
            return bound_table([], text.split("\n", 1)[0], row_lines, [], columns, rows,
                               boundary, ref)
    return bound_text(text, boundary, ref)


def bound_text(text: str, boundary: ToolBoundary, ref: str) -> Bounded:
    limit = boundary.max_result_length
    if len(text) <= limit:
        return Bounded(text, False)
    mode = boundary.summary_mode
    total = len(text)
    if mode == "stats":
        lines = text.count("\n") + (0 if text.endswith("\n") else 1)
        summary = f"Statistics: {total} chars, {lines} lines, {len(text.split())} words."
        return Bounded(_hard_fit(offload_marker(f"{total} chars", ref, 0) + "\n" + summary,
                                 limit), True)
    note = LLM_FALLBACK_NOTE + "\n" if mode == "llm" else ""
    widest = offload_marker(f"{total} chars", ref, total)
    budget = limit - len(note) - len(widest) - 2
    if budget <= 0:
        return Bounded(_hard_fit(f"[{total} chars offloaded to {ref}]", limit), True)
    head_budget = budget if mode == "none" else budget * 2 // 3
    tail_budget = budget - head_budget
    head_end = head_budget
    newline = text.rfind("\n", 0, head_end)
    if newline >= head_end // 2:
        head_end = newline + 1  # keep whole lines where that costs little
    tail_start = total - tail_budget
    newline = text.find("\n", tail_start, tail_start + tail_budget // 2)
    if newline != -1:
        tail_start = newline + 1
    head, tail = text[:head_end], text[tail_start:]
    separator = "" if not head or head.endswith("\n") else "\n"
    marker = offload_marker(f"{tail_start - head_end} chars", ref, head_end)
    content = note + head + separator + marker + ("\n" + tail if tail else "")
    return Bounded(content, True)


def _row_offset(above: list[str], header: str, row_lines: list[str], index: int) -> int:
    """Where row `index` starts in the archived text (lines joined by newlines)."""
    return (sum(len(line) + 1 for line in above) + len(header) + 1
            + sum(len(line) + 1 for line in row_lines[:index]))


def bound_table(above: list[str], header: str, row_lines: list[str], below: list[str],
                columns: list[str], rows: list[list[Any]], boundary: ToolBoundary,
                ref: str) -> Bounded:
    full = "\n".join(above + [header] + row_lines + below)
    limit, mode, count = boundary.max_result_length, boundary.summary_mode, len(row_lines)
    if count <= boundary.max_result_rows and len(full) <= limit:
        return Bounded(full, False)
    if count == 0:
        return bound_text(full, boundary, ref)
    stats = [] if mode == "none" else stats_lines(columns, rows)
    note = [LLM_FALLBACK_NOTE] if mode == "llm" else []

    def compose(shown: int, stat_lines: list[str]) -> str:
        tail_n = 0 if mode == "none" else shown // 3
        head_n = shown - tail_n
        marker = offload_marker(f"{count - shown} rows", ref,
                                _row_offset(above, header, row_lines, head_n))
        tail = row_lines[count - tail_n:] if tail_n else []
        return "\n".join(note + above + [header] + row_lines[:head_n] + [marker] + tail
                         + below + stat_lines)

    most = 0 if mode == "stats" else min(boundary.max_result_rows, count - 1)
    best = _largest_fitting(most, lambda k: len(compose(k, stats)) <= limit)
    if best is not None:
        return Bounded(compose(best, stats), True)

    def shortened(j: int) -> list[str]:
        hidden = len(stats) - j
        return stats[:j] + ([f"- ({hidden} more columns not shown)"] if hidden else [])

    kept = _largest_fitting(len(stats), lambda j: len(compose(0, shortened(j))) <= limit)
    if kept is not None:
        return Bounded(compose(0, shortened(kept)), True)
    return bound_text(full, boundary, ref)  # even the header does not fit: cut it as text


def _largest_fitting(most: int, fits) -> int | None:
    """The largest k in [0, most] with fits(k), assuming fits is monotone; None if none."""
    if not fits(0):
        return None
    low, high = 0, most
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def bound_binary(rendered: Rendered, boundary: ToolBoundary, ref: str) -> Bounded:
    raw = rendered.raw_bytes or b""
    intro = (f"Binary output: {len(raw)} bytes that are not clean UTF-8 text (invalid bytes or "
             f'NUL characters); the exact bytes are archived as base64 at {ref} — read them '
             f'with read_ref(ref="{ref}", offset=0).')
    if len(intro) > boundary.max_result_length:
        intro = f"[binary output: {len(raw)} bytes archived as base64 at {ref}]"
    decoded = rendered.text
    unreadable = sum(1 for ch in decoded[:2000]
                     if ch == "\ufffd" or (ch < " " and ch not in "\n\t\r"))
    if unreadable > 0.1 * min(len(decoded), 2000):
        preview = "First bytes (hex): " + raw[:48].hex(" ")
    else:
        preview = "Preview (invalid bytes shown as \ufffd): " + decoded.replace("\x00", "\\x00")
    return Bounded(_hard_fit(intro + "\n" + preview, boundary.max_result_length), True)
