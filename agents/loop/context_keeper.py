"""Before every request: snapshot, triggers, compaction, hints and the final fit (SPEC C3).

The three triggers — rolling window, anchor change, budget — are checked here, at the
start of an iteration and never while the model is generating. Whatever they did, `fit`
then guarantees the request is within the window minus the output reserve.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents.compaction.compactor import CompactionOutcome, Compactor
from agents.compaction.builtin_hooks import CompactionHooks
from agents.context.working import Request
from agents.events import Event, EventType
from agents.context.history import Msg
from agents.compaction.hooks import CompactionMetrics, CompressCall, CompressHook, run_with_hooks
from agents.context.limits import FixedPart, check_request, preflight
from agents.provider.client import ContextOverflow, OutputOverflow
from agents.context.snapshot import render_snapshot
from agents.errors import error_payload
from agents.compaction.summary import StructuredSummary, render, shrink_to
from agents.tools.notes import render_notes
from agents.counting.tokens import TOKENS_PER_MESSAGE

ROUNDS_PER_MAX_ROUNDS = 4  # rounds kept before even small ones roll over, per max_rounds

if TYPE_CHECKING:
    from agents.loop.agent_loop import AgentLoop


class ContextKeeper(CompactionHooks):
    def __init__(self, loop: "AgentLoop") -> None:
        self.loop = loop
        self.ctx = loop.ctx
        self.compactor = Compactor(self.ctx, self._summarize,
                                   fresh=loop.spec.profile.tool_free_summaries)
        self.handoff: dict[str, Any] = {}
        self._frozen_must: set[str] = set()  # hard constraints in the frozen snapshot
        self.metrics = CompactionMetrics()
        # Onion order: publishing sees the final state, after rescue and metrics ran.
        self.hooks: list[CompressHook] = [self._publish_hook, self.metrics,
                                          self._anchor_rescue_hook, *loop.spec.compress_hooks]

    # --- the per-iteration pipeline
    def prepare(self, hints: bool = True) -> tuple[Request, int]:
        loop, ctx = self.loop, self.ctx
        if loop.spec.unmanaged:  # the benchmark's baseline: append-only, nothing added
            request = ctx.build([])
            return request, ctx.budget().input_limit
        tasks = loop.book.tasks
        ctx.final_phase = bool(tasks) and all(t.state == "completed" for t in tasks)
        anchor_changed = loop.book.trigger_pending
        ctx.hard_constraints = loop.book.hard_constraints()  # never condensed out of words
        before = ctx.zones() if anchor_changed else {}
        self.refresh_snapshot()
        self.preflight()
        manual = loop.store.take_compaction_request(loop.session_id)
        if manual is None:  # the model asked through compress_context (C13)
            manual = loop.tool_state.pop("compaction_request", None)
        trigger = "manual" if manual is not None else self.trigger()
        if trigger:  # the summary request repeats the current prefix; it refreezes after
            self.compact(trigger, instructions=manual or "")
        else:
            self.freeze_if_needed()
        if anchor_changed:  # trigger (b): the snapshot was rebuilt; say so in the drawer
            loop.book.trigger_pending = False
            self._report(CompactionOutcome(trigger="anchor", summary_before=ctx.summary_text,
                                           summary_after=ctx.summary_text), before)
        hint_msgs = self.hint_messages() if hints else []
        self.fit(hint_msgs)
        request = ctx.build(hint_msgs)
        budget = ctx.budget()
        loop.emit(Event(EventType.BUDGET, {
            "window": budget.window, "zones": request.zones, "budgets": budget.budgets(),
            "input_tokens": request.total, "trigger_line": budget.trigger_line,
            "warning_line": budget.warning_line, "limit": budget.input_limit,
            "free": budget.window - request.total - budget.reserve,
            # Counting per model: exact / calibrated / estimate, and the window divisor.
            "count_source": loop.count_source, "correction": round(ctx.correction, 4),
            # SPEC C18: a window that is a guess is said next to it, every turn.
            **({"window_warning": " ".join(loop.spec.profile.warnings)}
               if loop.spec.profile.warnings else {})}))
        return request, budget.input_limit

    def refresh_snapshot(self, minimal: bool = False) -> None:
        """Render this turn's snapshot (changes show in the tail until the next freeze);
        `minimal` keeps only what never leaves (goal, tier 1, a person's edits)."""
        loop, ctx = self.loop, self.ctx
        text = render_snapshot(goal=loop.spec.goal, anchors=loop.book.anchors,
                               tasks=loop.book.tasks,
                               notes_text=render_notes(loop.store.load_notes(loop.session_id)),
                               budget_tokens=0 if minimal else max(200, ctx.budget().snapshot),
                               count=ctx.count)
        ctx.set_snapshot(text)

    def freeze_if_needed(self, force: bool = False) -> None:
        """Write the snapshot into the stable part when it must be there (C17)."""
        loop, ctx = self.loop, self.ctx
        # Hard constraints and a person's anchors are never only in the tail (C17): when
        # they changed, the frozen snapshot is rewritten even though the cache restarts.
        must = {f"- {a.text}" for a in loop.book.anchors
                if a.active and (a.tier == 1 or a.source == "admin")}
        frozen = set(ctx.snapshot_text.splitlines())
        if (force or not must <= frozen or (self._frozen_must - must)
                or ctx.since_tokens() > ctx.budget().since):
            ctx.freeze_snapshot()
            self._frozen_must = must
        elif not self._frozen_must:
            self._frozen_must = must & frozen

    def fixed_parts(self) -> list[FixedPart]:
        """What every request carries whatever compaction does (the preflight's parts)."""
        ctx, loop = self.ctx, self.loop
        minimal = render_snapshot(goal=loop.spec.goal, anchors=loop.book.anchors, tasks=[],
                                  notes_text="", budget_tokens=0, count=ctx.count)
        # Counted every turn: the tool schemas' count is kept by the context, the minimal
        # snapshot's by its text cache (the same framing as Msg.build's).
        tools = ctx.tools_tokens()
        return [FixedPart("system prompt", ctx.fixed_tokens() - tools),
                FixedPart("tool schemas", tools),
                FixedPart("goal and tier-1 anchors", ctx.count(minimal) + ctx.count("system")
                          + TOKENS_PER_MESSAGE),
                FixedPart("person's words (tier-1 sentences)", ctx.person.minimum_tokens(
                    ctx.hard_constraints, ctx.count, snapshot=minimal)),
                FixedPart("output reserve", ctx.budget().reserve)]

    def preflight(self) -> None:
        """Fail before any call when the fixed parts cannot fit (checked every turn: the
        window, the reserve and the tier-1 anchors can all change during a session)."""
        preflight(self.fixed_parts(), self.ctx.budget().window)

    def trigger(self) -> str | None:
        """Which trigger fires now, if any: budget (c) before rolling window (a).

        The rolling window counts tokens: the history may use its own zone, less the
        "since then" tail, plus whatever the system, snapshot, words and summary zones
        leave unused, so a compaction (a summary
        call, and a new cached prefix) comes only when a real amount of history is there
        to fold. Many small rounds still roll over at ROUNDS_PER_MAX_ROUNDS × max_rounds.
        """
        ctx, budget = self.ctx, self.ctx.budget()
        zones = ctx.zones()
        projected = sum(v for k, v in zones.items() if k != "reserve")
        if projected >= budget.trigger_line or projected >= budget.budget_line:
            return "budget"
        units = ctx.units()
        rounds = sum(1 for u in units if u.is_round)
        # The tail ("since then") rides on the same request: it is paid from the history's
        # allowance, so a request stays within the sum of the zone budgets.
        allowance = budget.history - zones["since"] + sum(
            max(0, budget.budgets()[zone] - zones[zone])
            for zone in ("system", "snapshot", "words", "summary"))
        if rounds > ROUNDS_PER_MAX_ROUNDS * budget.max_rounds or (
                zones["history"] > allowance and rounds > budget.keep_rounds + 1):
            return "rolling"
        return None

    def compact(self, trigger: str, instructions: str = "", emergency: bool = False) -> None:
        call = CompressCall(trigger=trigger, instructions=instructions, emergency=emergency)
        run_with_hooks(self.hooks, call, lambda: self.compactor.compact(
            trigger, constraints=self.loop.book.hard_constraints(), instructions=instructions,
            emergency=emergency))

    def fit(self, hint_msgs: list[Msg]) -> None:
        """Make the request fit, in order: compact all, shrink summary, cut the newest turn."""
        ctx = self.ctx
        limit = ctx.budget().input_limit
        if ctx.input_tokens(hint_msgs) > limit:
            self.compact("budget", emergency=True)
        over = ctx.input_tokens(hint_msgs) - limit
        if over > 0 and ctx.summary_text:
            target = max(0, ctx.zones()["summary"] - over)
            shrunk = shrink_to(StructuredSummary.from_dict(ctx.summary), target, ctx.count,
                               ctx.count.lines)
            ctx.set_summary(shrunk.to_dict(), render(shrunk))
        if ctx.input_tokens(hint_msgs) > limit:
            self.refresh_snapshot(minimal=True)  # key data, tasks and notes wait for room
            if ctx.input_tokens(hint_msgs) > limit:  # the frozen copy still holds them all
                ctx.freeze_snapshot()  # the cached prefix restarts: better than failing
        if ctx.input_tokens(hint_msgs) > limit:
            ctx.words_floor = True  # the person's words keep only their constraints
        for _ in range(2):  # a person's message cut here joins the words block: re-measure
            over = ctx.input_tokens(hint_msgs) - limit
            for i in sorted(range(len(ctx.history)), key=lambda i: -ctx.history[i].tokens):
                msg = ctx.history[i]
                if over <= 0:
                    break
                if msg.tokens > 24 and msg.text:
                    ctx.history[i] = ctx.shortened(msg, max(16, msg.tokens - over))
                    over = ctx.input_tokens(hint_msgs) - limit
        if ctx.input_tokens(hint_msgs) > limit:
            hint_msgs.clear()
        if ctx.input_tokens(hint_msgs) > limit and ctx.summary_text:
            # The last resort before failing: the summary is not a fixed part (tier 1 is in
            # the snapshot, the folded messages are in the archive), so it goes, visibly.
            dropped = ctx.summary_text
            ctx.set_summary(None, "")
            self.loop.emit(Event(EventType.ERROR, error_payload(
                "summary_failed", f"the summary ({self.ctx.count(dropped)} tokens) was dropped "
                "from this request: even shrunk to its overview it did not fit next to the "
                "system prompt, the task snapshot and the newest turn", fatal=False)))
        budget = ctx.budget()
        # The hard check: whatever happened above, a request over the limit is never sent.
        check_request(ctx.input_tokens(hint_msgs), limit, budget.window, budget.reserve,
                      ctx.zones(hint_msgs))

    def recover_overflow(self, exc: ContextOverflow, our_tokens: int) -> tuple[Request, int]:
        """The provider says we were over (C16): believe its count, compact, rebuild.

        When the overflow came from the model's own answer (OutputOverflow) the count is
        not believed: only the compaction, which changes what the model continues from."""
        ctx = self.ctx
        if 0 < exc.limit < ctx.window:
            ctx.window = exc.limit
        if isinstance(exc, OutputOverflow):
            pass  # its figure counts the model's output too: the correction stays
        elif our_tokens and exc.requested:
            ctx.correction = max(ctx.correction, exc.requested / our_tokens * 1.02)
        elif our_tokens:  # no figures in the text (Ollama): aim 15 % under what was refused
            ctx.correction = max(ctx.correction, ctx.window / (our_tokens * 0.85
                                                               + ctx.budget().reserve))
        self.preflight()  # the window just shrank: the fixed parts may no longer fit
        self.compact("overflow", emergency=True)
        self.fit([])
        request = ctx.build([])
        return request, ctx.budget().input_limit

    # --- pieces
    def hint_messages(self) -> list[Msg]:
        loop, ctx = self.loop, self.ctx
        budget = ctx.budget()
        found = loop.hints.hints_for_turn(now=loop.clock(), tasks=loop.book.tasks,
                                          input_tokens=ctx.input_tokens(),
                                          compaction_at=budget.trigger_line,
                                          warning_line=budget.warning_line)
        if not found:
            return []
        for hint in found:
            loop.emit(Event(EventType.HINT_BLOCK, {"kind": hint.kind, "text": hint.text}))
        body = "\n".join(f"[{h.kind}] {h.text}" for h in found)
        return [Msg.build(ctx.counter, {"role": "user",
                                        "content": f"<system-hint>\n{body}\n</system-hint>"},
                          loop.turn)]

    def _summarize(self, messages, max_tokens, tokens, tools=None):
        budget = self.ctx.budget()
        return self.loop.calls.summary_call(messages, tokens=tokens, limit=budget.input_limit,
                                            max_tokens=max_tokens, turn=self.loop.turn,
                                            tools=tools)
