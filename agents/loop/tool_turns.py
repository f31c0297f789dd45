"""Running the tools a reply asked for, and stopping a model that loops on them (SPEC T1).

Part of AgentLoop (agents/loop/agent_loop.py): one tool call becomes TOOL_CALL, the tool's run with
no transaction open, the result in the context (capped) and TOOL_RESULT, and what the
result teaches the anchor book; the same call failing — or succeeding — over and over
ends the session after its hint.
"""
from __future__ import annotations

import time

from agents.events import Event, EventType
from agents.tools.base import ToolContext

# The same failing (or same successful) call this many × tool_retries_limit in a row ends
# the session.
TOOL_LOOP_FACTOR = 2


class ToolTurns:
    """The loop's tool calls (mixed into AgentLoop)."""

    def _run_tool(self, call: dict) -> None:
        self.emit(Event(EventType.TOOL_CALL, {"call_id": call["id"], "name": call["name"],
                                              "args": call["arguments"]}))
        tool_ctx = ToolContext(session_id=self.session_id, store=self.store,
                               workspace=self.workspace, events=self, turn=self.turn,
                               state=self.tool_state)
        self.commits.commit()  # no transaction stays open while a tool works
        started = time.perf_counter()
        try:
            outcome = self.tools.run(call["name"], call["arguments"], tool_ctx)
        finally:
            self.ledger.outside(time.perf_counter() - started)
            self.commits.begin()
        if outcome.pending is not None:  # answered when the sub-agent finishes
            self.delegations.wait_for(call, outcome.pending, outcome.ref)
            return
        failures = self.hints.record_tool_call(call["name"], call["arguments"],
                                               outcome.error is not None)
        limit = TOOL_LOOP_FACTOR * self.spec.config.tool_retries_limit
        if failures >= limit:
            self.stuck = ("tool_retry_loop", (
                f"the model called '{call['name']}' with the same arguments {failures} times "
                f"in a row and every call failed, also after the hint to stop; last error: "
                f"{outcome.error}"))
        elif self.hints.repeats >= limit:
            self.stuck = ("tool_repeat_loop", (
                f"the model called '{call['name']}' with the same arguments "
                f"{self.hints.repeats} times in a row; every call succeeded with its result "
                "already in the context, and it kept calling after the hint to stop"))
        content = outcome.content if outcome.error is None else f"Error: {outcome.error}"
        msg = self.ctx.add({"role": "tool", "tool_call_id": call["id"], "content": content},
                           self.turn, outcome.ref or "", cap=self.ctx.budget().message_cap)
        self.emit(Event(EventType.TOOL_RESULT, {
            "call_id": call["id"], "name": call["name"], "original_chars": outcome.original_chars,
            "kept_chars": len(msg.text), "original_tokens": None, "kept_tokens": msg.tokens,
            "truncated": outcome.truncated or msg.text != content, "ref": outcome.ref,
            "error": outcome.error, "preview": msg.text[:400],
            "conclusions": outcome.conclusions}))  # with the archived raw text: a replay's result
        if call["name"].startswith("Task"):
            self.book.tasks_written_by_agent()
        if outcome.error is None:
            self.book.from_tool(outcome.conclusions, content, self.turn, call["name"])
