"""Before every request: snapshot, triggers, compaction, hints and the final fit (feature C3).

The three triggers — rolling window, anchor change, budget — are checked here, at the
start of an iteration and never while the model is generating. Whatever they did, `fit`
then guarantees the request is within the window minus the output reserve.

Around every compaction run the built-in hooks (feature C14), outermost first: publishing
(COMPACTION_STARTED, then COMPACTION with the engine's own check and the hand-off note
archived), the metrics, then the anchor rescue (the snapshot rebuilt and refrozen so
every tier-1 anchor is back in view); the spec's own hooks run inside them.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from agents.compaction.clearing import Clearing, HistoryView, is_cleared, plan_clearing
from agents.compaction.compactor import CompactionOutcome, Compactor
from agents.compaction.hooks import CompactionMetrics, CompressCall, CompressHook, run_with_hooks
from agents.compaction.probes import ask_probes
from agents.compaction.self_check import audit_compaction
from agents.compaction.source_audit import SourceAudit
from agents.compaction.summary import StructuredSummary, render, shrink_to
from agents.compaction.units import split_for_compaction
from agents.context.hints import Hint, HintInjector
from agents.context.budget import MIN_WORDS_BUDGET
from agents.context.history import Msg
from agents.context.limits import FixedPart, check_request, preflight
from agents.context.snapshot import (GOAL_SHARE, SnapshotMemo, plain_item, render_snapshot,
                                     render_snapshot_parts)
from agents.context.working import Request, WorkingContext
from agents.counting.tokens import TOKENS_PER_MESSAGE
from agents.errors import error_event
from agents.events import BudgetEvent, Compaction, CompactionStarted, HintBlock
from agents.loop.cache_marks import agent_marks, plain_marks
from agents.loop.calls import CallRunner
from agents.loop.state import LoopDeps, LoopState
from agents.provider.client import ContextOverflow, ModelError, OutputOverflow
from agents.tools.base import ToolBoundary
from agents.tools.notes import render_notes
from agents.words import condensing, condensing_parts
from agents.words.anchors import clip_text
from agents.words.book import AnchorBook
from agents.words.in_force import HEADING, Message, PersonView, plain_sentence, read_view
from agents.words.person import without_superseded

ROUNDS_PER_MAX_ROUNDS = 4  # rounds kept before even small ones roll over, per max_rounds
DEFAULT_RETENTION = ToolBoundary()  # a tool the registry does not know (any more)
CLEAR_LINE = 0.5  # of the history zone: over it, old results are cleared (C3 a, C20)
CLEAR_BATCH = 0.5  # of the history zone: the least a batch frees, so the prefix holds a while
RESIDUE_FOLD = 0.5  # of the summary zone: digests past it are folded into the summary
WORDS_FLOOR_PART = "person's words (tier-1 sentences)"  # the preflight's part for the words block


class ContextKeeper:
    def __init__(self, deps: LoopDeps, state: LoopState, *, ctx: WorkingContext,
                 book: AnchorBook, hints: HintInjector, calls: CallRunner, audit: SourceAudit,
                 count_source: Callable[[], str]) -> None:
        self.deps, self.state, self.ctx = deps, state, ctx
        self.book, self.hints, self.calls, self.audit = book, hints, calls, audit
        self.count_source = count_source  # exact / calibrated / estimate, as it stands now
        self.compactor = Compactor(self.ctx, self._summarize,
                                   fresh=deps.spec.profile.tool_free_summaries)
        self._frozen_must: set[str] = set()  # hard constraints in the frozen snapshot
        self._must: set[str] = set()  # the lines the live snapshot must always hold
        self._riding: set[str] = set()  # new lines whose message the history holds whole
        self._said_over_share = False  # the drawer was told the person's words condensed
        self._said_words_over_window = 0  # the requirements' size the drawer was told of
        self._view: HistoryView | None = None  # the triggers' reading of the history
        self._view_of: tuple[tuple, PersonView] | None = None  # person_view's last answer
        self.snapshot_memo = SnapshotMemo()  # this session's snapshot renders' last answers
        # The last agent request's messages and cache marks (agents.loop.cache_marks).
        self._marked: tuple[list[dict[str, Any]], tuple[int, ...]] | None = None
        self._keep_memo: tuple[list, tuple[int, int, bool], int] | None = None  # _keep_from's
        self.metrics = CompactionMetrics()
        # Onion order: publishing sees the final state, after rescue and metrics ran.
        self.hooks: list[CompressHook] = [self._publish_hook, self.metrics,
                                          self._anchor_rescue_hook, *deps.spec.compress_hooks]

    # --- the per-iteration pipeline
    def prepare(self, hints: bool = True) -> tuple[Request, int]:
        deps, ctx, book = self.deps, self.ctx, self.book
        if deps.spec.unmanaged:  # the benchmark's baseline: append-only, nothing added
            request = ctx.build([])
            return request, ctx.budget().input_limit
        tasks = book.tasks
        ctx.final_phase = bool(tasks) and all(t.state == "completed" for t in tasks)
        anchor_changed = book.trigger_pending
        ctx.hard_constraints = book.hard_constraints()  # never condensed out of words
        before = ctx.zones() if anchor_changed else {}
        self.refresh_snapshot()
        self.preflight()
        manual = deps.store.take_compaction_request(deps.session_id)
        if manual is None:  # the model asked through compress_context (C13)
            manual = self.state.tool_state.pop("compaction_request", None)
        trigger = "manual" if manual is not None else self.clear_first(self.trigger())
        if trigger:  # the summary request repeats the current prefix; it refreezes after
            self.compact(trigger, instructions=manual or "")
        else:
            self.freeze_if_needed()
        self.condense_words()
        if anchor_changed:  # trigger (b): the snapshot was rebuilt; say so in the drawer
            book.trigger_pending = False
        # Before the first model call the snapshot is only being built: nothing sent yet
        # changes, so there is no compaction to report or count (the scenario's anchors).
        if anchor_changed and self.calls.ledger.calls:
            self._report(CompactionOutcome(trigger="anchor", summary_before=ctx.summary_text,
                                           summary_after=ctx.summary_text), before)
        hint_msgs = self.hint_messages() if hints else []
        self.fit(hint_msgs)
        request = ctx.build(hint_msgs)
        self._say_words_over_share()
        budget = ctx.budget()
        # How this model is counted (exact / calibrated / estimate) and the window divisor
        # go with every turn, and so does a window that is a guess (feature C18).
        deps.emit(BudgetEvent(
            window=budget.window, zones=request.zones, budgets=budget.budgets(),
            input_tokens=request.total, trigger_line=budget.trigger_line,
            warning_line=budget.warning_line, limit=budget.input_limit,
            free=budget.window - request.total - budget.reserve,
            count_source=self.count_source(), correction=round(ctx.correction, 4),
            count_reason=getattr(self.calls.calibration, "lost", "") or None,
            window_warning=" ".join(deps.spec.profile.warnings) or None))
        return request, budget.input_limit

    def refresh_snapshot(self, minimal: bool = False) -> None:
        """Render this turn's snapshot (changes show in the tail until the next freeze);
        `minimal` keeps only what never leaves (goal, tier 1, a person's edits)."""
        deps, ctx = self.deps, self.ctx
        text, must = render_snapshot_parts(
            goal=deps.spec.goal, anchors=self.book.anchors, tasks=self.book.tasks,
            notes_text=render_notes(deps.store.load_notes(deps.session_id)),
            budget_tokens=0 if minimal else self.snapshot_tokens(),
            count=ctx.count, memo=self.snapshot_memo, **self._person_view())
        self._must = set(must)
        ctx.set_snapshot(text)

    def person_view(self) -> PersonView:
        """The person's sentences in force, those a later message of theirs may have
        changed and the pairs that may not both hold (C19), read from their messages."""
        person = self.ctx.person
        # Asked three or four times a turn, and the messages change a few times a session:
        # kept while they are the same (compared by identity first, else by value).
        key = tuple(person.messages)
        if self._view_of is not None and self._view_of[0] == key:
            return self._view_of[1]
        view = read_view([Message(m.turn, m.source, m.ref, m.text) for m in key],
                         person.superseded())
        self._view_of = (key, view)
        return view

    def snapshot_tokens(self) -> int:
        return max(200, self.ctx.budget().snapshot)

    def _person_view(self) -> dict[str, Any]:
        """What the snapshot shows of the person's words: texts their edits replaced, and
        their sentences in force, listed in full while they take at most half the
        snapshot's budget (else the older messages are pointed at, C19); the goal's line
        cut to GOAL_SHARE of that budget when the goal is longer (snapshot.goal_text)."""
        person = self.ctx.person
        return {"superseded": person.superseded(), "view": self.person_view(),
                "list_tokens": self.ctx.budget().snapshot // 2,
                "person_texts": [m.text for m in person.messages],
                "goal_tokens": int(GOAL_SHARE * self.snapshot_tokens())}

    def freeze_if_needed(self, force: bool = False) -> None:
        """Write the snapshot into the stable part when it must be there (C17)."""
        ctx = self.ctx
        # What the person asked and a person's anchors are never only in the tail (C17):
        # when they changed, the frozen snapshot is rewritten though the cache restarts.
        must = self._must
        frozen = ctx.frozen_lines()
        if (force or not all(line in frozen or self._rides_in_history(line) for line in must)
                or (self._frozen_must - must) or ctx.since_tokens() > ctx.budget().since):
            ctx.freeze_snapshot()
            self._frozen_must = must
            self._riding.clear()
        elif not self._frozen_must:
            self._frozen_must = must & frozen

    def _rides_in_history(self, line: str) -> bool:
        """A new line of the in-force list that the request already carries verbatim: a
        sentence of a person's message still whole in the history (not a hard constraint,
        an edit or a pin, which the frozen snapshot always holds). Refreezing for it would
        restart the cache from the snapshot on for every follow-up the person sends; it
        waits in the tail until the next freeze, and the compaction that takes its
        message out of the history refreezes anyway."""
        if line in self._riding:
            return True
        if line == HEADING:
            return True  # the list's heading names nothing of the person's
        said = plain_item(self.person_view(), line, memo=self.snapshot_memo)
        if said is None:
            return False
        message = self.ctx.person.messages[said.index]
        # Whole: a message over the history's cap is cut there, its sentence not verbatim.
        if not any(m.ref == message.ref and m.text == message.text for m in self.ctx.history):
            return False
        self._riding.add(line)  # only a compaction removes it, and that refreezes
        return True

    def fixed_parts(self) -> list[FixedPart]:
        """What every request carries whatever compaction does (the preflight's parts)."""
        ctx = self.ctx
        minimal = render_snapshot(goal=self.deps.spec.goal, anchors=self.book.anchors, tasks=[],
                                  notes_text="", budget_tokens=0, count=ctx.count,
                                  memo=self.snapshot_memo, **self._person_view())
        # Counted every turn: the tool schemas' count is kept by the context, the minimal
        # snapshot's by its text cache (the same framing as Msg.build's).
        tools = ctx.tools_tokens()
        return [FixedPart("system prompt", ctx.fixed_tokens() - tools),
                FixedPart("tool schemas", tools),
                FixedPart("goal and tier-1 anchors", ctx.count(minimal) + ctx.count("system")
                          + TOKENS_PER_MESSAGE),
                FixedPart(WORDS_FLOOR_PART, ctx.person.minimum_tokens(
                    ctx.hard_constraints, ctx.count, snapshot=minimal)),
                FixedPart("output reserve", ctx.budget().reserve)]

    def words_ceiling(self) -> int:
        """The most tokens the person's words block can take in any request: the window
        less every fixed part but the block's own floor, and the block's message framing."""
        rest = sum(p.tokens for p in self.fixed_parts() if p.name != WORDS_FLOOR_PART)
        return self.ctx.budget().window - rest - self.ctx.count("system") - TOKENS_PER_MESSAGE

    def preflight(self) -> None:
        """Fail before any call when the fixed parts cannot fit (checked every turn: the
        window, the reserve and the tier-1 anchors can all change during a session).

        The person's requirements are the one part a person can grow mid-session (a pasted
        list of hundreds of "must" sentences, an anchor edited to a page): when they alone
        are what does not fit, and the rest leaves the block some room, the session goes
        on with the requirements that fit (agents.words.person cuts them, marked) and the
        drawer is told, rather than failing a session that was running well."""
        parts, window = self.fixed_parts(), self.ctx.budget().window
        words = next(p for p in parts if p.name == WORDS_FLOOR_PART)
        rest = sum(p.tokens for p in parts) - words.tokens
        if words.tokens + rest > window and rest + MIN_WORDS_BUDGET <= window:
            if self._said_words_over_window != words.tokens:
                self._said_words_over_window = words.tokens
                self.deps.emit(error_event("words_over_window", (
                    f"The person's requirements alone take {words.tokens:,} tokens as "
                    f"hard-constraint sentences, and a request at this window ({window:,} "
                    f"tokens) leaves them at most {window - rest:,} beside the system "
                    "prompt, the tool schemas, the task snapshot and the output reserve: "
                    "each request carries the newest messages' requirements that fit, in "
                    "order, every message marking what it leaves out and where its full "
                    "text is"), fatal=False))
            return
        preflight(parts, window)

    def trigger(self) -> str | None:
        """Which trigger fires now, if any: budget (c) before rolling window (a).

        The rolling window counts tokens: the history may use its own zone, less the
        "since then" tail, plus whatever the system, snapshot, words and summary zones
        leave unused, so a compaction (a summary call, and a new cached prefix) comes only
        when a real amount of history is there to fold. Many small rounds still roll over
        at ROUNDS_PER_MAX_ROUNDS × max_rounds.
        """
        ctx, budget = self.ctx, self.ctx.budget()
        zones = ctx.zones()
        projected = sum(v for k, v in zones.items() if k != "reserve")
        if projected >= budget.trigger_line or projected >= budget.budget_line:
            return "budget"
        # Rounds whose results were all cleared are a digest line each: they count in
        # tokens, not as rounds kept.
        rounds = self._history_view().live_rounds
        if rounds > ROUNDS_PER_MAX_ROUNDS * budget.max_rounds or (
                zones["history"] > self._allowance(zones) and rounds > budget.keep_rounds + 1):
            return "rolling"
        return None

    def _allowance(self, zones: dict[str, int]) -> int:
        """The history's room before the rolling window folds it."""
        budget = self.ctx.budget()
        # The tail ("since then") rides on the same request: it is paid from the history's
        # allowance, so a request stays within the sum of the zone budgets.
        # The words zone counts at its claim, not its share (C19): the share is room the
        # person's words may take, not room the history may plan to borrow.
        planned = {**budget.budgets(), "words": budget.words}
        return budget.history - zones["since"] + sum(
            max(0, planned[zone] - zones[zone])
            for zone in ("system", "snapshot", "words", "summary"))

    def clear_first(self, trigger: str | None) -> str | None:
        """The clearing tier (C20) before any summary; the trigger still due after it.

        With a trigger due, the old results are cleared only when that alone brings the
        request under it (else the summary folds them whole, from the cached prefix). With
        none due, the short-term history over its own zone (C3 a) clears a batch when the
        batch frees at least half that zone, so the prefix changes once for several turns;
        when the digests of earlier batches have outgrown the summary's zone, clearing
        cannot help any more and the summary tier folds them."""
        ctx = self.ctx
        if not ctx.config.clear_tool_results:
            return trigger
        budget = ctx.budget()
        history = ctx.history_tokens()
        line = int(budget.history * CLEAR_LINE)
        if trigger is None and history <= line:
            return None
        view = self._history_view()
        units = view.units
        if trigger is None and view.residue > budget.summary_cap * RESIDUE_FOLD:
            return "rolling"  # the digests outgrew what a summary of them takes: fold
        keep_from = self._keep_from(units)
        if trigger is None and view.clearable(keep_from) < line * CLEAR_BATCH:
            return None  # not a batch yet: no digest is written until one is
        plan = plan_clearing(units, keep_from, self._retention, ctx.counter)
        if trigger is not None:
            if plan is None:
                return trigger
            kept = ctx.history
            ctx.history = plan.history
            still = self.trigger()
            ctx.history = kept
            if still is not None:
                return trigger
            self._clear(plan, trigger)
            return None
        if plan is not None and plan.saved >= line * CLEAR_BATCH:
            self._clear(plan, "rolling")
        return None

    def _history_view(self) -> HistoryView:
        """The history's units and what the triggers read of them, worked out again only
        when the history changed (its messages are never changed in place, so the tuple
        of them tells, as it does for the working context's own caches): the triggers and
        the clearing tier read them several times a turn, and most turns add a round to a
        history of dozens."""
        key = tuple(self.ctx.history)
        if self._view is None or self._view.key != key:
            grown = self._view.grown(key) if self._view is not None else None
            self._view = grown or HistoryView(key, self.ctx.units())
        return self._view

    def _clearing_plan(self, emergency: bool = False) -> Clearing | None:
        ctx = self.ctx
        if not ctx.config.clear_tool_results:
            return None
        units = self._history_view().units
        return plan_clearing(units, self._keep_from(units, emergency), self._retention,
                             ctx.counter)

    def _keep_from(self, units: list, emergency: bool = False) -> int:
        """The first unit of the recent rounds, which are never cleared (as compaction
        keeps them). Kept for the last list of units asked about: the triggers, the
        clearing tier and the cache marks ask about the same history in one turn."""
        budget = self.ctx.budget()
        keep_tokens = min(budget.keep_tokens, budget.history // 2)
        key = (keep_tokens, budget.keep_rounds, emergency)
        if self._keep_memo is not None and self._keep_memo[0] is units \
                and self._keep_memo[1] == key:
            return self._keep_memo[2]
        found = split_for_compaction(units, keep_tokens=keep_tokens,
                                     keep_rounds=budget.keep_rounds, emergency=emergency)
        self._keep_memo = (units, key, found)
        return found

    def _retention(self, name: str) -> ToolBoundary:
        tool = self.deps.tools.get(name)
        return tool.boundary if tool is not None else DEFAULT_RETENTION

    def cache_marks(self, request: Request) -> tuple[int, ...]:
        """The request's cache breakpoints (agents.loop.cache_marks), for a provider
        whose profile takes them; none otherwise."""
        if not self.deps.spec.profile.cache_marks:
            return ()
        if self.deps.spec.unmanaged:
            return plain_marks(request.messages)
        earlier = -1
        if self._marked is not None:
            messages, marks = self._marked
            # A list compares its items by identity first: the kept messages cost nothing.
            earlier = next((m for m in reversed(marks) if m < len(request.messages)
                            and request.messages[:m + 1] == messages[:m + 1]), -1)
        extends = self.next_request_extends(request)
        marks = agent_marks(request, extends, earlier,
                            -1 if extends else self._kept_through(request))
        self._marked = (request.messages, marks)
        return marks

    def _kept_through(self, request: Request) -> int:
        """The request's last message that the expected clear leaves as it is: the one
        before the oldest result a clear may take, read off the triggers' view of the
        history (retention ignored, so never later than the clear's own first change);
        -1 when no clear is expected."""
        ctx = self.ctx
        if not ctx.config.clear_tool_results or "history" not in request.zones_of:
            return -1
        view = self._history_view()
        units = view.units
        keep_from = min(self._keep_from(units), len(units))
        # Nothing old enough yet: the oldest kept round is the next to go.
        first = view.first_clearable(keep_from)
        offset = sum(len(unit.messages) for unit in units[:first])
        if first < len(units):
            offset += next((i for i, m in enumerate(units[first].messages)
                            if m.role == "tool" and m.ref and not is_cleared(m)), 0)
        return request.zones_of.index("history") + offset - 1

    def next_request_extends(self, request: Request) -> bool:
        """Whether the next request is expected to repeat this one's history and add to
        it, rather than rewrite it: no trigger and no clearing batch due once the newest
        round's size is added again. A wrong yes costs a quarter of that round's price (a
        write nothing reads); a wrong no costs more (the round is written a request late
        and not read in between), so only a rewrite the lines make clear says no."""
        ctx, budget = self.ctx, self.ctx.budget()
        growth = newest = 0
        for message, zone, tokens in zip(reversed(request.messages),
                                         reversed(request.zones_of),
                                         reversed(request.tokens_of)):
            if zone != "history":
                continue
            growth += tokens
            if message.get("role") == "tool":
                newest += tokens
            elif message.get("role") == "assistant":
                break
        zones = {**request.zones, "history": request.zones["history"] + growth}
        projected = sum(v for k, v in zones.items() if k not in ("reserve", "hints"))
        if projected >= budget.trigger_line or projected >= budget.budget_line:
            return False
        view = self._history_view()
        if ctx.config.clear_tool_results:
            line = int(budget.history * CLEAR_LINE)
            if zones["history"] > line and (view.clearable(self._keep_from(view.units))
                                            + newest >= line * CLEAR_BATCH):
                return False
        rounds = view.live_rounds + 1
        return not (rounds > ROUNDS_PER_MAX_ROUNDS * budget.max_rounds or (
            zones["history"] > self._allowance(zones) and rounds > budget.keep_rounds + 1))

    def _clear(self, plan: Clearing, trigger: str) -> None:
        """Apply a batch and say so in the drawer (a compaction of its own kind)."""
        ctx = self.ctx
        before = ctx.zones()
        ctx.history = plan.history
        # The triggers' view follows the batch: only the units it changed are read again.
        view = self._view.cleared(tuple(ctx.history), plan) if self._view is not None else None
        if view is not None:
            self._view = view
        self.deps.emit(Compaction(trigger=trigger, kind="clear", tokens_saved=plan.saved,
                                  before=before, after=ctx.zones(),
                                  summary_before=ctx.summary_text,
                                  summary_after=ctx.summary_text,
                                  archived_turns=plan.turns, refs=plan.refs,
                                  digests=plan.digests))

    def compact(self, trigger: str, instructions: str = "", emergency: bool = False) -> None:
        call = CompressCall(trigger=trigger, instructions=instructions, emergency=emergency)
        run_with_hooks(self.hooks, call, lambda: self.compactor.compact(
            trigger, constraints=self.book.hard_constraints(), instructions=instructions,
            emergency=emergency))

    def fit(self, hint_msgs: list[Msg]) -> None:
        """Make the request fit, in order: compact all, shrink summary, cut the newest turn."""
        ctx = self.ctx
        budget = ctx.budget()
        limit = budget.input_limit
        zones = ctx.zones(hint_msgs)
        total = sum(v for k, v in zones.items() if k != "reserve")  # ctx.input_tokens
        if total <= limit:
            # Nearly every turn: none of the steps below would change anything (each acts
            # only on a request over the limit), so the request is measured once, not at
            # each of them (a dozen measures of every zone a turn).
            check_request(total, limit, budget.window, budget.reserve, zones)
            return
        if ctx.input_tokens(hint_msgs) > limit and (plan := self._clearing_plan(True)):
            self._clear(plan, "budget")  # before any summary, even the emergency one
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
        for floor in (False, True):
            if floor:
                if ctx.input_tokens(hint_msgs) <= limit:
                    break
                # The last resort (C19): the person's words sent whole fit their share, so
                # this comes only when the fixed parts and the newest turn leave less.
                # What the request leaves the block: its limit less every other zone.
                ctx.words_room = limit - (ctx.input_tokens(hint_msgs)
                                          - ctx.zones(hint_msgs)["words"])
                ctx.words_floor = True  # the person's words keep only what fits that room
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
            self.deps.emit(error_event(
                "summary_failed", f"the summary ({self.ctx.count(dropped)} tokens) was dropped "
                "from this request: even shrunk to its overview it did not fit next to the "
                "system prompt, the task snapshot and the newest turn", fatal=False))
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
        deps, ctx = self.deps, self.ctx
        budget = ctx.budget()
        found = self.hints.hints_for_turn(now=deps.clock(), tasks=self.book.tasks,
                                          input_tokens=ctx.input_tokens(),
                                          compaction_at=budget.trigger_line,
                                          warning_line=budget.warning_line)
        found = [*found, *self._contradiction_hints()]
        if not found:
            return []
        for hint in found:
            deps.emit(HintBlock(kind=hint.kind, text=hint.text))
        body = "\n".join(f"[{h.kind}] {h.text}" for h in found)
        return [Msg.build(ctx.counter, {"role": "user",
                                        "content": f"<system-hint>\n{body}\n</system-hint>"},
                          self.state.turn)]

    def _say_words_over_share(self) -> None:
        """The person's words alone past their share (C19): said once in the drawer, with
        how much is sent verbatim and what was condensed; again if it happens anew."""
        ctx = self.ctx
        block = ctx.words_msg()
        condensed = ctx.person.condensed if block is not None else []
        grouped = ctx.person.grouped if block is not None else []
        if grouped and not condensed and not self._said_over_share:
            budget, messages = ctx.budget(), ctx.person.messages
            total = sum(ctx.count(m.text) for m in messages)
            self.deps.emit(error_event("words_over_share", (
                f"The person's messages ({total:,} tokens) exceed their share of the input "
                f"limit ({budget.words_share:,} tokens, words_share "
                f"{ctx.config.words_share:g}) as written: {len(grouped)} of {len(messages)} ("
                + ", ".join(f"turn {m.turn}" for m in grouped[:5])
                + (" …" if len(grouped) > 5 else "")
                + ") are sent with a sentence said again given once and sentences that "
                f"differ only in a figure given once with their figures listed "
                f"({block.tokens:,} tokens in all), nothing left out, their full text one "
                "read_ref away"), fatal=False))
        elif condensed and not self._said_over_share:
            budget, messages = ctx.budget(), ctx.person.messages
            total = sum(ctx.count(m.text) for m in messages)
            kept = len(messages) - len(condensed)
            used = ctx.person.model_used
            if used is not None:
                calls = f"call {used.call}"
                if used.parts > 1:  # a part the same as another (or cached) is asked once
                    numbers = used.calls
                    listed = (f"{numbers[0]}–{numbers[-1]}"
                              if numbers and numbers[-1] - numbers[0] == len(numbers) - 1
                              else ", ".join(map(str, numbers[:8]))
                              + (" …" if len(numbers) > 8 else ""))
                    calls = f"in {used.parts} parts, {len(numbers)} requests: calls {listed}"
                how = (f"are condensed by the model ({calls}) into the requirements "
                       f"in force and checked: {len(used.lines)} lines used, "
                       f"{len(used.refused)} refused as not the person's words, "
                       f"{used.verbatim_sentences} sentences no line covered kept verbatim")
                block = ctx.words_msg()
                if block is not None and block.tokens > budget.words_share:
                    how += (f"; the block still takes {block.tokens:,} tokens, over the share "
                            "(nothing is left out: the history has less room)")
            else:
                failed = ctx.person.model_failed
                how = ("are cut to the room the request leaves (their constraint sentences "
                       "first, then their least repeated ones), what is left out marked in "
                       "the block"
                       + (f" ({failed})" if failed else ""))
            self.deps.emit(error_event("words_over_share", (
                f"The person's messages ({total:,} tokens) exceed their share of the input "
                f"limit ({budget.words_share:,} tokens, words_share "
                f"{ctx.config.words_share:g}): {kept} of {len(messages)} are sent verbatim; "
                f"the oldest {len(condensed)} ("
                + ", ".join(f"turn {m.turn}" for m in condensed[:5])
                + (" …" if len(condensed) > 5 else "")
                + f") {how}, their full text one read_ref away"), fatal=False))
        self._said_over_share = bool(condensed or grouped)

    def condense_words(self) -> None:
        """The person's words past their share (C19): the older messages go through a
        model request that writes the requirements in force, checked by the engine
        (agents/words/condensing.py), or through several when one cannot hold them with
        its answer (agents/words/condensing_parts.py). Asked once per set of older
        messages; a request that cannot be made or answered leaves the rule's condensing,
        said in the drawer."""
        ctx = self.ctx
        ctx.words_msg()  # renders the block: it names the older messages it wants condensed
        wanted = ctx.person.wanted
        if wanted is None:
            return
        older, later = wanted
        budget = ctx.budget()
        # A request whose answer could never be used is not made: every checked answer
        # holds every figure of the older messages, and the block it makes must fit
        # beside the parts no compaction shrinks (the window's most for the block).
        least = ctx.person.least_condensed_tokens(older, later, ctx.count)
        room = self.words_ceiling()
        if least > room:
            ctx.person.store_condensed(condensing.Condensed(
                key=condensing.key_of(older), unfit=True, failed=(
                    f"no condensing was asked of the model: a checked answer keeps every "
                    f"figure of every sentence, at least {least:,} tokens with the block's "
                    f"header, and no request can leave the block more than {room:,}")))
            self._said_over_share = False
            return

        def ask(messages: list[dict[str, str]], tokens: int,
                max_tokens: int) -> tuple[str, int, str]:
            try:
                reply = self.calls.summary_call(messages, tokens=tokens,
                                                limit=budget.input_limit,
                                                max_tokens=max_tokens, turn=self.state.turn)
            except ModelError as exc:
                self.deps.emit(error_event(exc.code, (
                    f"The request that condenses the person's older messages failed ({exc}); "
                    "they are condensed by rule, marked, until the set of older messages "
                    "changes"), fatal=False))
                return "", 0, f"the condensing request failed: {exc}"
            return reply.content or "", self.calls.ledger.calls, ""

        result = condensing_parts.condense(
            older, later, window=budget.window, limit=budget.input_limit, count=ctx.count,
            count_request=ctx.counter.request, ask=ask, cache=ctx.person.part_answers,
            constraints=ctx.hard_constraints)
        ctx.person.store_condensed(result)
        self._said_over_share = False  # what the drawer was told no longer holds

    def _contradiction_hints(self) -> list[Hint]:
        """Each pair of the person's constraints that may not both hold, told once (C19):
        surfaced, never resolved by the engine."""
        hints = []
        for conflict in self.person_view().conflicts:
            first = clip_text(plain_sentence(conflict.first.text))
            second = clip_text(plain_sentence(conflict.second.text))
            if (first, second) in self.hints.told_contradictions:
                continue
            self.hints.told_contradictions.add((first, second))
            where = (f"both in the message of turn {conflict.first.turn}"
                     if conflict.first.index == conflict.second.index else
                     f"turn {conflict.first.turn} and turn {conflict.second.turn}")
            hints.append(Hint("contradiction", (
                f'The person\'s requirements "{first}" and "{second}" ({where}) give '
                f"different figures for the same thing ({conflict.values[0]} / "
                f"{conflict.values[1]}) and may not both hold. Both stay in their words and "
                "the task snapshot; ask the person which one applies before relying on "
                "either.")))
        return hints

    def _summarize(self, messages, max_tokens, tokens, tools=None, tool_choice=None):
        budget = self.ctx.budget()
        return self.calls.summary_call(messages, tokens=tokens, limit=budget.input_limit,
                                       max_tokens=max_tokens, turn=self.state.turn, tools=tools,
                                       tool_choice=tool_choice,
                                       parts=self.compactor.request_parts)

    # --- the built-in hooks, outermost first
    def _publish_hook(self, call: CompressCall, proceed) -> CompactionOutcome | None:
        """Emit COMPACTION_STARTED before and COMPACTION (with its audit) after."""
        emit = self.deps.emit
        before = self.ctx.zones()
        emit(CompactionStarted(trigger=call.trigger))
        outcome = proceed()
        if outcome is None:
            if call.trigger == "manual":  # a person asked: say that nothing was old enough
                self._report(CompactionOutcome(trigger=call.trigger,
                                               summary_before=self.ctx.summary_text,
                                               summary_after=self.ctx.summary_text), before,
                             call.instructions, noop=True)
            return None
        if outcome.fallback:
            emit(error_event("summary_skipped" if outcome.skipped else "summary_failed",
                             outcome.fallback_reason, fatal=False))
        self._write_handoff(outcome)
        probe = self._ask_probes(outcome) if self.deps.spec.profile.probe_questions else None
        self._report(outcome, before, call.instructions, probe=probe)
        return outcome

    def _anchor_rescue_hook(self, call: CompressCall, proceed) -> CompactionOutcome | None:
        """After compacting, rebuild the snapshot so every tier-1 anchor is back in view."""
        outcome = proceed()
        if outcome is not None:  # everything after the system prompt changes: refreeze
            self.ctx.words_floor = False  # and the person's words get their budget back
            self._drop_superseded(outcome)
            self.refresh_snapshot()
            self.freeze_if_needed(force=True)
            missing = [a for a in self.book.hard_constraints()
                       if a not in self.ctx.snapshot_text]
            call.extra["rescued_anchors"] = missing
        return outcome

    def _drop_superseded(self, outcome: CompactionOutcome) -> None:
        """The summary's goal and constraints keep nothing a person's later edit replaced
        (C19): the summarizer read the old text in the goal or the archive."""
        ctx, gone = self.ctx, self.ctx.person.superseded()
        if not gone or not ctx.summary:
            return
        summary = StructuredSummary.from_dict(ctx.summary)
        kept = without_superseded(summary.task_overview, gone)
        if kept != summary.task_overview:
            summary.task_overview = kept
            ctx.set_summary(summary.to_dict(), render(summary))
            outcome.summary_after = ctx.summary_text

    def _write_handoff(self, outcome: CompactionOutcome) -> None:
        deps, book = self.deps, self.book
        summary = self.ctx.summary or {}
        notes = deps.store.load_notes(deps.session_id)
        self.state.handoff = {
            "goal": deps.spec.goal,
            "done": [t.subject for t in book.tasks if t.state == "completed"]
            + list(summary.get("current_state", [])),
            "ruled_out": list(summary.get("ruled_out", [])) + list(notes.get("ruled_out", [])),
            "open_questions": list(summary.get("open_questions", []))
            + list(notes.get("open_questions", [])),
            "external_refs": outcome.refs, "last_archive_turn": self.state.turn,
            "hard_constraints": book.hard_constraints()}
        deps.store.archive(deps.session_id, self.state.turn, "handoff",
                           json.dumps(self.state.handoff, ensure_ascii=False))

    def _report(self, outcome: CompactionOutcome, before: dict[str, int],
                instructions: str = "", noop: bool = False,
                probe: dict[str, Any] | None = None) -> None:
        ctx, book = self.ctx, self.book
        # Numbers are checked in what a summary call just wrote; a snapshot rebuild or a
        # truncation wrote no summary, and re-reading the old one would cost a scan.
        written = ctx.summary_text if ctx.summary_text != outcome.summary_before else ""
        after_request = ctx.build([])
        context_text = "\n".join(m.get("content") or "" for m in after_request.messages)
        audit = audit_compaction(
            new_context_text=context_text, tier1_anchors=book.hard_constraints(),
            snapshot_text=ctx.snapshot_text,
            open_tasks=[t.subject for t in book.tasks if t.state != "completed"],
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
        self.deps.emit(Compaction(trigger=outcome.trigger, before=before, after=after,
                                  refresh=refresh, summary_before=outcome.summary_before,
                                  summary_after=ctx.summary_text,
                                  archived_turns=outcome.archived_turns, refs=outcome.refs,
                                  fallback=outcome.fallback,
                                  fallback_reason=outcome.fallback_reason,
                                  summary_calls=outcome.summary_calls,
                                  summary_calls_discarded=0 if outcome.fallback
                                  else outcome.summary_calls - outcome.merged_calls,
                                  raised_output=outcome.raised_output,
                                  summary_forms=outcome.summary_forms, audit=audit,
                                  instructions=instructions, noop=noop or refresh, probe=probe))

    def _ask_probes(self, outcome: CompactionOutcome) -> dict[str, Any] | None:
        deps = self.deps
        return ask_probes(outcome, ctx=self.ctx, audit=self.audit,
                          read_ref=lambda ref: deps.store.read_ref(deps.session_id, ref),
                          tasks=lambda: deps.store.load_tasks(deps.session_id),
                          ask=lambda messages, tokens, limit, max_tokens: self.calls.probe_call(
                              messages, tokens=tokens, limit=limit, max_tokens=max_tokens,
                              turn=self.state.turn),
                          fresh=deps.spec.profile.tool_free_summaries)
