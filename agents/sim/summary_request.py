"""The summary request that reuses the agent's own prefix (SPEC C17), and how the simulated
model reads it.

The engine asks for a summary by sending the agent's stable prefix (same tools, system
prompt, snapshot, previous summary, the history to fold, all byte-identical, so a provider
bills them as cached) followed by one instruction message. The instruction says how many
messages just before it are to be folded and gives each one's archive label, so the
summary can cite "archive turn N" without the history itself being rewritten.

`to_labelled` turns such a request into the plain list the summarizer reads: the previous
summary, the hard constraints, and each folded message with its `[archive turn N, ref R]`
first line. No engine imports: the engine imports the format from here.
"""
from __future__ import annotations

import re
from typing import Any

SUMMARY_MARKER = "[taskos:summary-request]"
FOLD_LINE = "Messages to fold: the {count} messages just before this one."
LABELS_LINE = "Their archive labels, in order:"
CONSTRAINTS_LINE = "Hard constraints (keep verbatim in task_overview):"

_FOLD = re.compile(r"^Messages to fold: the (\d+) messages just before this one\.$", re.M)
_LABEL = re.compile(r"^(\d+)\. turn (\d+)(?:, ref (\S+))?$")


def label_line(position: int, turn: int, ref: str = "") -> str:
    return f"{position}. turn {turn}" + (f", ref {ref}" if ref else "")


def is_tail_request(messages: list[dict[str, Any]]) -> bool:
    """True when the last message is a summary instruction (the prefix-reusing form)."""
    last = messages[-1].get("content") if messages else None
    return isinstance(last, str) and last.startswith(SUMMARY_MARKER)


def is_summary_request(messages: list[dict[str, Any]]) -> bool:
    """A summary request in either form: standalone (marker first) or prefix-reusing (last)."""
    first = messages[0].get("content") if messages else None
    return (isinstance(first, str) and first.startswith(SUMMARY_MARKER)) \
        or is_tail_request(messages)


def to_labelled(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Previous summary, constraints and the folded messages labelled with their turns."""
    instruction = messages[-1]["content"]
    found = _FOLD.search(instruction)
    count = int(found.group(1)) if found else 0
    count = min(count, len(messages) - 1)
    folded = messages[len(messages) - 1 - count:-1]
    earlier = messages[:len(messages) - 1 - count]
    labels: dict[int, tuple[str, str]] = {}
    constraints: list[str] = []
    in_constraints = False
    for line in instruction.splitlines():
        match = _LABEL.match(line.strip())
        if match:
            labels[int(match.group(1))] = (match.group(2), match.group(3) or "")
        if line.startswith(CONSTRAINTS_LINE):
            in_constraints = True
        elif in_constraints and line.startswith("- "):
            constraints.append(line)
        elif in_constraints and line.strip():
            in_constraints = False
    out = [m for m in earlier if "<system-info>" in str(m.get("content") or "")]
    if constraints:
        out.append({"role": "system", "content": "\n".join([CONSTRAINTS_LINE, *constraints])})
    for position, message in enumerate(folded, start=1):
        turn, ref = labels.get(position, ("", ""))
        data = dict(message)
        if turn and (data.get("role") in ("user", "tool") or data.get("content")):
            label = f"[archive turn {turn}, ref {ref}]" if ref else f"[archive turn {turn}]"
            data["content"] = f"{label}\n{data.get('content') or ''}"
        out.append(data)
    return out
