"""Tools from MCP servers (T10): the test server (tests/tools/mcp_fixture_server.py, built
with the `mcp` SDK) run as a real process over stdio and over Streamable HTTP, its tools
called through the real registry, and every fault it can make a tool error the model sees.

Starting a Python MCP server takes seconds on a busy machine: each source is opened once
per module, and its start timeout is generous; no assertion here is about time.
"""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents.events import EventType
from agents.tools.registry import ToolRegistry
from agents.toolsources.offered import SourceSet
from agents.toolsources.spec import HTTP, SourceSpec, ToolSettings

SERVER = str(Path(__file__).with_name("mcp_fixture_server.py"))
START_S = 120.0  # generous: the machine may be busy; a silent server is timed apart


def stdio_spec(mode: str = "", **settings) -> SourceSpec:
    settings.setdefault("start_timeout_s", START_S)
    settings.setdefault("call_timeout_s", 300.0)
    return SourceSpec(name="fx", command=sys.executable,
                      args=[SERVER, *(["--mode", mode] if mode else [])], **settings)


def registry_of(sources: SourceSet) -> ToolRegistry:
    registry = ToolRegistry()
    for tool in sources.tools:
        registry.register(tool)
    return registry


def run(registry, ctx, tool_name, **args):
    return registry.run(tool_name, json.dumps(args), ctx)


@pytest.fixture(scope="module")
def stdio_workspace(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("mcp-workspace")


@pytest.fixture(scope="module")
def stdio_sources(stdio_workspace):
    monkey = pytest.MonkeyPatch()
    monkey.setenv("FX_ALLOWED", "passed by name")
    monkey.setenv("FX_SECRET", "never passed")
    # Generous for every call (10 MB takes a while on a busy machine), short for the one
    # that hangs: a per-tool timeout.
    spec = stdio_spec(env_allow=["FX_ALLOWED"], call_timeout_s=300.0,
                      defaults=ToolSettings(max_result_length=3000),
                      tools={"huge": ToolSettings(max_result_length=1500),
                             "hang": ToolSettings(call_timeout_s=8.0)})
    sources = SourceSet.open([spec], stdio_workspace, taken={"read_file"})
    yield sources
    sources.close()
    monkey.undo()


@pytest.fixture
def stdio_ctx(ctx, stdio_workspace):
    ctx.workspace = stdio_workspace
    return ctx


def test_stdio_source_lists_its_tools_under_its_prefix(stdio_sources):
    assert stdio_sources.warnings == []
    names = [tool.name for tool in stdio_sources.tools]
    assert {"fx__add", "fx__echo", "fx__huge", "fx__crash", "fx__hang"} <= set(names)
    add = next(tool for tool in stdio_sources.tools if tool.name == "fx__add")
    schema = add.schema()["function"]
    assert schema["parameters"]["required"] == ["a", "b"]
    assert schema["description"].startswith("[fx] Add two numbers")
    assert stdio_sources.schema_tokens()["fx"] > 0


def test_a_call_runs_in_the_workspace_with_only_the_allowed_environment(
        stdio_sources, stdio_ctx, stdio_workspace):
    registry = registry_of(stdio_sources)
    assert run(registry, stdio_ctx, "fx__add", a=2, b=40).content == "42"
    assert Path(run(registry, stdio_ctx, "fx__where").content) == stdio_workspace
    assert run(registry, stdio_ctx, "fx__env_value", name="FX_ALLOWED").content == \
        "passed by name"
    assert run(registry, stdio_ctx, "fx__env_value", name="FX_SECRET").content == "(unset)"


def test_a_10_mb_result_is_bounded_and_archived_whole(stdio_sources, stdio_ctx, store, sink):
    outcome = run(registry_of(stdio_sources), stdio_ctx, "fx__huge", megabytes=10)
    assert outcome.error is None and outcome.truncated
    assert outcome.original_chars > 10_000_000
    assert len(outcome.content) <= 1500  # the per-tool override, not the source's 3000
    archived = store.archived_rows("s1")[-1]
    assert archived["tool_name"] == "fx__huge" and len(archived["content"]) > 10_000_000
    assert sink.of_type(EventType.OFFLOAD)[-1].payload["tool"] == "fx__huge"


def test_binary_content_is_archived_and_described(stdio_sources, stdio_ctx):
    registry = registry_of(stdio_sources)
    image = run(registry, stdio_ctx, "fx__image")
    assert image.error is None and "binary" in image.content.lower()
    mixed = run(registry, stdio_ctx, "fx__mixed")
    assert "a chart follows" in mixed.content
    assert "[image content, image/png, 8 bytes: not text" in mixed.content


def test_an_error_result_is_a_tool_error(stdio_sources, stdio_ctx):
    outcome = run(registry_of(stdio_sources), stdio_ctx, "fx__fail")
    assert outcome.error.startswith("fail on tool source 'fx' returned an error:")


def test_a_crash_is_a_tool_error_and_the_next_call_starts_the_server_again(
        stdio_sources, stdio_ctx):
    registry = registry_of(stdio_sources)
    starts = stdio_sources.connections["fx"].starts
    outcome = run(registry, stdio_ctx, "fx__crash")
    assert "the server stopped during the call" in outcome.error
    assert "it starts again for the next call" in outcome.error
    assert run(registry, stdio_ctx, "fx__add", a=1, b=1).content == "2"
    assert stdio_sources.connections["fx"].starts == starts + 1


def test_a_hang_times_out_and_the_server_is_started_again(stdio_sources, stdio_ctx):
    registry = registry_of(stdio_sources)
    outcome = run(registry, stdio_ctx, "fx__hang")
    assert "did not answer within 8 s; the call was abandoned" in outcome.error
    assert run(registry, stdio_ctx, "fx__add", a=2, b=3).content == "5"


def test_a_cancel_abandons_a_call_in_flight_and_stops_the_server(stdio_sources, stdio_ctx,
                                                                 store):
    registry = registry_of(stdio_sources)
    starts = stdio_sources.connections["fx"].starts
    store.cancelled.add("s1")  # the drawer's Cancel sets the flag the call reads
    outcome = run(registry, stdio_ctx, "fx__hang")
    assert "was abandoned: the session was cancelled during the call" in outcome.error
    store.cancelled.discard("s1")
    assert run(registry, stdio_ctx, "fx__add", a=1, b=2).content == "3"
    assert stdio_sources.connections["fx"].starts == starts + 1


def test_a_changed_tool_list_is_said_to_the_model(stdio_sources, stdio_ctx):
    registry = registry_of(stdio_sources)
    assert run(registry, stdio_ctx, "fx__drop_echo").content == "echo removed"
    outcome = run(registry, stdio_ctx, "fx__echo", text="hi")
    assert "The server no longer offers 'echo': its tool list changed" in outcome.error


# -- a server that misbehaves as a whole: the run goes on, the person is told ---------------
def test_a_server_that_does_not_start_is_a_warning_with_its_stderr(workspace):
    sources = SourceSet.open([stdio_spec("fail-start")], workspace)
    try:
        assert sources.tools == []
        [warning] = sources.warnings
        assert "could not be started or reached" in warning
        assert "cannot start: missing configuration" in warning
    finally:
        sources.close()


def test_a_command_that_does_not_exist_is_a_warning(workspace):
    spec = SourceSpec(name="nope", command="/no/such/mcp-server", start_timeout_s=START_S)
    sources = SourceSet.open([spec], workspace)
    try:
        assert sources.tools == [] and "could not be started or reached" in sources.warnings[0]
    finally:
        sources.close()


def test_a_server_that_never_answers_initialize_times_out(workspace):
    sources = SourceSet.open([stdio_spec("silent", start_timeout_s=3.0)], workspace)
    try:
        assert sources.tools == []
        assert "did not answer the MCP handshake (initialize) within 3 s" in sources.warnings[0]
    finally:
        sources.close()


def test_garbage_on_stdout_does_not_stop_the_source(workspace, ctx):
    sources = SourceSet.open([stdio_spec("garbage")], workspace)
    try:
        assert "fx__add" in [tool.name for tool in sources.tools]
        assert run(registry_of(sources), ctx, "fx__add", a=1, b=2).content == "3"
    finally:
        sources.close()


@pytest.mark.parametrize("mode, message", [
    ("bad-schema", "its input schema is invalid"),
    ("huge-schema", "over the source's limit of 2000"),
])
def test_a_tool_with_an_invalid_or_huge_schema_is_left_out(workspace, mode, message):
    sources = SourceSet.open([stdio_spec(mode)], workspace)
    try:
        names = [tool.name for tool in sources.tools]
        assert "fx__echo" not in names and "fx__add" in names
        [warning] = sources.warnings
        assert warning.startswith("tool 'echo' of source 'fx' is not offered") and \
            message in warning
    finally:
        sources.close()


def test_ask_first_marks_the_tools_of_a_source_or_one_tool(workspace):
    spec = stdio_spec(tools={"add": ToolSettings(ask_first=True)})
    assert spec.asks_first("add") and not spec.asks_first("echo")
    whole = stdio_spec(ask_first=True, tools={"add": ToolSettings(ask_first=False)})
    assert whole.asks_first("echo") and not whole.asks_first("add")


# -- Streamable HTTP --------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def http_server():
    port = free_port()
    process = subprocess.Popen([sys.executable, SERVER, "--http", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if process.poll() is not None:
                pytest.fail("the HTTP test server exited at start")
            time.sleep(0.2)
    yield process, f"http://127.0.0.1:{port}/mcp"
    process.kill()
    process.wait()


def http_spec(url: str, **settings) -> SourceSpec:
    settings.setdefault("start_timeout_s", START_S)
    return SourceSpec(name="web", kind=HTTP, url=url, **settings)


def test_http_source_lists_calls_bounds_and_sees_a_changed_list(http_server, workspace, ctx,
                                                                  monkeypatch):
    monkeypatch.setenv("FX_TOKEN", "t0ken")
    spec = http_spec(http_server[1], headers={"X-Token": "FX_TOKEN"}, call_timeout_s=300.0,
                     defaults=ToolSettings(max_result_length=2000),
                     tools={"hang": ToolSettings(call_timeout_s=4.0)})
    sources = SourceSet.open([spec], workspace)
    try:
        assert sources.warnings == []
        registry = registry_of(sources)
        assert run(registry, ctx, "web__add", a=20, b=22).content == "42"
        huge = run(registry, ctx, "web__huge", megabytes=10)
        assert huge.truncated and huge.original_chars > 10_000_000 and len(huge.content) <= 2000
        hang = run(registry, ctx, "web__hang", seconds=8)
        assert "did not answer within 4 s" in hang.error
        assert run(registry, ctx, "web__drop_echo").content == "echo removed"
        assert "its tool list changed" in run(registry, ctx, "web__echo", text="x").error
    finally:
        sources.close()


def test_http_header_from_a_missing_variable_is_a_warning(http_server, workspace, monkeypatch):
    monkeypatch.delenv("FX_NO_SUCH_TOKEN", raising=False)
    sources = SourceSet.open([http_spec(http_server[1],
                                        headers={"Authorization": "FX_NO_SUCH_TOKEN"})],
                             workspace)
    try:
        assert sources.tools == []
        assert "no environment variable FX_NO_SUCH_TOKEN" in sources.warnings[0]
    finally:
        sources.close()


def test_http_server_that_crashes_is_a_tool_error(http_server, workspace, ctx):
    # Last in the module: it ends the shared HTTP server.
    sources = SourceSet.open([http_spec(http_server[1], call_timeout_s=300.0)], workspace)
    try:
        registry = registry_of(sources)
        crash = run(registry, ctx, "web__crash")
        assert crash.error and "web" in crash.error
        again = run(registry, ctx, "web__add", a=1, b=1)
        assert again.error and "could not be started or reached" in again.error
    finally:
        sources.close()
