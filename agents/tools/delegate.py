"""The `delegate` tool (feature T6): hand a sub-task to a sub-agent session of its own.

A delegate call records a queued child session through the Store and returns a Pending
result; the loop then waits for the child (agents/loop/delegations.py) instead of
holding a worker. What a child inherits, and how deep and how many children may be
started, is decided here, before anything is stored.
"""
from __future__ import annotations

from dataclasses import dataclass

from agents.scenarios import ScenarioError, load_scenario, split_subtask
from agents.tools.base import Pending, Tool, ToolBoundary, ToolContext, ToolError

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
        func=delegate, inline=True, boundary=ToolBoundary(max_result_length=2000,
                                                              # a child's answer is its summary
                                                              never_clear=True))
