"""The agent loop of a replay: recorded decisions, archived tool results, a new context.

The engine runs as it always does — anchors, snapshot, triggers, compaction, hints — under
the replay's settings. What differs: the model answers agent calls from the recording
(ReplayTransport), user messages arrive at the turns they arrived in the recording, the
time hint shows the recorded turn's time, and tools that reach outside the session (files,
data, documents) return what they returned then, read from the source's archive. Tools
over the session's own state (tasks, notes, recall, compaction) run for real, because
their answers depend on the replay's own context and archive.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from agents.errors import error_payload
from agents.events import Event, EventType
from agents.loop import AgentLoop
from agents.model import ModelReply
from agents.replay.recording import Recording
from agents.replay.transport import ReplayTransport
from agents.tools.base import ToolContext, ToolError, ToolOutcome, ToolReply
from agents.tools.registry import ToolRegistry

# Tools whose result depends on the session's own state: they run again in a replay.
LIVE_TOOLS = frozenset({"TaskCreate", "TaskList", "TaskGet", "TaskUpdate", "notes", "recall",
                        "read_ref", "compress_context"})


class ReplayTools:
    """A ToolRegistry whose outside-world tools answer from the recording's archive."""

    def __init__(self, registry: ToolRegistry, recording: Recording) -> None:
        self.registry = registry
        self.recording = recording
        self.call: tuple[int, str] = (0, "")  # (turn, call id) of the call being run
        self.missing: list[str] = []  # calls the recording has no result for

    def schemas(self) -> list[dict[str, Any]]:
        return self.registry.schemas()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.registry, name)

    def run(self, name: str, arguments_json: str, ctx: ToolContext) -> ToolOutcome:
        tool = self.registry.get(name)
        if tool is None or name in LIVE_TOOLS:
            return self.registry.run(name, arguments_json, ctx)
        recorded = self.recording.raw_result(*self.call)
        if recorded is None:
            self.missing.append(f"turn {self.call[0]}: no recorded result for {name} "
                                f"(call {self.call[1]})")
            return self.registry.run(name, arguments_json, ctx)
        raw = self.recording.read_raw(recorded.ref) if recorded.ref else None

        def archived(**_: Any) -> ToolReply:
            if recorded.error is not None:
                raise ToolError(recorded.error)
            if raw is None:
                raise ToolError(f"the archived result {recorded.ref} of this call is gone")
            return ToolReply(raw, recorded.conclusions)

        one = ToolRegistry(self.registry.result_limit)
        one.register(dataclasses.replace(tool, func=archived, inline=True))
        return one.run(name, arguments_json, ctx)


class ReplayCompanion:
    """The replay's own state, saved and resumed with the loop's."""

    state_key = "replay"

    def __init__(self, transport: ReplayTransport) -> None:
        self.transport = transport

    def to_state(self) -> dict[str, Any]:
        return {"ref_map": dict(self.transport.ref_map),
                "impossible": [i.to_dict() for i in self.transport.impossible]}

    def from_state(self, state: dict[str, Any]) -> None:
        from agents.replay.transport import Impossible
        self.transport.ref_map.update(state.get("ref_map", {}))
        self.transport.impossible = [Impossible(**i) for i in state.get("impossible", [])]


class ReplayLoop(AgentLoop):
    def __init__(self, *, recording: Recording, transport: ReplayTransport, **kwargs: Any):
        kwargs["tools"] = ReplayTools(kwargs["tools"], recording)
        kwargs["clock"] = lambda: recording.clock_at(self.turn)
        self.recording, self.transport = recording, transport
        self.companion = ReplayCompanion(transport)
        kwargs["companions"] = list(kwargs.get("companions") or []) + [self.companion]
        super().__init__(**kwargs)

    @property
    def impossible(self) -> list[dict[str, Any]]:
        return [i.to_dict() for i in self.transport.impossible]

    def emit(self, event: Event) -> None:
        payload = event.payload
        if event.type == EventType.TOOL_RESULT and payload.get("ref"):
            old = self.recording.raw_result(self.turn, payload.get("call_id", ""))
            if old is not None and old.ref:
                self.transport.ref_map[old.ref] = payload["ref"]
        elif event.type == EventType.USER_MESSAGE and payload.get("ref"):
            old_ref = self.recording.user_refs.get((self.turn, payload.get("text")))
            if old_ref:
                self.transport.ref_map[old_ref] = payload["ref"]
        super().emit(event)

    def _take_user_messages(self) -> None:
        """The user messages of the recorded turn, whatever the scenario or store say now."""
        if self.turn <= self.delivered_through:
            return
        self.delivered_through = self.turn
        for text, source in self.recording.user_messages.get(self.turn, []):
            self.add_user_message(text, source)

    def _call_agent(self, request, limit) -> ModelReply:
        self.transport.turn = self.turn
        known = len(self.transport.impossible)
        reply = super()._call_agent(request, limit)
        for impossible in self.transport.impossible[known:]:
            self.emit(Event(EventType.ERROR, error_payload(
                "replay_decision_impossible", f"turn {impossible.turn}: {impossible.reason}",
                fatal=False)))
        return reply

    def _run_tool(self, call: dict) -> None:
        self.tools.call = (self.turn, call["id"])
        super()._run_tool(call)
