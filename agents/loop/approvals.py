"""Ask before a tool acts (feature T11): ask-first calls wait for a person's decision.

Which calls are ask-first is the session's `AskFirst` (agents/tools/ask_first.py): by
tool name, by the tool's own mark (`Tool.ask_first`, which a tool source sets on all of its
tools) and, where a session asks before writes, `write_file` and every destructive tool.

When the model calls one, the call is recorded as a pending approval
(`Store.request_approval`, with what it would change: a write's diff) instead of being
run, and the turn ends *waiting* like a delegate call (agents/loop/delegations.py): the
state is saved and no worker is held. The other calls of the same reply run as usual.
Whoever serves the drawer records the decision; the next run of the session reads it:
an approved call runs then, a denied one gets the person's reason as its result (an
error the model reads). Each decision is an APPROVAL_DECIDED event and an archive row.
"""
from __future__ import annotations

import difflib
import json
from typing import Any, Callable

from agents.events import ApprovalDecided, ApprovalRequested, ToolResult
from agents.loop.state import LoopDeps, LoopState
from agents.store.interface import ApprovalRecord
from agents.tools.ask_first import AskFirst
from agents.tools.base import ToolContext, ToolError
from agents.tools.workspace import open_in_workspace

# Archive role of a decision's row (the call's own result row follows it).
APPROVAL_ROLE = "approval"
MAX_PREVIEW_CHARS = 20_000
MAX_DIFFED_CHARS = 2_000_000  # a longer file is not diffed: what the call writes is shown


def write_preview(arguments: dict[str, Any], ctx: ToolContext) -> str:
    """What a write_file call would change: a unified diff of the file."""
    path, content = str(arguments.get("path", "")), arguments.get("content", "")
    if not isinstance(content, str):
        return ""
    try:
        with open_in_workspace(ctx.workspace, path, "r", newline="") as handle:
            before = handle.read(MAX_DIFFED_CHARS + 1)
    except (ToolError, OSError, UnicodeDecodeError):
        before = ""  # a new file (or one the write itself would refuse): all added
    if len(before) > MAX_DIFFED_CHARS:
        verb = "appends" if arguments.get("append") else "replaces"
        return (f"{path} is longer than {MAX_DIFFED_CHARS:,} characters, too long to diff "
                f"here; this call {verb} it with {len(content):,} characters:\n"
                + content[:MAX_PREVIEW_CHARS])
    after = before + content if arguments.get("append") else content
    lines = list(difflib.unified_diff(before.splitlines(keepends=True),
                                      after.splitlines(keepends=True),
                                      fromfile=f"a/{path}", tofile=f"b/{path}"))
    if not lines:
        return f"No change to {path}."
    diff = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    if len(diff) > MAX_PREVIEW_CHARS:  # both ends: a replaced file's new text is at the end
        removed = sum(1 for line in lines[2:] if line.startswith("-"))
        added = sum(1 for line in lines[2:] if line.startswith("+"))
        half = MAX_PREVIEW_CHARS // 2
        diff = (diff[:half].rsplit("\n", 1)[0]
                + f"\n… {len(diff) - 2 * half:,} characters of the diff not shown "
                  f"({removed} lines removed, {added} added in all) …\n"
                + diff[-half:].split("\n", 1)[-1])
    return diff


# Tools whose change can be shown before it is made, by name.
PREVIEWS: dict[str, Callable[[dict[str, Any], ToolContext], str]] = {
    "write_file": write_preview}


def parsed_arguments(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    try:
        parsed = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def denial_text(name: str, record: ApprovalRecord) -> str:
    """The tool result a denied call gives the model."""
    by = "" if record.decided_by in ("", "timeout") else f" ({record.decided_by})"
    reason = record.reason.strip() or "no reason given"
    if record.decided_by == "timeout":
        return (f"The call of {name} was not run: nobody approved it in time ({reason}). "
                "Go on without it, or ask the person in your answer.")
    return (f"The person{by} denied this call of {name}, so it was not run. Their reason: "
            f"{reason}. Do not repeat the same call; take the reason into account.")


class Approvals:
    """The loop's open ask-first calls (`LoopState.approvals`: call id → the call)."""

    def __init__(self, deps: LoopDeps, state: LoopState) -> None:
        self.deps, self.state = deps, state

    @property
    def ask_first(self) -> AskFirst:
        return self.deps.spec.ask_first

    def asks(self, call: dict[str, Any]) -> bool:
        return self.ask_first.asks(call["name"], self.deps.tools.get(call["name"]))

    def ask(self, call: dict[str, Any], ctx: ToolContext) -> None:
        """Record the call as pending, with what it would change; it runs once approved."""
        deps, name = self.deps, call["name"]
        preview_of = PREVIEWS.get(name)
        preview = preview_of(parsed_arguments(call["arguments"]), ctx) if preview_of else ""
        arguments = call["arguments"] if isinstance(call["arguments"], str) \
            else json.dumps(call["arguments"], ensure_ascii=False)
        deps.store.request_approval(deps.session_id, ApprovalRecord(
            call_id=call["id"], tool=name, arguments=arguments, preview=preview,
            turn=self.state.turn))
        self.state.approvals[call["id"]] = {"id": call["id"], "name": name,
                                            "arguments": call["arguments"]}
        deps.emit(ApprovalRequested(call_id=call["id"], name=name, args=call["arguments"],
                                    preview=preview))

    def decisions(self) -> dict[str, ApprovalRecord] | None:
        """Each open call's decision, or None while one of them is still undecided."""
        deps = self.deps
        records = deps.store.approvals(deps.session_id, list(self.state.approvals))
        if any(not record.decided for record in records.values()):
            return None
        # A record gone meanwhile (its session's rows deleted by a person) is a denial,
        # never a wait forever.
        return {call_id: records.get(call_id) or ApprovalRecord(
            call_id=call_id, tool=call["name"], arguments="", status="denied",
            reason="the approval request no longer exists")
            for call_id, call in self.state.approvals.items()}

    def deliver(self, decisions: dict[str, ApprovalRecord],
                run: Callable[[dict[str, Any]], None],
                deny: Callable[[dict[str, Any], str, str], None]) -> None:
        """Hand each decided call on: `run(call)` when approved, else `deny(call, text,
        ref)` puts the denial in as the call's result."""
        deps, turn = self.deps, self.state.turn
        for call_id, call in list(self.state.approvals.items()):
            record = decisions[call_id]
            approved = record.status == "approved"
            line = (f"{record.status} {call['name']} call {call_id}"
                    + (f" by {record.decided_by}" if record.decided_by else "")
                    + (f": {record.reason}" if record.reason else ""))
            ref = deps.store.archive(deps.session_id, turn, APPROVAL_ROLE, line,
                                     tool_name=call["name"],
                                     tool_args=parsed_arguments(call["arguments"]))
            deps.emit(ApprovalDecided(call_id=call_id, name=call["name"],
                                      decision="approved" if approved else "denied",
                                      reason=record.reason, decided_by=record.decided_by,
                                      ref=ref))
            del self.state.approvals[call_id]
            if approved:
                run(call)
            else:
                deny(call, denial_text(call["name"], record), ref)


def denied_result(call: dict[str, Any], text: str, ref: str | None, kept: str,
                  kept_tokens: int) -> ToolResult:
    """The TOOL_RESULT of a denied call: an error, whose text the model reads."""
    return ToolResult(call_id=call["id"], name=call["name"], original_chars=len(text),
                      kept_chars=len(kept), original_tokens=None, kept_tokens=kept_tokens,
                      truncated=kept != text, ref=ref, error=text, preview=kept[:400],
                      conclusions=[])
