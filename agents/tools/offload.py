"""The Offloader (feature C11): move content out of the context into the archive, keep a ref.

`offload_context` takes the messages a compaction removes, `offload_tool_result` a tool
result that was cut. Both archive the full content through the Store (append-only, in the
database) and return the ref that replaces it in context; the model reads it back with
the read_ref tool, a person in the drawer. Each offload is announced as an OFFLOAD event.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agents.events import EventSink, Offload
from agents.store.interface import Store


@dataclass
class RawToolResult:
    """One tool call's full output as it goes into the archive."""

    tool_name: str
    tool_args: dict[str, Any]
    text: str  # the full text; "" when the output is binary
    raw_bytes: bytes | None = None  # exact bytes of a binary output
    turn: int = 0


def render_messages(msgs: list[dict[str, Any]]) -> str:
    """Chat messages as readable text, one block per message, nothing dropped."""
    blocks = []
    for number, msg in enumerate(msgs, start=1):
        role = str(msg.get("role", "?"))
        name = msg.get("name") or msg.get("tool_call_id")
        head = f"--- message {number}: {role}" + (f" ({name})" if name else "") + " ---"
        content = msg.get("content")
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False, default=str)
        lines = [head, content]
        for call in msg.get("tool_calls") or ():
            fn = call.get("function", {}) if isinstance(call, dict) else {}
            lines.append(f"tool call {call.get('id', '')}: {fn.get('name', '')}"
                         f"({fn.get('arguments', '')})")
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


class Offloader:
    def __init__(self, store: Store, events: EventSink | None = None) -> None:
        self.store = store
        self.events = events

    def archive_tool_result(self, session_id: str, result: RawToolResult) -> str:
        """Archive a tool's full output without announcing it (every result is archived)."""
        return self.store.archive(session_id, result.turn, "tool", result.text,
                                  tool_name=result.tool_name, tool_args=result.tool_args,
                                  tokens=0, raw_bytes=result.raw_bytes)

    def offload_tool_result(self, session_id: str, result: RawToolResult | str, *,
                            turn: int = 0) -> str:
        """Archive a tool result whose content leaves the context; return its ref."""
        if isinstance(result, str):
            result = RawToolResult(tool_name="", tool_args={}, text=result, turn=turn)
        ref = self.archive_tool_result(session_id, result)
        size = len(result.text) if result.raw_bytes is None else len(result.raw_bytes)
        self.announce(session_id, ref, "tool_result", size, result.turn,
                      tool=result.tool_name)
        return ref

    def offload_context(self, session_id: str, msgs: list[dict[str, Any]], *,
                        turn: int = 0) -> str:
        """Archive messages a compaction removes from the context, as one entry; return its ref."""
        text = render_messages(msgs)
        ref = self.store.archive(session_id, turn, "context", text, tokens=0)
        self.announce(session_id, ref, "context", len(text), turn, messages=len(msgs))
        return ref

    def announce(self, session_id: str, ref: str, kind: str, chars: int, turn: int,
                 **extra: Any) -> None:
        """Emit the OFFLOAD event for content that left the context."""
        if self.events is None:
            return
        self.events.emit(Offload(ref=ref, kind=kind, chars=chars, **extra, turn=turn,
                                 session_id=session_id))
