"""The agent loop of a replay: recorded decisions, archived tool results, a new context.

The engine runs as it always does — anchors, snapshot, triggers, compaction, hints — under
the replay's settings. What differs: the model answers agent calls from the recording
(ReplayTransport), user messages arrive at the turns they arrived in the recording, the
time hint shows the recorded turn's time, and tools that reach outside the session (files,
data, documents) return what they returned then, read from the source's archive. Tools
over the session's own state (tasks, notes, recall, compaction) run for real, because
their answers depend on the replay's own context and archive.

A delegate call (T6) does not start a sub-agent again: the recorded sub-agent's answer is
reused, read from the source's archive, and arrives at the turn it arrived then — in the
same process, since there is nothing to wait for. The sub-agent's own work is not re-run;
the report lists every answer reused (`reused_children`). A reused answer names the
child's archive; read_ref reads it through the source, which may read its sub-agents'.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from agents.context.hints import HintInjector
from agents.context.working import Request, WorkingContext
from agents.errors import error_event
from agents.events import Event, ToolResult, UserMessage
from agents.loop.agent_loop import AgentLoop
from agents.loop.delegations import Delegations, Delivery
from agents.loop.state import LoopDeps, LoopState
from agents.provider.client import ModelReply
from agents.replay.recording import Recording
from agents.replay.transport import ReplayTransport
from agents.tools.base import Pending, ToolContext, ToolError, ToolOutcome, ToolReply
from agents.tools.registry import ToolRegistry

# Tools whose result depends on the session's own state: they run again in a replay.
LIVE_TOOLS = frozenset({"TaskCreate", "TaskList", "TaskGet", "TaskUpdate", "notes", "recall",
                        "read_ref", "compress_context"})


class ReplayTools:
    """A ToolRegistry whose outside-world tools answer from the recording's archive."""

    def __init__(self, registry: ToolRegistry, recording: Recording) -> None:
        self.registry = registry
        self.recording = recording
        self.missing: list[str] = []  # calls the recording has no result for

    def schemas(self) -> list[dict[str, Any]]:
        return self.registry.schemas()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.registry, name)

    def run(self, name: str, arguments_json: str, ctx: ToolContext) -> ToolOutcome:
        tool = self.registry.get(name)
        if tool is None or name in LIVE_TOOLS:
            ctx = dataclasses.replace(ctx, store=SourceArchives(ctx.store, self.recording))
            return self.registry.run(name, arguments_json, ctx)
        call = (ctx.turn, ctx.call_id)
        child = self.recording.delegations.get(call) if name == "delegate" else None
        if child is not None:
            def reused(**_: Any) -> Pending:
                return Pending(child, f"replayed: sub-agent session {child} is not run again; "
                                      "its recorded answer is reused as this call's result.")
            return self._run_as(tool, reused, arguments_json, ctx)
        recorded = self.recording.raw_result(*call)
        if recorded is None:
            self.missing.append(f"turn {call[0]}: no recorded result for {name} "
                                f"(call {call[1]})")
            return self.registry.run(name, arguments_json, ctx)
        raw = self.recording.read_raw(recorded.ref) if recorded.ref else None

        def archived(**_: Any) -> ToolReply:
            if recorded.error is not None:
                raise ToolError(recorded.error)
            if raw is None:
                raise ToolError(f"the archived result {recorded.ref} of this call is gone")
            return ToolReply(raw, recorded.conclusions)

        return self._run_as(tool, archived, arguments_json, ctx)

    def _run_as(self, tool, func, arguments_json: str, ctx: ToolContext) -> ToolOutcome:
        """Run `tool` with `func` in its place: same checks, archive and bounding."""
        one = ToolRegistry(self.registry.result_limit)
        one.register(dataclasses.replace(tool, func=func, inline=True))
        return one.run(tool.name, arguments_json, ctx)


class SourceArchives:
    """The replay's store, except that refs into the recorded sub-agents' archives (named
    by reused answers) are read through the source session, which may read them."""

    def __init__(self, store: Any, recording: Recording) -> None:
        self.store, self.recording = store, recording

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def read_ref(self, session_id: str, ref: str) -> str | None:
        text = self.store.read_ref(session_id, ref)
        owner = str(ref).split(":")[1] if str(ref).count(":") == 2 else ""
        if text is None and owner not in ("", str(session_id), self.recording.session_id):
            text = self.recording.read_raw(ref)
        return text


class ReplayedDelegations(Delegations):
    """Delegate calls answered with the recorded sub-agents' answers, never waited for."""

    def __init__(self, deps: LoopDeps, state: LoopState, *, ctx: WorkingContext,
                 hints: HintInjector, recording: Recording) -> None:
        super().__init__(deps, state, ctx=ctx, hints=hints)
        self.recording = recording
        self.reused: list[dict[str, Any]] = []  # what the replay report lists

    def answers(self) -> dict[str, Delivery]:
        out = {}
        for child_id in set(self.waiting.values()):
            recorded = self.recording.answers.get(child_id)
            text = self.recording.read_raw(recorded.ref) if recorded and recorded.ref else None
            if recorded is None or text is None:
                error = (f"the recording holds no answer of sub-agent session {child_id}: "
                         "the recorded session stopped before it answered" if recorded is None
                         else f"the recorded answer {recorded.ref} of sub-agent session "
                              f"{child_id} is gone from the source's archive")
                out[child_id] = Delivery(f"Error: {error}", error, "failed",
                                         extra={"reused": False})
                continue
            out[child_id] = Delivery(text, recorded.error, recorded.status,
                                     recorded.input_tokens, recorded.cost,
                                     extra={"reused": True, "reused_ref": recorded.ref})
        for call_id, child_id in self.waiting.items():
            answer = out[child_id]
            self.reused.append({"turn": self.state.turn, "call_id": call_id, "child": child_id,
                                "reused": answer.extra["reused"], "status": answer.status,
                                "recorded_input_tokens": answer.input_tokens,
                                "recorded_cost": answer.cost, "error": answer.error})
        return out


class ReplayCompanion:
    """The replay's own state, saved and resumed with the loop's."""

    state_key = "replay"

    def __init__(self, transport: ReplayTransport) -> None:
        self.transport = transport

        self.delegations: ReplayedDelegations | None = None  # set once the loop is built

    def to_state(self) -> dict[str, Any]:
        return {"ref_map": dict(self.transport.ref_map),
                "impossible": [i.to_dict() for i in self.transport.impossible],
                "reused": list(self.delegations.reused if self.delegations else [])}

    def from_state(self, state: dict[str, Any]) -> None:
        from agents.replay.transport import Impossible
        self.transport.ref_map.update(state.get("ref_map", {}))
        self.transport.impossible = [Impossible(**i) for i in state.get("impossible", [])]
        if self.delegations is not None:
            self.delegations.reused = list(state.get("reused", []))


class ReplayLoop(AgentLoop):
    """The agent loop with the recording in place of the model's decisions and the outside
    world: it overrides where this turn's user messages come from, what an agent call
    adds, how delegate calls are answered and what happens when the loop would wait."""

    def __init__(self, *, recording: Recording, transport: ReplayTransport, **kwargs: Any):
        kwargs["tools"] = ReplayTools(kwargs["tools"], recording)
        kwargs["clock"] = lambda: recording.clock_at(self.state.turn)
        self.recording, self.transport = recording, transport
        self.companion = ReplayCompanion(transport)
        kwargs["companions"] = list(kwargs.get("companions") or []) + [self.companion]
        super().__init__(**kwargs)
        self.companion.delegations = self.delegations
        self.events.observers.append(self._map_refs)

    def new_delegations(self) -> ReplayedDelegations:
        return ReplayedDelegations(self.deps, self.state, ctx=self.ctx, hints=self.hints,
                                   recording=self.recording)

    @property
    def reused_children(self) -> list[dict[str, Any]]:
        return list(self.delegations.reused)

    def iterate(self, progress, total):
        """As the loop's, but a turn that delegated goes on at once with the recorded
        answers: where the recorded parent waited for its sub-agents, the replay has them."""
        while True:
            result = super().iterate(progress, total)
            if result.status != "waiting":
                return result
            self.delegations.deliver()

    @property
    def impossible(self) -> list[dict[str, Any]]:
        return [i.to_dict() for i in self.transport.impossible]

    def _map_refs(self, event: Event) -> None:
        """The source's refs, as the recorded answers name them, to this run's new ones."""
        turn = self.state.turn
        if isinstance(event, ToolResult) and event.ref:
            old = self.recording.raw_result(turn, event.call_id)
            if old is not None and old.ref:
                self.transport.ref_map[old.ref] = event.ref
        elif isinstance(event, UserMessage) and event.ref:
            old_ref = self.recording.user_refs.get((turn, event.text))
            if old_ref:
                self.transport.ref_map[old_ref] = event.ref

    def take_user_messages(self) -> None:
        """The user messages of the recorded turn, whatever the scenario or store say now."""
        state = self.state
        if state.turn <= state.delivered_through:
            return
        state.delivered_through = state.turn
        for text, source in self.recording.user_messages.get(state.turn, []):
            self.add_user_message(text, source)

    def call_agent(self, request: Request, limit: int) -> ModelReply:
        self.transport.turn = self.state.turn
        known = len(self.transport.impossible)
        reply = super().call_agent(request, limit)
        for impossible in self.transport.impossible[known:]:
            self.deps.emit(error_event(
                "replay_decision_impossible", f"turn {impossible.turn}: {impossible.reason}",
                fatal=False))
        return reply
