"""An MCP server written for the tests with the official `mcp` SDK, run as a real process.

    python tests/tools/mcp_fixture_server.py [--mode MODE] [--http PORT]

Over stdio by default, over Streamable HTTP with --http. Its tools misbehave on demand
(a huge result, a crash, a hang, an error, binary content, a changed tool list), and
--mode makes the whole server misbehave: `garbage` writes non-JSON lines to stdout first,
`silent` never answers `initialize`, `bad-schema` and `huge-schema` declare a tool whose
input schema is invalid or about 50 000 tokens long, `fail-start` exits at once.
"""
from __future__ import annotations

import argparse
import base64
import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp_types import ImageContent, TextContent

server = MCPServer("taskos-test-server")


@server.tool()
def add(a: float, b: float) -> str:
    """Add two numbers."""
    return f"{a + b:g}"


@server.tool()
def echo(text: str) -> str:
    """Return the text as given."""
    return text


@server.tool()
def env_value(name: str) -> str:
    """The value of an environment variable in the server's process, or '(unset)'."""
    return os.environ.get(name, "(unset)")


@server.tool()
def where() -> str:
    """The server's working folder."""
    return os.getcwd()


@server.tool()
def huge(megabytes: int = 10) -> str:
    """A text result of about `megabytes` MB, numbered lines."""
    line = "row {:08d} " + "x" * 50 + "\n"
    count = megabytes * 1024 * 1024 // len(line.format(0))
    return "".join(line.format(i) for i in range(count))


@server.tool()
def crash() -> str:
    """The server process dies in the middle of the call."""
    os._exit(3)


@server.tool()
def hang(seconds: float = 3600) -> str:
    """Never answers in time (blocks the server's loop, as a stuck tool does)."""
    time.sleep(seconds)
    return "woke up"


@server.tool()
def fail(message: str = "the database is locked") -> str:
    """Raises: the server answers with an error result."""
    raise RuntimeError(message)


@server.tool()
def image() -> list:
    """Binary content: a tiny PNG and no text."""
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(64))).decode()
    return [ImageContent(type="image", data=png, mime_type="image/png")]


@server.tool()
def mixed() -> list:
    """Text and binary content in one result."""
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
    return [TextContent(type="text", text="a chart follows"),
            ImageContent(type="image", data=png, mime_type="image/png")]


@server.tool()
async def drop_echo() -> str:
    """Removes the `echo` tool from the server's list (its tool list changes)."""
    server.remove_tool("echo")
    return "echo removed"


def declare_schema(mode: str) -> None:
    tool = server._tool_manager.get_tool("echo")
    if mode == "bad-schema":
        tool.parameters = {"type": "object", "properties": {"text": {"type": 42}}}
    else:  # huge-schema: ~50 000 tokens of property descriptions
        tool.parameters = {"type": "object", "properties": {
            f"field_{i}": {"type": "string", "description": "a long description " * 10}
            for i in range(1700)}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="")
    parser.add_argument("--http", type=int, default=0)
    args = parser.parse_args()
    if args.mode == "fail-start":
        print("cannot start: missing configuration", file=sys.stderr)
        sys.exit(2)
    if args.mode == "silent":
        for _ in sys.stdin:  # reads every request, answers none
            pass
        time.sleep(3600)
    if args.mode in ("bad-schema", "huge-schema"):
        declare_schema(args.mode)
    if args.mode == "garbage":
        print("Starting the server... this line is not JSON-RPC", flush=True)
        print("{not json either", flush=True)
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run()


if __name__ == "__main__":
    main()
