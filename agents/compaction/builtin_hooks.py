"""The built-in compaction hooks and what a compaction leaves behind (SPEC C13, C14, E3).

Part of ContextKeeper (agents/loop/context_keeper.py). Around every compaction, outermost
first: publishing (COMPACTION_STARTED, then COMPACTION with its audit and the handoff
note archived), then the keeper's metrics, then the anchor rescue (the snapshot rebuilt
and refrozen so every tier-1 anchor is back in view).
"""
from __future__ import annotations

import json
from typing import Any

from agents.compaction.compactor import CompactionOutcome
from agents.errors import error_payload
from agents.events import Event, EventType
from agents.compaction.hooks import CompressCall
from agents.compaction.probes import ask_probes
from agents.compaction.self_check import audit_compaction


class CompactionHooks:
    """Publishing, rescue, handoff and the compaction report (mixed into ContextKeeper)."""

    # --- the built-in hooks, outermost first
    def _publish_hook(self, call: CompressCall, proceed) -> CompactionOutcome | None:
        """Emit COMPACTION_STARTED before and COMPACTION (with its audit) after."""
        loop = self.loop
        before = self.ctx.zones()
        loop.emit(Event(EventType.COMPACTION_STARTED, {"trigger": call.trigger}))
        outcome = proceed()
        if outcome is None:
            if call.trigger == "manual":  # a person asked: say that nothing was old enough
                self._report(CompactionOutcome(trigger=call.trigger,
                                               summary_before=self.ctx.summary_text,
                                               summary_after=self.ctx.summary_text), before,
                             call.instructions, noop=True)
            return None
        if outcome.fallback:
            loop.emit(Event(EventType.ERROR, error_payload("summary_failed",
                                                           outcome.fallback_reason, fatal=False)))
        self._write_handoff(outcome)
        probe = ask_probes(self.loop, outcome) if self.loop.spec.profile.probe_questions \
            else None
        self._report(outcome, before, call.instructions, probe=probe)
        return outcome

    def _anchor_rescue_hook(self, call: CompressCall, proceed) -> CompactionOutcome | None:
        """After compacting, rebuild the snapshot so every tier-1 anchor is back in view."""
        outcome = proceed()
        if outcome is not None:  # everything after the system prompt changes: refreeze
            self.ctx.words_floor = False  # and the person's words get their budget back
            self.refresh_snapshot()
            self.freeze_if_needed(force=True)
            missing = [a for a in self.loop.book.hard_constraints()
                       if a not in self.ctx.snapshot_text]
            call.extra["rescued_anchors"] = missing
        return outcome


    def _write_handoff(self, outcome: CompactionOutcome) -> None:
        loop = self.loop
        summary = self.ctx.summary or {}
        notes = loop.store.load_notes(loop.session_id)
        self.handoff = {
            "goal": loop.spec.goal,
            "done": [t.subject for t in loop.book.tasks if t.state == "completed"]
            + list(summary.get("current_state", [])),
            "ruled_out": list(summary.get("ruled_out", [])) + list(notes.get("ruled_out", [])),
            "open_questions": list(summary.get("open_questions", []))
            + list(notes.get("open_questions", [])),
            "external_refs": outcome.refs, "last_archive_turn": loop.turn,
            "hard_constraints": loop.book.hard_constraints()}
        loop.store.archive(loop.session_id, loop.turn, "handoff",
                           json.dumps(self.handoff, ensure_ascii=False))

    def _report(self, outcome: CompactionOutcome, before: dict[str, int],
                instructions: str = "", noop: bool = False,
                probe: dict[str, Any] | None = None) -> None:
        loop, ctx = self.loop, self.ctx
        # Numbers are checked in what a summary call just wrote; a snapshot rebuild or a
        # truncation wrote no summary, and re-reading the old one would cost a scan.
        written = ctx.summary_text if ctx.summary_text != outcome.summary_before else ""
        after_request = ctx.build([])
        context_text = "\n".join(m.get("content") or "" for m in after_request.messages)
        audit = audit_compaction(
            new_context_text=context_text, tier1_anchors=loop.book.hard_constraints(),
            snapshot_text=ctx.snapshot_text,
            open_tasks=[t.subject for t in loop.book.tasks if t.state != "completed"],
            new_summary_text=written,
            compacted_texts=[text for m in outcome.compacted
                             for text in (m.text, json.dumps(m.data.get("tool_calls") or ""))],
            previous_summary_text=outcome.summary_before)
        after = ctx.zones()
        # An anchor-triggered rebuild that moved nothing out and left every zone as it was
        # is a refresh, not a compaction: reported, but not counted as one (issue 12).
        refresh = (outcome.trigger == "anchor" and not outcome.archived_turns
                   and not outcome.fallback and after == before
                   and ctx.summary_text == outcome.summary_before)
        loop.emit(Event(EventType.COMPACTION, {
            "trigger": outcome.trigger, "before": before, "after": after, "refresh": refresh,
            "summary_before": outcome.summary_before, "summary_after": ctx.summary_text,
            "archived_turns": outcome.archived_turns, "refs": outcome.refs,
            "fallback": outcome.fallback, "fallback_reason": outcome.fallback_reason,
            "summary_calls": outcome.summary_calls, "raised_output": outcome.raised_output,
            "summary_forms": outcome.summary_forms, "audit": audit,
            "instructions": instructions, "noop": noop or refresh,
            **({"probe": probe} if probe is not None else {})}))
