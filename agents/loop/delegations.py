"""Sub-agents (SPEC T6): the `delegate` tool and how a waiting parent gets its answers.

A delegate call records a queued child session through the Store and returns a Pending
result. The loop ends that turn *waiting* (state saved, nothing in flight) instead of
holding a worker; whoever runs sessions (the Celery tasks, or `agents.subagents.run_tree`
headless) runs the children and then runs the parent again. On that resume the parent's
open delegate calls are answered with each child's final answer and archive ref, or with
its failure as a tool error: the parent's context grows only by those answers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents.events import Event, EventType
from agents.scenarios import ScenarioError, load_scenario, split_subtask
from agents.store.interface import ChildRecord
from agents.tools.base import Pending, Tool, ToolBoundary, ToolContext, ToolError

if TYPE_CHECKING:
    from agents.loop.agent_loop import AgentLoop

MIN_CHILD_WINDOW = 1000


@dataclass(frozen=True)
class DelegationLimits:
    """How deep sub-agents may nest (a person's session is depth 0) and how many children
    one session may start over its life (TASKOS_MAX_DELEGATION_DEPTH / _MAX_CHILDREN)."""

    max_depth: int = 2
    max_children: int = 8


@dataclass(frozen=True)
class DelegationPlan:
    """What a child inherits from the session that delegates."""

    limits: DelegationLimits
    window: int  # the parent's window: a child's budget may be smaller, never larger
    scenario: str = ""  # the parent's scenario name or path ("" when none)
    max_turns: int = 400


def child_scenario(parent_scenario: str, name: str) -> str:
    """`name` as the child's scenario: a subtask of the parent's scenario file first
    ("file#name"), else a bundled scenario or path; ToolError when neither exists."""
    if not name:
        return ""
    base = split_subtask(parent_scenario)[0] if parent_scenario else ""
    candidates = ([f"{base}#{name}"] if base else []) + [name]
    for candidate in candidates:
        try:
            load_scenario(candidate)
        except ScenarioError:
            continue
        return candidate
    raise ToolError(f"Unknown scenario {name!r} for the sub-agent: name a subtask of this "
                    "task's scenario or a bundled scenario, or leave 'scenario' out.")


def delegate_tool(plan: DelegationPlan) -> Tool:
    def delegate(goal: str, scenario: str = "", window: int = 0, max_turns: int = 0,
                 inherit_constraints: bool = True, profile: str = "",
                 _ctx: ToolContext | None = None) -> Pending:
        assert _ctx is not None
        goal = goal.strip()
        if not goal:
            raise ToolError("Give the sub-agent a goal: what it must find or produce.")
        depth = _ctx.store.delegation_depth(_ctx.session_id)
        if depth >= plan.limits.max_depth:
            raise ToolError(f"Sub-agents may be nested at most {plan.limits.max_depth} deep and "
                            f"this session is at depth {depth}: do this part here instead.")
        started = len(_ctx.store.list_children(_ctx.session_id))
        if started >= plan.limits.max_children:
            raise ToolError(f"This session already started {started} sub-agents, the most "
                            "allowed: do the rest here, or combine sub-tasks.")
        window = window or plan.window
        if not MIN_CHILD_WINDOW <= window <= plan.window:
            raise ToolError(f"'window' must be between {MIN_CHILD_WINDOW} and this session's "
                            f"own window ({plan.window} tokens); got {window}.")
        if max_turns < 0:
            raise ToolError("'max_turns' must be 0 (this session's limit) or more.")
        anchors = ([a.text for a in _ctx.store.load_anchors(_ctx.session_id) if a.tier == 1]
                   if inherit_constraints else [])
        request = {"goal": goal, "scenario": child_scenario(plan.scenario, scenario),
                   "window": window, "max_turns": max_turns or plan.max_turns,
                   "profile": profile.strip(), "anchors": anchors, "turn": _ctx.turn}
        child_id = _ctx.store.create_child(_ctx.session_id, request)
        return Pending(child_id, f"pending: sub-agent session {child_id} was started for: "
                                 f"{goal[:200]}. Its answer arrives as this call's result.")

    return Tool(
        name="delegate",
        description=("Hand a self-contained sub-task to a sub-agent with its own clean context "
                     "and budget. You receive only its final answer (plus a ref to its "
                     "archive) once it finishes; your hard constraints go with it."),
        parameters={"type": "object", "properties": {
            "goal": {"type": "string", "description": "What the sub-agent must do, on its own."},
            "scenario": {"type": "string", "description": "Simulated model only: the subtask "
                         "of this scenario (or a bundled scenario) the sub-agent plays."},
            "window": {"type": "integer", "description": "Its context window in tokens "
                       "(default and maximum: yours)."},
            "max_turns": {"type": "integer", "description": "Its turn limit (default: yours)."},
            "inherit_constraints": {"type": "boolean", "description": "Pass your tier-1 "
                                    "constraints on (default true)."},
            "profile": {"type": "string", "description": "Another model profile by name "
                        "(default: yours)."},
            "_ctx": {"type": "object"}},
            "required": ["goal"]},
        func=delegate, inline=True, boundary=ToolBoundary(max_result_length=2000))


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
    """The loop's open delegate calls: call id → child id, saved with the loop state."""

    def __init__(self, loop: "AgentLoop") -> None:
        self.loop = loop
        self.waiting: dict[str, str] = {}

    def wait_for(self, call: dict[str, Any], child_id: str, ref: str | None) -> None:
        self.waiting[call["id"]] = child_id
        self.loop.emit(Event(EventType.TOOL_RESULT, {
            "call_id": call["id"], "name": call["name"], "original_chars": 0, "kept_chars": 0,
            "original_tokens": None, "kept_tokens": 0, "truncated": False, "ref": ref,
            "error": None, "preview": f"pending: sub-agent session {child_id}",
            "conclusions": [], "pending": child_id}))

    def pause_event(self) -> Event:
        return Event(EventType.SESSION_WAITING, {"children": sorted(set(self.waiting.values())),
                                                 "turns": self.loop.turn})

    def answers(self) -> dict[str, "Delivery"] | None:
        """Each waited-for child's answer, or None while one of them still runs."""
        loop = self.loop
        children = {c.id: c for c in loop.store.list_children(loop.session_id)}
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
        loop = self.loop
        for call_id, child_id in self.waiting.items():
            answer = answers[child_id]
            text, error = answer.text, answer.error
            ref = loop.store.archive(loop.session_id, loop.turn, "tool", text,
                                     tool_name="delegate", tool_args={"child": child_id},
                                     tokens=loop.counter.text(text))
            msg = loop.ctx.add({"role": "tool", "tool_call_id": call_id, "content": text},
                               loop.turn, ref, cap=loop.ctx.budget().message_cap)
            loop.hints.record_tool_call("delegate", child_id, error is not None)
            loop.emit(Event(EventType.TOOL_RESULT, {
                "call_id": call_id, "name": "delegate", "original_chars": len(text),
                "kept_chars": len(msg.text), "original_tokens": None, "kept_tokens": msg.tokens,
                "truncated": msg.text != text, "ref": ref, "error": error,
                "preview": msg.text[:400], "conclusions": [], "child": child_id,
                "child_status": answer.status, "child_input_tokens": answer.input_tokens,
                "child_cost": answer.cost, **answer.extra}))
        self.waiting = {}
        return True
