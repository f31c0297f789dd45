"""ToolRegistry.run never raises: bad calls and bad outputs all become bounded outcomes."""
from __future__ import annotations

import base64
import json
import threading

import pytest

from agents.config import ContextConfig
from agents.events import EventType
from agents.tools.base import Tool, ToolBoundary, ToolContext, ToolError
from agents.tools.registry import ToolRegistry, default_registry

NO_ARGS = {"type": "object", "properties": {}}


def registry_with(func, *, parameters=None, boundary=None, timeout_s=20.0, name="t",
                  inline=False) -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(Tool(name=name, description="test tool", parameters=parameters or NO_ARGS,
                           func=func, boundary=boundary or ToolBoundary(), timeout_s=timeout_s,
                           inline=inline))
    return registry


def test_unknown_tool_is_a_clear_error(ctx):
    outcome = registry_with(lambda: "x").run("nope", "{}", ctx)
    assert outcome.error == "Unknown tool 'nope'. Available tools: t."
    assert outcome.content == "Error: Unknown tool 'nope'. Available tools: t."
    assert outcome.ref is not None


ECHO = {"type": "object", "properties": {"n": {"type": "integer"}, "s": {"type": "string"}},
        "required": ["n"]}


@pytest.mark.parametrize("arguments, message", [
    ("{n: 1", "The arguments for t are not valid JSON (Expecting property name enclosed in "
              "double quotes). Send one JSON object, e.g. {\"n\": 1}."),
    ("[1, 2]", "The arguments for t must be a JSON object, not list; e.g. {\"n\": 1}."),
    ("{}", "Missing required argument 'n' for t; e.g. {\"n\": 1}."),
    ('{"n": 1, "x": 2}', "Unknown argument 'x' for t; it takes: n, s."),
    ('{"n": "ten"}', "Argument 'n' of t must be an integer (got \"ten\")."),
    ('{"n": 1, "_ctx": 5}', "Unknown argument '_ctx' for t; it takes: n, s."),
    ("[" * 10_000 + "]" * 10_000, "The arguments for t are not valid JSON (nested too deeply). "
                                  "Send one JSON object, e.g. {\"n\": 1}."),
])
def test_bad_arguments_are_clear_errors(ctx, arguments, message):
    registry = registry_with(lambda n, s="": f"{n}{s}", parameters=ECHO)
    outcome = registry.run("t", arguments, ctx)
    assert outcome.error == message
    assert outcome.content == "Error: " + message


def test_numeric_strings_are_coerced_and_empty_arguments_mean_none(ctx):
    registry = registry_with(lambda n, s="": f"{n + 1}{s}", parameters=ECHO)
    assert registry.run("t", '{"n": "41"}', ctx).content == "42"
    no_args = registry_with(lambda: "ok")
    assert no_args.run("t", "", ctx).content == "ok"


def test_hidden_parameters_are_injected_and_not_in_schema(ctx):
    seen = {}

    def tool(n, *, _ctx: ToolContext, _state, _boundary):
        seen.update(ctx=_ctx, state=_state, boundary=_boundary)
        return "ok"

    params = {"type": "object", "properties": {"n": {"type": "integer"},
                                                "_ctx": {"type": "object"}}, "required": ["n", "_ctx"]}
    registry = registry_with(tool, parameters=params, boundary=ToolBoundary(max_result_length=777))
    schema = registry.schemas()[0]["function"]["parameters"]
    assert schema == {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert registry.run("t", '{"n": 1}', ctx).content == "ok"
    assert seen["ctx"] is ctx and seen["state"] is ctx.state
    assert seen["boundary"].max_result_length == 777


def test_registration_rejects_mistakes():
    registry = registry_with(lambda: "x")
    with pytest.raises(ValueError, match="already registered"):
        registry.register(Tool(name="t", description="", parameters=NO_ARGS, func=lambda: "x"))
    with pytest.raises(ValueError, match="must be 1-64"):
        registry.register(Tool(name="has space", description="", parameters=NO_ARGS,
                               func=lambda: "x"))
    with pytest.raises(ValueError, match=r"schema arguments \['n', 's'\] are not parameters"):
        registry.register(Tool(name="u", description="", parameters=ECHO, func=lambda: "x"))


def test_a_raising_tool_becomes_an_error_with_its_traceback_archived(ctx, store):
    def broken():
        raise KeyError("region")

    outcome = registry_with(broken).run("t", "{}", ctx)
    assert outcome.error == "t failed: KeyError: 'region'"
    archived = store.read_ref("s1", outcome.ref)
    assert archived.startswith("t failed: KeyError: 'region'\n\nTraceback")
    assert "in broken" in archived


def test_a_tool_error_is_shown_as_written(ctx):
    def refuses():
        raise ToolError("Give a path.")

    assert registry_with(refuses).run("t", "{}", ctx).content == "Error: Give a path."


def test_system_exit_in_a_tool_does_not_stop_the_session(ctx):
    def exits():
        raise SystemExit(3)

    outcome = registry_with(exits).run("t", "{}", ctx)
    assert outcome.error == "t failed: SystemExit: 3"


def test_a_hanging_tool_is_abandoned_after_its_timeout(ctx):
    release = threading.Event()
    registry = registry_with(lambda: release.wait(30) and "late", timeout_s=0.05)
    try:
        outcome = registry.run("t", "{}", ctx)
    finally:
        release.set()
    assert outcome.error == ("t did not finish within 0.05 s and was abandoned; any later "
                             "result is discarded. Try a smaller request.")


def test_ten_megabytes_of_text_are_bounded_and_archived_in_full(ctx, store, sink):
    text = "".join(f"line {i}\n" for i in range(1_200_000))
    assert len(text) > 10_000_000
    outcome = registry_with(lambda: text).run("t", "{}", ctx)
    assert outcome.error is None and outcome.truncated
    assert len(outcome.content) <= ToolBoundary().max_result_length
    assert outcome.original_chars == len(text) and outcome.kept_chars == len(outcome.content)
    assert store.read_ref("s1", outcome.ref) == text
    assert outcome.content.startswith("line 0\nline 1\n")
    assert outcome.content.endswith("line 1199999\n")
    offload = sink.of_type(EventType.OFFLOAD)
    assert [e.payload for e in offload] == [{"ref": outcome.ref, "kind": "tool_result",
                                            "chars": len(text), "tool": "t"}]
    assert offload[0].turn == 4 and offload[0].session_id == "s1"


def test_binary_bytes_are_archived_exactly_and_described(ctx, store):
    raw = bytes(range(256)) * 40
    outcome = registry_with(lambda: raw).run("t", "{}", ctx)
    assert outcome.truncated and outcome.error is None
    assert outcome.content.startswith(
        f"Binary output: 10240 bytes that are not clean UTF-8 text (invalid bytes or NUL "
        f"characters); the exact bytes are archived as base64 at {outcome.ref} — read them with "
        f'read_ref(ref="{outcome.ref}", offset=0).\nFirst bytes (hex): 00 01 02 03')
    assert base64.b64decode(store.read_ref("s1", outcome.ref)) == raw


def test_invalid_utf8_keeps_a_readable_preview(ctx, store):
    raw = "Umsatz Köln: 12 €\n".encode("latin-1", errors="replace") * 3
    outcome = registry_with(lambda: raw).run("t", "{}", ctx)
    assert "Preview (invalid bytes shown as \ufffd): Umsatz K\ufffdln: 12 ?" in outcome.content
    assert base64.b64decode(store.read_ref("s1", outcome.ref)) == raw


def test_text_with_lone_surrogates_or_nul_is_kept_lossless(ctx, store):
    broken = b"abc\xff\xfedef".decode("utf-8", errors="surrogateescape")
    outcome = registry_with(lambda: broken).run("t", "{}", ctx)
    assert base64.b64decode(store.read_ref("s1", outcome.ref)) == b"abc\xff\xfedef"
    with_nul = registry_with(lambda: "total revenue\x00 4.2M EUR").run("t", "{}", ctx)
    assert base64.b64decode(store.read_ref("s1", with_nul.ref)) == b"total revenue\x00 4.2M EUR"
    assert with_nul.content.endswith(
        "Preview (invalid bytes shown as \ufffd): total revenue\\x00 4.2M EUR")
    short_nul = registry_with(lambda: "a\x00b").run("t", "{}", ctx)
    assert short_nul.content.endswith("First bytes (hex): 61 00 62")


def test_clean_utf8_bytes_are_text(ctx):
    assert registry_with(lambda: "Grüße 数据".encode()).run("t", "{}", ctx).content == "Grüße 数据"


def test_ten_thousand_levels_of_nested_json_do_not_recurse(ctx, store):
    deep: list = []
    for _ in range(10_000):
        deep = [deep]
    outcome = registry_with(lambda: {"data": deep}).run("t", "{}", ctx)
    assert outcome.error is None and outcome.truncated
    assert len(outcome.content) <= ToolBoundary().max_result_length
    archived = store.read_ref("s1", outcome.ref)
    assert archived == '{"data": ' + "[" * 10_001 + "]" * 10_001 + "}"


def test_cycles_and_odd_objects_serialise(ctx):
    loop: dict = {"name": "a"}
    loop["self"] = loop
    outcome = registry_with(lambda: {"loop": loop, "when": {1, 2}, "raw": b"\x00"}).run("t", "{}", ctx)
    assert outcome.content == ('{"loop": {"name": "a", "self": "<cycle>"}, "when": [1, 2], '
                               '"raw": "base64:AA=="}')


def test_list_of_dicts_is_a_table(ctx):
    rows = [{"region": "East", "revenue": 10}, {"region": "West", "revenue": 7.5, "note": "x"}]
    outcome = registry_with(lambda: rows).run("t", "{}", ctx)
    assert outcome.content == "region,revenue,note\nEast,10,\nWest,7.5,x"


def test_tool_result_limit_caps_every_tool(ctx):
    # The limit is in tokens; tools bound characters at 4 a token, the engine exact tokens.
    registry = default_registry(ContextConfig(tool_result_limit=500))
    for name in registry.names():
        assert registry.boundary(registry.get(name)).max_result_length <= 2000
    assert registry.boundary(registry.get("fetch_document")).max_result_length == 2000
    outcome = registry.run("fetch_document", '{"tokens": 2000, "topic": "grid storage"}', ctx)
    assert outcome.truncated and len(outcome.content) <= 2000


def test_a_failing_store_still_yields_an_outcome(ctx):
    class BrokenStore:
        def archive(self, *args, **kwargs):
            raise OSError("disk full")

    ctx.store = BrokenStore()
    outcome = registry_with(lambda: "x").run("t", "{}", ctx)
    assert outcome.error == "The tool layer failed while handling 't': OSError: disk full"


def test_every_result_is_archived_with_its_call(ctx, store, sink):
    registry = registry_with(lambda n, s="": f"{n}{s}", parameters=ECHO)
    outcome = registry.run("t", json.dumps({"n": 5, "s": "x"}), ctx)
    row = store.archived_rows("s1")[-1]
    assert outcome.ref == "arc:s1:1" and not outcome.truncated
    assert sink.of_type(EventType.OFFLOAD) == []  # archived, but nothing left the context
    assert row == {"turn": 4, "role": "tool", "content": "5x", "tool_name": "t",
                   "tool_args": {"n": 5, "s": "x"}, "tokens": 0}


def test_default_registry_lists_every_tool():
    assert default_registry().names() == [
        "TaskCreate", "TaskList", "TaskGet", "TaskUpdate", "notes", "read_ref", "recall",
        "list_files", "read_file", "write_file", "csv_describe", "csv_group_aggregate",
        "csv_top_k", "csv_load", "sql_query", "fetch_document"]
    for schema in default_registry().schemas():
        assert not any(k.startswith("_") for k in schema["function"]["parameters"]["properties"])
