"""read_ref pages a ref back in full; recall finds archived content (features T4, C11)."""
from __future__ import annotations

import json
import re

from agents.events import EventType
from agents.tools.base import Tool, ToolBoundary
from agents.tools.offload import Offloader, RawToolResult, render_messages
from agents.tools.registry import ToolRegistry, default_registry

PAGE = re.compile(r"^\[(?P<ref>[^:]+:[^:]+:\d+): chars (?P<start>\d+)-(?P<end>\d+) of "
                  r"(?P<total>\d+); (?:next offset (?P<next>\d+)|end of result)\]\n")


def test_the_full_raw_result_reads_back_page_by_page(ctx, store, call):
    big = "".join(f"row {i}: revenue {i * 7} EUR\n" for i in range(20_000))
    registry = default_registry()
    registry.register(Tool(name="big", description="", parameters={"type": "object",
                                                                   "properties": {}},
                           func=lambda: big, boundary=ToolBoundary(max_result_length=2000)))
    outcome = registry.run("big", "{}", ctx)
    assert outcome.truncated and len(outcome.content) <= 2000
    offset = int(re.search(r"offset=(\d+)\)", outcome.content).group(1))
    pieces, pages = [big[:offset]], 0
    read_ref_limit = registry.boundary(registry.get("read_ref")).max_result_length
    while offset is not None:
        page = registry.run("read_ref", json.dumps({"ref": outcome.ref, "offset": offset}), ctx)
        assert page.error is None and not page.truncated
        assert len(page.content) <= read_ref_limit
        header = PAGE.match(page.content)
        assert header and int(header["start"]) == offset and int(header["total"]) == len(big)
        pieces.append(page.content[header.end():])
        offset = int(header["next"]) if header["next"] else None
        pages += 1
    assert "".join(pieces) == big
    assert pages > 50


def test_read_ref_page_format_and_limit(ctx, store, call):
    ref = store.archive("s1", 2, "tool", "abcdefghij")
    assert call("read_ref", ref=ref, offset=2, limit=3).content == \
        f"[{ref}: chars 2-5 of 10; next offset 5]\ncde"
    assert call("read_ref", ref=ref, offset=5).content == f"[{ref}: chars 5-10 of 10; end of result]\nfghij"


def test_read_ref_errors(ctx, store, call):
    ref = store.archive("s1", 2, "tool", "abc")
    assert call("read_ref", ref="arc:other:1").error == (
        "Unknown ref 'arc:other:1'. Use a ref exactly as shown in a cut result or a recall "
        "excerpt, e.g. arc:<session>:<number>.")
    assert call("read_ref", ref=ref, offset=3).error == f"offset 3 is outside {ref} (3 chars); use 0 to 2."
    assert call("read_ref", ref=ref, limit=0).error == "limit must be at least 1 (got 0)."


def test_read_ref_reads_binary_as_base64(ctx, call):
    registry = ToolRegistry()
    registry.register(Tool(name="bin", description="", parameters={"type": "object", "properties": {}},
                           func=lambda: b"\xff\x00\xfe"))
    ref = registry.run("bin", "{}", ctx).ref
    assert call("read_ref", ref=ref).content == f"[{ref}: chars 0-4 of 4; end of result]\n/wD+"


def test_recall_lists_at_most_five_excerpts_with_turn_and_ref(ctx, store, call):
    for turn in range(1, 8):
        store.archive("s1", turn, "tool", f"Revenue East turn {turn}: missing values 4 of 460",
                      tool_name="csv_describe")
    store.archive("s1", 9, "user", "The report must include a table.")
    outcome = call("recall", query="missing values")
    lines = outcome.content.split("\n")
    assert lines[0] == "5 archived matches for 'missing values', best first (read one in full with read_ref):"
    assert len(lines) == 6
    assert lines[1] == ("1. turn 7, tool csv_describe, ref arc:s1:7: Revenue East turn 7: missing "
                        "values 4 of 460")
    assert call("recall", query="table").content == (
        "1 archived match for 'table', best first (read one in full with read_ref):\n"
        "1. turn 9, user, ref arc:s1:8: The report must include a table.")


def test_recall_skips_its_own_earlier_output(call, store):
    store.archive("s1", 1, "tool", "East revenue fell 13.5%", tool_name="sql_query")
    assert call("recall", query="East revenue").content.count("\n") == 1
    second = call("recall", query="East revenue")  # the first recall output is archived too
    assert second.content == (
        "1 archived match for 'East revenue', best first (read one in full with read_ref):\n"
        "1. turn 1, tool sql_query, ref arc:s1:1: East revenue fell 13.5%")


def test_recall_without_matches_or_query(call):
    assert call("recall", query="nothing here").content == "No archived message matches 'nothing here'."
    assert call("recall", query="  ").error == (
        "Give a few keywords to search for, e.g. query='missing values revenue'.")


def test_offloader_archives_context_and_announces_it(store, sink):
    offloader = Offloader(store, sink)
    msgs = [{"role": "user", "content": "Budget at most 50k tokens."},
            {"role": "assistant", "content": "",
             "tool_calls": [{"id": "c1", "function": {"name": "csv_describe",
                                                      "arguments": '{"path": "sales.csv"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "460 rows"}]
    ref = offloader.offload_context("s1", msgs, turn=6)
    text = store.read_ref("s1", ref)
    assert text == render_messages(msgs) == (
        "--- message 1: user ---\nBudget at most 50k tokens.\n"
        "--- message 2: assistant ---\n\ntool call c1: csv_describe({\"path\": \"sales.csv\"})\n"
        "--- message 3: tool (c1) ---\n460 rows")
    assert store.archived_rows("s1")[-1]["role"] == "context"
    event = sink.of_type(EventType.OFFLOAD)[-1]
    assert event.payload == {"ref": ref, "kind": "context", "chars": len(text), "messages": 3}
    assert event.turn == 6


def test_offloader_tool_result(store, sink):
    offloader = Offloader(store, sink)
    ref = offloader.offload_tool_result("s1", RawToolResult("read_file", {"path": "a"}, "x" * 50,
                                                            turn=3))
    assert store.read_ref("s1", ref) == "x" * 50
    assert store.archived_rows("s1")[-1]["tool_args"] == {"path": "a"}
    assert sink.of_type(EventType.OFFLOAD)[-1].payload == {
        "ref": ref, "kind": "tool_result", "chars": 50, "tool": "read_file"}
    plain = offloader.offload_tool_result("s1", "raw text", turn=2)
    assert store.read_ref("s1", plain) == "raw text"
