"""Saving and resuming the loop (SPEC T8): the state at the end of every turn, and the
clean-up of a turn whose worker died before its commit.

Part of AgentLoop (agents/loop/agent_loop.py). The state holds the working context, hints, the
handoff, counters and every companion's own state (report, retries, audit, calibration).
"""
from __future__ import annotations

from agents.errors import error_payload
from agents.events import Event, EventType


class LoopState:
    """The loop's persistence (mixed into AgentLoop)."""

    def _save_state(self) -> None:
        self.store.save_state(self.session_id, {
            "turn": self.turn, "delivered_through": self.delivered_through,
            "events_seq": self.last_seq, "final_answer": self.finished,
            "context": self.ctx.to_state(), "hints": self.hints.to_state(),
            "handoff": self.keeper.handoff, "calls": self.ledger.calls,
            "tool_state": dict(self.tool_state), "waiting": dict(self.delegations.waiting),
            "companions": {c.state_key: c.to_state() for c in self.companions}})

    def _discard_uncommitted(self, turn: int, events_seq: int | None) -> None:
        """A worker died inside `turn`: drop what it wrote so the re-run cannot double it."""
        undone = self.store.discard_uncommitted(self.session_id, turn)
        discard_events = getattr(self.events, "discard_after", None)
        undone["events"] = 0
        if discard_events and events_seq is not None:  # None: a state saved before seqs
            undone["events"] = discard_events(events_seq)
            self.last_seq = events_seq
        if any(undone.values()):
            self.emit(Event(EventType.ERROR, error_payload(
                "turn_interrupted",
                f"turn {turn} was interrupted before it was committed; it runs again "
                f"({undone['archive_rows']} archive rows removed, {undone['events']} events "
                f"marked discarded, {undone['messages']} messages given back)", fatal=False)))

    def _resume(self) -> bool:
        state = self.store.load_state(self.session_id)
        self._discard_uncommitted((state or {}).get("turn", 0),
                                  state.get("events_seq") if state else 0)
        if not state:
            return False
        self.finished = state.get("final_answer")
        self.turn = state.get("turn", 0)
        self.delivered_through = state.get("delivered_through", -1)
        self.ctx.restore(state.get("context", {}))
        self.hints.from_state(state.get("hints", {}))
        self.keeper.handoff = state.get("handoff") or {}
        self.ledger.calls = state.get("calls", 0)
        self.tool_state = state.get("tool_state", {})
        for companion in self.companions:
            companion.from_state(state.get("companions", {}).get(companion.state_key, {}))
        self.delegations.waiting = dict(state.get("waiting") or {})
        if self.delegations.waiting:  # not interrupted: it stopped to wait for sub-agents
            return True
        self.add_user_message(
            f"[resumed] This task was interrupted and resumed at turn {self.turn} from its "
            "task snapshot, summary and recent turns. Re-check external facts (files, data, "
            "dates) before relying on them.", source="engine")
        return True
