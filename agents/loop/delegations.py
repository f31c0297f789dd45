"""Sub-agents (feature T6) as the loop sees them: delegate calls waiting for their children.

The `delegate` tool (agents/tools/delegate.py) records a queued child session and returns
a Pending result. The loop ends that turn *waiting* (state saved, nothing in flight)
instead of holding a worker; whoever runs sessions (the Celery tasks, or
`agents.subagents.run_tree` headless) runs the children and then runs the parent again.
On that resume the parent's open delegate calls are answered with each child's final
answer and archive ref, or with its failure as a tool error: the parent's context grows
only by those answers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents.context.hints import HintInjector
from agents.context.markers import neutralised
from agents.context.working import WorkingContext
from agents.events import Event, SessionWaiting, ToolResult
from agents.loop.state import LoopDeps, LoopState
from agents.store.interface import ChildRecord


def answer_of(child: ChildRecord) -> tuple[str, str | None]:
    """The tool result a finished child gives its parent: (content, error or None)."""
    if child.status == "finished":
        ref = f"; its answer {child.answer_ref}, readable with read_ref" if child.answer_ref \
            else ""
        return (f"Sub-agent session {child.id} finished after {child.turns} turns "
                f"(its archive: session {child.id}{ref}).\n\n{child.final_answer}", None)
    if child.status == "cancelled":
        return "", f"sub-agent session {child.id} was cancelled" + (
            f": {child.error}" if child.error else "")
    return "", f"sub-agent session {child.id} {child.status}: {child.error or 'no reason given'}"


@dataclass
class Delivery:
    """What one delegate call receives: the tool result text (an error's starts "Error:")
    and what the parent's report says of the child."""

    text: str
    error: str | None
    status: str
    input_tokens: int = 0
    cost: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)  # more TOOL_RESULT keys


class Delegations:
    """The loop's open delegate calls (`LoopState.waiting`: call id → child id), and the
    answers they receive once every child has finished."""

    def __init__(self, deps: LoopDeps, state: LoopState, *, ctx: WorkingContext,
                 hints: HintInjector) -> None:
        self.deps, self.state, self.ctx, self.hints = deps, state, ctx, hints

    @property
    def waiting(self) -> dict[str, str]:
        return self.state.waiting

    def wait_for(self, call: dict[str, Any], child_id: str, ref: str | None) -> None:
        self.state.waiting[call["id"]] = child_id
        self.deps.emit(ToolResult(call_id=call["id"], name=call["name"], original_chars=0,
                                  kept_chars=0, original_tokens=None, kept_tokens=0,
                                  truncated=False, ref=ref, error=None,
                                  preview=f"pending: sub-agent session {child_id}", conclusions=[],
                                  pending=child_id))

    def pause_event(self) -> Event:
        return SessionWaiting(children=sorted(set(self.waiting.values())), turns=self.state.turn)

    def answers(self) -> dict[str, "Delivery"] | None:
        """Each waited-for child's answer, or None while one of them still runs."""
        deps = self.deps
        children = {c.id: c for c in deps.store.list_children(deps.session_id)}
        if any(child_id in children and not children[child_id].done
               for child_id in self.waiting.values()):
            return None
        out = {}
        for child_id in set(self.waiting.values()):
            # A child row deleted meanwhile (by a person) is a failure, never a wait forever.
            child = children.get(child_id) or ChildRecord(
                id=child_id, goal="", status="failed", error="the session no longer exists")
            content, error = answer_of(child)
            out[child_id] = Delivery(content if error is None else f"Error: {error}", error,
                                     child.status, child.total_input_tokens, child.cost)
        return out

    def deliver(self) -> bool:
        """Answer every open delegate call; False (nothing changed) while a child runs."""
        answers = self.answers()
        if answers is None:
            return False
        deps, turn, ctx = self.deps, self.state.turn, self.ctx
        for call_id, child_id in self.waiting.items():
            answer = answers[child_id]
            text, error = answer.text, answer.error
            ref = deps.store.archive(deps.session_id, turn, "tool", text, tool_name="delegate",
                                     tool_args={"child": child_id},
                                     tokens=ctx.counter.text(text))
            text = neutralised(text)  # a child's answer is tool text: no engine blocks (C19)
            msg = ctx.add({"role": "tool", "tool_call_id": call_id, "content": text}, turn, ref,
                          cap=ctx.budget().message_cap)
            self.hints.record_tool_call("delegate", child_id, error is not None)
            deps.emit(ToolResult(call_id=call_id, name="delegate", original_chars=len(text),
                                 kept_chars=len(msg.text), original_tokens=None,
                                 kept_tokens=msg.tokens, truncated=msg.text != text, ref=ref,
                                 error=error, preview=msg.text[:400], conclusions=[],
                                 child=child_id, child_status=answer.status,
                                 child_input_tokens=answer.input_tokens, child_cost=answer.cost,
                                 **answer.extra))
        self.state.waiting = {}
        return True
