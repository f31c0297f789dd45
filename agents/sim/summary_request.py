"""How the simulated model reads the summary request that reuses the agent's own prefix
(feature C17); the request's form is agents/protocol.py.

The engine asks for a summary by sending the agent's stable prefix (same tools, system
prompt, snapshot, previous summary, the history to fold, all byte-identical, so a provider
bills them as cached) followed by one instruction message. The instruction says how many
messages just before it are to be folded and gives each one's archive label, so the
summary can cite "archive turn N" without the history itself being rewritten.

`to_labelled` turns such a request into the plain list the summarizer reads: the previous
summary, the hard constraints, and each folded message with its `[archive turn N, ref R]`
first line. Only the agreed strings come from agents.protocol; nothing of the engine.
"""
from __future__ import annotations

import re
from typing import Any

from agents.protocol import CONSTRAINTS_LINE, FOLD_LINE, archive_label

_FOLD = re.compile("^" + re.escape(FOLD_LINE).replace(re.escape("{count}"), r"(\d+)") + "$",
                   re.M)
_LABEL = re.compile(r"^(\d+)\. turn (\d+)(?:, ref (\S+))?$")


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
            data["content"] = f"{archive_label(turn, ref)}\n{data.get('content') or ''}"
        out.append(data)
    return out
