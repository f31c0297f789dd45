"""Which tool calls wait for a person before they act (feature T11).

A call is *ask-first* when the session's `AskFirst` names its tool, when the tool object
says so itself (`Tool.ask_first`: the hook a tool source uses to mark all of its tools),
or when the session asks before writes (`AskFirst.writes`) and the tool is `write_file` or
is marked `destructive` (it deletes or overwrites). The loop's side of the wait is
agents/loop/approvals.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents.tools.base import Tool

# The built-in tools that change files: asked before when a session asks before writes.
WRITING_TOOLS = frozenset({"write_file"})


@dataclass(frozen=True)
class AskFirst:
    """Which tool calls wait for a person (feature T11)."""

    tools: frozenset[str] = frozenset()  # tool names always asked
    writes: bool = False  # also write_file and every tool marked destructive

    @classmethod
    def of(cls, tools: Any = (), writes: bool = False) -> AskFirst:
        return cls(tools=frozenset(str(name) for name in tools or ()), writes=bool(writes))

    def asks(self, name: str, tool: Tool | None) -> bool:
        if name == "delegate":  # a sub-agent asks before its own tools act, with these rules
            return False
        if name in self.tools:
            return True
        if tool is not None and tool.ask_first:
            return True
        return self.writes and (name in WRITING_TOOLS or bool(tool is not None
                                                              and tool.destructive))

    def __bool__(self) -> bool:
        return bool(self.tools) or self.writes
