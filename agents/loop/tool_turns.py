"""Running the tools a reply asked for, and stopping a model that loops on them (feature T1).

One tool call becomes TOOL_CALL, the tool's run with no transaction open, the result in
the context (capped) and TOOL_RESULT, and what the result teaches the anchor book; the
same call failing — or succeeding — over and over ends the session after its hint.
"""
from __future__ import annotations

import time

from agents.context.hints import HintInjector
from agents.context.markers import neutralised
from agents.context.working import WorkingContext
from agents.events import ToolCall, ToolResult
from agents.loop.approvals import Approvals, denied_result
from agents.loop.calls import CallLedger
from agents.loop.commits import CommitPoints
from agents.loop.delegations import Delegations
from agents.loop.state import LoopDeps, LoopState, SessionEvents
from agents.tools.base import ToolContext
from agents.words.book import AnchorBook

# The same failing (or same successful) call this many × tool_retries_limit in a row ends
# the session.
TOOL_LOOP_FACTOR = 2


class ToolTurns:
    def __init__(self, deps: LoopDeps, state: LoopState, *, events: SessionEvents,
                 ctx: WorkingContext, book: AnchorBook, hints: HintInjector,
                 commits: CommitPoints, ledger: CallLedger, delegations: Delegations,
                 approvals: Approvals) -> None:
        self.deps, self.state, self.events, self.ctx = deps, state, events, ctx
        self.book, self.hints, self.commits = book, hints, commits
        self.ledger, self.delegations, self.approvals = ledger, delegations, approvals

    def run(self, call: dict) -> None:
        """TOOL_CALL, then the tool's run, or for an ask-first call (T11) its approval
        request: it runs (`execute`) or is denied (`deny`) once a person decided."""
        self.deps.emit(ToolCall(call_id=call["id"], name=call["name"], args=call["arguments"]))
        if self.approvals.asks(call):
            self.approvals.ask(call, self.tool_context(call))
            return
        self.execute(call)

    def tool_context(self, call: dict) -> ToolContext:
        deps, state = self.deps, self.state
        return ToolContext(session_id=deps.session_id, store=deps.store,
                           workspace=deps.workspace, events=self.events, turn=state.turn,
                           state=state.tool_state, call_id=call["id"])

    def deny(self, call: dict, text: str, ref: str | None) -> None:
        """A denied ask-first call: the person's reason is its result, as an error."""
        self.hints.record_tool_call(call["name"], call["arguments"], True)
        content = f"Error: {text}"
        msg = self.ctx.add({"role": "tool", "tool_call_id": call["id"], "content": content},
                           self.state.turn, ref or "", cap=self.ctx.budget().message_cap)
        self.deps.emit(denied_result(call, text, ref, msg.text, msg.tokens))

    def execute(self, call: dict) -> None:
        deps, state, emit = self.deps, self.state, self.deps.emit
        tool_ctx = self.tool_context(call)
        self.commits.commit()  # no transaction stays open while a tool works
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            outcome = deps.tools.run(call["name"], call["arguments"], tool_ctx)
        finally:
            self.ledger.outside(time.perf_counter() - started, time.thread_time() - cpu)
            self.commits.begin()
        if outcome.pending is not None:  # answered when the sub-agent finishes
            self.delegations.wait_for(call, outcome.pending, outcome.ref)
            return
        failures = self.hints.record_tool_call(call["name"], call["arguments"],
                                               outcome.error is not None)
        limit = TOOL_LOOP_FACTOR * deps.spec.config.tool_retries_limit
        if failures >= limit:
            state.stuck = ("tool_retry_loop", (
                f"the model called '{call['name']}' with the same arguments {failures} times "
                f"in a row and every call failed, also after the hint to stop; last error: "
                f"{outcome.error}"))
        elif self.hints.repeats >= limit:
            state.stuck = ("tool_repeat_loop", (
                f"the model called '{call['name']}' with the same arguments "
                f"{self.hints.repeats} times in a row; every call succeeded with its result "
                "already in the context, and it kept calling after the hint to stop"))
        content = outcome.content if outcome.error is None else f"Error: {outcome.error}"
        content = neutralised(content)  # no tool text opens an engine block (C19)
        msg = self.ctx.add({"role": "tool", "tool_call_id": call["id"], "content": content},
                           state.turn, outcome.ref or "", cap=self.ctx.budget().message_cap)
        emit(ToolResult(call_id=call["id"], name=call["name"],
                        original_chars=outcome.original_chars, kept_chars=len(msg.text),
                        original_tokens=None, kept_tokens=msg.tokens,
                        truncated=outcome.truncated or msg.text != content, ref=outcome.ref,
                        error=outcome.error, preview=msg.text[:400],
                        conclusions=outcome.conclusions))  # with the archived raw text: a replay's result
        if call["name"].startswith("Task"):
            self.book.tasks_written_by_agent()
        if outcome.error is None:
            self.book.from_tool(outcome.conclusions, content, state.turn, call["name"])
