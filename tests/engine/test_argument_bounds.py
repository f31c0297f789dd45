"""A runaway answer cannot hold a single-slot local server (output reserve, C1).

llama-cpp-python writes a chosen tool's arguments without max_tokens and notices no closed
connection on such a request; what ends them is the grammar it builds from the tool
schemas, and the stop sequences it honours between calls. The fake server (chatml_server)
does what that server does with them; the real server is checked by
tests/real_model/test_runaway_bound.py."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from agents.config import ContextConfig, ModelProfile
from agents.context.budget import plan_budget
from agents.events import EventType, ListSink
from agents.loop.spec import SessionSpec
from agents.provider.argument_bounds import (CHARS_PER_TOKEN, MAX_CHARS, MAX_ITEMS, MIN_CHARS,
                                             argument_at_bound, bound_schemas, call_stops)
from agents.runner import run_session
from agents.store.memory import MemoryStore
from agents.tools import default_registry

from .chatml_server import ChatmlServer
from .test_weak_requests import GOAL, part


def session(script: list, *, local: bool = True, max_turns: int = 4):
    sink = ListSink()
    with ChatmlServer(script) as server, tempfile.TemporaryDirectory() as tmp:
        for i in range(2):
            Path(tmp, f"part{i}.txt").write_text(part(i))
        profile = ModelProfile(name="local", model="smollm2-fake", api_key_env="",
                               context_size=4096, base_url=server.base_url, local=local,
                               server_tokenizer=True, tool_results_as_user=True,
                               tool_free_summaries=True, single_system_message=True)
        run = run_session(SessionSpec.plan(goal=GOAL, scenario=None, profile=profile,
                                           config=ContextConfig(max_turns=max_turns),
                                           tools=["list_files", "read_file"]),
                          session_id="bounds", store=MemoryStore(), events=sink,
                          workspace=Path(tmp))
    return run, server, sink


def strings(schema: dict, times: int = 1) -> list[tuple[int, dict]]:
    """Every string schema under `schema`, with how many of it one call may hold."""
    found = []
    if schema.get("type") == "string":
        found.append((times, schema))
    for sub in (schema.get("properties") or {}).values():
        found += strings(sub, times)
    if isinstance(schema.get("items"), dict):
        found += strings(schema["items"], times * schema["maxItems"])
    return found


def test_every_argument_of_every_tool_is_bounded_to_about_the_reserve():
    schemas = default_registry().schemas()
    before = json.dumps(schemas)
    bounded = bound_schemas(schemas, 512)
    assert json.dumps(schemas) == before  # the registry's own schemas are left alone
    chars = min(MAX_CHARS, 512 * CHARS_PER_TOKEN)
    for tool in bounded:
        parameters = tool["function"]["parameters"]
        found = strings(parameters)
        free = [(n, s) for n, s in found if "enum" not in s]
        assert all(MIN_CHARS <= s["maxLength"] <= chars for _, s in free), (tool, free)
        # One call's strings together stay within the reserve, but for the floor of
        # MIN_CHARS each field keeps (a path or an id always fits).
        total = sum(n * s["maxLength"] for n, s in free)
        assert total <= chars + MIN_CHARS * len(free), (tool["function"]["name"], total)
        for sub in (parameters.get("properties") or {}).values():
            if sub.get("type") == "array":
                assert sub["maxItems"] <= MAX_ITEMS
            if sub.get("type") == "object":  # free-form: no key the grammar could repeat
                assert sub["properties"] == {} and sub["additionalProperties"] is False
        enums = [s for _, s in found if "enum" in s]
        assert all("maxLength" not in s for s in enums)
    read_file = next(t for t in bounded if t["function"]["name"] == "read_file")
    assert read_file["function"]["parameters"]["properties"]["path"]["maxLength"] == chars


def test_an_argument_at_its_bound_is_found_and_one_under_it_is_not():
    bounded = bound_schemas(default_registry().schemas(), 100)
    limit = 100 * CHARS_PER_TOKEN // 2  # write_file shares the reserve between path and content
    assert argument_at_bound(bounded, "write_file",
                             json.dumps({"path": "a.txt", "content": "x" * limit})) \
        == ("content", limit)
    assert argument_at_bound(bounded, "write_file",
                             json.dumps({"path": "a.txt", "content": "x" * (limit - 1)})) is None
    assert argument_at_bound(bounded, "no_such_tool", "{}") is None
    assert argument_at_bound(bounded, "write_file", "{not json") is None
    assert call_stops(bounded[:2]) == [f"functions.{t['function']['name']}:"
                                       for t in bounded[:2]]


def test_a_looping_argument_on_a_local_server_is_closed_by_the_grammar_and_not_run():
    """Before: the runaway filled the window (the server held its slot that long) and came
    back refused. Now the server's grammar closes the string at its maxLength; the call is
    refused as cut at the reserve (output_overflow), not run, and the session goes on."""
    script = [("tool", "list_files", {}), ("runaway", "read_file"),
              ("tool", "read_file", {"path": "part0.txt"}), "answer"]
    run, server, sink = session(script)
    assert server.refused == []  # no request ran to the end of the window
    first = server.requests[0]["body"]
    reserve = plan_budget(4096, ContextConfig()).reserve
    path = next(t for t in first["tools"] if t["function"]["name"] == "read_file")[
        "function"]["parameters"]["properties"]["path"]
    assert path["maxLength"] == min(MAX_CHARS, reserve * CHARS_PER_TOKEN)
    assert first["stop"] == ["functions.list_files:", "functions.read_file:"]
    calls = [e.payload for e in sink.of_type(EventType.MODEL_CALL)]
    [cut] = [c for c in calls if c.get("refused")]
    assert cut["overflow"] == "output" and not cut["over_window"], cut
    errors = [e.payload for e in sink.of_type(EventType.ERROR)
              if e.payload["code"] == "output_overflow"]
    assert errors and "read_file call was cut at the output reserve: its argument 'path' " \
                      f"reached the {path['maxLength']} characters" in errors[0]["message"]
    ran = [(e.payload["name"], e.payload["args"]) for e in sink.of_type(EventType.TOOL_CALL)]
    assert ("read_file", '{"path": "part0.txt"}') in ran
    assert all(len(args) < 200 for _, args in ran)  # the cut call never ran


def test_a_reply_ends_after_its_first_call_on_a_local_server():
    script = [("tools", [("list_files", {}), ("list_files", {}), ("list_files", {})]),
              "answer"]
    run, server, sink = session(script, max_turns=2)
    first_turn = [e.payload for e in sink.of_type(EventType.TOOL_CALL) if e.turn == 0]
    assert len(first_turn) == 1


def test_a_profile_that_is_not_local_is_sent_its_schemas_as_they_are():
    script = [("tools", [("list_files", {}), ("list_files", {})]), "answer"]
    run, server, sink = session(script, local=False, max_turns=2)
    first = server.requests[0]["body"]
    assert "stop" not in first
    assert all("maxLength" not in json.dumps(t) for t in first["tools"])
    assert len([e for e in sink.of_type(EventType.TOOL_CALL) if e.turn == 0]) == 2


def test_no_bound_exceeds_what_the_llama_cpp_grammar_parser_takes():
    """An 8k window's reserve (1000 tokens) asked for 3000 characters: llama.cpp's grammar
    parser refuses a string bound past about 1000 and llama-cpp-python's server died on the
    first request."""
    for schema in bound_schemas(default_registry().schemas(), 1000):
        for prop in schema["function"]["parameters"].get("properties", {}).values():
            assert prop.get("maxLength", 0) <= MAX_CHARS <= 1000, (schema, prop)
