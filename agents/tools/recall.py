"""Reading the archive back (features T4, C11): read_ref pages through one ref, recall searches.

read_ref never returns more than its own max_result_length at once; its header line
says which characters it shows, the total and the offset of the next page, so the model
can read a 10 MB result back in full, page by page.
"""
from __future__ import annotations

from agents.tools.base import Tool, ToolBoundary, ToolContext, ToolError

RECALL_LIMIT = 5
EXCERPT_CHARS = 300
COPY_TOOLS = ("recall", "read_ref")


def page_header(ref: str, start: int, end: int, total: int) -> str:
    after = f"next offset {end}" if end < total else "end of result"
    return f"[{ref}: chars {start}-{end} of {total}; {after}]"


def read_ref(ref: str, offset: int = 0, limit: int | None = None, *, _ctx: ToolContext,
             _boundary: ToolBoundary) -> str:
    ref = ref.strip()
    text = _ctx.store.read_ref(_ctx.session_id, ref)
    if text is None:
        raise ToolError(f"Unknown ref {ref!r}. Use a ref exactly as shown in a cut result or a "
                        "recall excerpt, e.g. arc:<session>:<number>.")
    total = len(text)
    if offset < 0 or (offset >= total and total > 0):
        raise ToolError(f"offset {offset} is outside {ref} ({total} chars); use 0 to "
                        f"{max(total - 1, 0)}.")
    if limit is not None and limit < 1:
        raise ToolError(f"limit must be at least 1 (got {limit}).")
    widest = page_header(ref, total, total, total + 1)  # the longer "next offset" form
    room = max(1, _boundary.max_result_length - len(widest) - 1)
    size = room if limit is None else min(limit, room)
    end = min(total, offset + size)
    return page_header(ref, offset, end, total) + "\n" + text[offset:end]


def recall(query: str, *, _ctx: ToolContext) -> str:
    if not query.strip():
        raise ToolError("Give a few keywords to search for, e.g. query='missing values revenue'.")
    # Earlier recall and read_ref outputs are copies of other archive entries: skip them.
    hits = [hit for hit in _ctx.store.search_archive(_ctx.session_id, query, limit=RECALL_LIMIT * 3)
            if hit.tool_name not in COPY_TOOLS][:RECALL_LIMIT]
    if not hits:
        return f"No archived message matches {query!r}."
    lines = [f"{len(hits)} archived {'match' if len(hits) == 1 else 'matches'} for {query!r}, "
             "best first (read one in full with read_ref):"]
    for number, hit in enumerate(hits, start=1):
        source = f"tool {hit.tool_name}" if hit.tool_name else hit.role
        excerpt = " ".join(hit.excerpt.split())
        if len(excerpt) > EXCERPT_CHARS:
            excerpt = excerpt[:EXCERPT_CHARS - 1] + "…"
        lines.append(f"{number}. turn {hit.turn}, {source}, ref {hit.ref}: {excerpt}")
    return "\n".join(lines)


def tools() -> list[Tool]:
    return [
        Tool(name="read_ref", description=(
                 "Read archived content back by its ref (shown where a result was cut or in "
                 "recall results), one page at a time from `offset`."),
             parameters={"type": "object", "properties": {
                 "ref": {"type": "string", "description": "e.g. arc:<session>:<number>"},
                 "offset": {"type": "integer",
                            "description": "First character to read; default 0."},
                 "limit": {"type": "integer",
                           "description": "Characters to read; default a full page."}},
                 "required": ["ref"]},
             func=read_ref, inline=True,
             boundary=ToolBoundary(max_result_rows=1_000_000, max_result_length=8000,
                                   summary_mode="none")),
        Tool(name="recall", description=(
                 f"Search this session's archive (every earlier message and full tool result) by "
                 f"keywords; returns at most {RECALL_LIMIT} excerpts with their turn and ref."),
             parameters={"type": "object", "properties": {"query": {"type": "string"}},
                         "required": ["query"]},
             func=recall, inline=True,
             boundary=ToolBoundary(max_result_length=4000, keep_last=1)),
    ]
