"""compress_context (feature C13): the model may ask for a compaction when the config allows it.

Compaction only ever runs at the start of an iteration, before a request; the tool
therefore schedules it through the agent state and the loop carries it out next turn.
"""
from __future__ import annotations

from typing import Any

from agents.tools.base import Tool, ToolBoundary


def compress_context(instructions: str = "", *, _state: dict[str, Any]) -> str:
    _state["compaction_request"] = instructions.strip()
    focus = f" with focus: {instructions.strip()}" if instructions.strip() else ""
    return ("Compaction scheduled: older turns will be summarised into the structured summary "
            f"before your next call{focus}. Every raw message stays readable with recall/read_ref.")


def tools() -> list[Tool]:
    return [Tool(
        name="compress_context",
        description=("Summarise older turns now to free context (they stay in the archive). "
                     "Optionally say what the summary must focus on."),
        parameters={"type": "object", "properties": {
            "instructions": {"type": "string", "description": "What the summary must keep."}}},
        func=compress_context, inline=True, boundary=ToolBoundary(max_result_length=400))]
