"""The agent loop (feature T1): model call → tool calls → results, one committed turn at a time.

Each iteration reads people's edits, rebuilds the snapshot, applies the triggers (all
compaction happens here, before the request, never while the model generates), adds
hints, sends the request and runs the tools. The state is saved at the end of every turn,
so a worker that dies loses at most the turn in flight (feature T8).

The loop owns one `LoopState` and one `LoopDeps` (agents/loop/state.py) and hands its
collaborators what they use: the ContextKeeper prepares each request, ToolTurns runs the
tools, Answers takes a reply without tool calls, Delegations waits for sub-agents.
"""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from agents.compaction.compactor import CompactionFailed
from agents.compaction.fresh_requests import answer_text
from agents.compaction.source_audit import SourceAudit
from agents.config import input_too_long
from agents.context.budget import plan_budget
from agents.context.hints import HintInjector
from agents.context.limits import PreflightError, RequestTooLarge
from agents.context.working import Request, WorkingContext
from agents.counting.calibration import TokenCalibration
from agents.counting.server_tokens import ServerTokenCounter, make_counter
from agents.errors import error_event
from agents.events import (AssistantMessage, EventSink, SessionFinished, SessionStarted,
                           TurnStarted, UserMessage)
from agents.loop.answers import Answers
from agents.loop.approvals import Approvals
from agents.loop.calls import CallLedger, CallRunner
from agents.loop.commits import CommitPoints
from agents.loop.context_keeper import ContextKeeper
from agents.loop.delegations import Delegations
from agents.loop.reply_vetting import ERROR_COPY, recover_tool_calls, refusal
from agents.loop.retry import CallCancelled, RetryBudget
from agents.loop.spec import RunResult, SessionSpec
from agents.loop.state import LoopDeps, LoopState, SessionEvents
from agents.loop.tool_turns import ToolTurns
from agents.provider.argument_bounds import bound_schemas
from agents.provider.client import ContextOverflow, ModelClient, ModelError, ModelReply
from agents.secrets import RedactingStore
from agents.statuses import ending_of
from agents.store.interface import Store
from agents.tools.registry import ToolRegistry
from agents.words.book import AnchorBook

MAX_OVERFLOW_RETRIES = 3
WAITING_FOR_APPROVAL = "waiting_for_approval"
WAITS = ("waiting", WAITING_FOR_APPROVAL)  # a run that stops until something happens


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def session_schemas(schemas: list[dict[str, Any]], spec: SessionSpec) -> list[dict[str, Any]]:
    """The tool schemas a session sends: on a local server, bounded to about the output
    reserve (agents.provider.argument_bounds), since its grammar is all that ends a
    looping model's arguments there."""
    profile = spec.profile
    if not profile.local or profile.simulated or not schemas:
        return schemas
    reserve = plan_budget(profile.context_size, spec.config).reserve
    return bound_schemas(schemas, reserve)


class AgentLoop:
    def __init__(self, *, session_id: str, spec: SessionSpec, store: Store, events: EventSink,
                 model: ModelClient, tools: ToolRegistry, workspace: Path,
                 clock: Callable[[], dt.datetime] | None = None,
                 companions: list | None = None, retries: RetryBudget | None = None) -> None:
        self.state = state = LoopState()
        self.sink = events  # the raw sink: a resumed run marks what a dead worker left
        self.events = SessionEvents(session_id, events, state)
        redacting = RedactingStore(store)  # no API key reaches the archive
        self.deps = deps = LoopDeps(session_id=session_id, spec=spec, store=redacting,
                                    emit=self.events.emit, tools=tools, workspace=workspace,
                                    clock=clock or utc_now)
        self.counter = make_counter(spec.profile)
        # The simulated provider counts with the engine's own tokenizer: nothing to learn.
        self.calibration = None if spec.profile.simulated else TokenCalibration(
            prior=spec.profile.token_ratio, prior_calls=spec.profile.token_ratio_calls,
            prior_overheads=spec.profile.token_overheads,
            exact=isinstance(self.counter, ServerTokenCounter))
        self.ledger = CallLedger()
        self.calls = CallRunner(model, spec.profile, self.ledger, deps.emit,
                                should_stop=lambda: store.cancel_requested(session_id))
        self.retries = retries or RetryBudget(spec.profile.retry_budget)
        self.calls.retries = self.retries
        # A turn's writes commit together, before each wait and with its state save.
        self.commits = CommitPoints(store, events)
        self.calls.pause, self.calls.resume = self.commits.commit, self.commits.begin
        self.calls.calibration = self.calibration
        self.calls.served = getattr(self.counter, "served", None)
        self.calls.counter = self.counter
        self.calls.on_correction = self._recalibrated
        self.ctx = WorkingContext(counter=self.counter, config=spec.config,
                                  window=spec.profile.context_size,
                                  system_prompt=spec.system_prompt,
                                  tools=session_schemas(tools.schemas(), spec))
        if self.calibration is not None:
            self._recalibrated()
        self.book = AnchorBook(session_id, store, deps.emit)
        self.hints = HintInjector(spec.config)
        # E3 from the archive: reads back what the store kept, audits what was sent.
        self.audit = SourceAudit(redacting, session_id, deps.emit)
        self.events.observers.append(self.audit.observe)
        self.events.observers.append(self.ledger.observe)  # which turns compacted
        self.keeper = ContextKeeper(deps, state, ctx=self.ctx, book=self.book, hints=self.hints,
                                    calls=self.calls, audit=self.audit,
                                    count_source=lambda: self.count_source)
        self.delegations = self.new_delegations()
        self.approvals = Approvals(deps, state)
        self.tool_turns = ToolTurns(deps, state, events=self.events, ctx=self.ctx,
                                    book=self.book, hints=self.hints, commits=self.commits,
                                    ledger=self.ledger, delegations=self.delegations,
                                    approvals=self.approvals)
        self.answers = Answers(deps, state, ctx=self.ctx, keeper=self.keeper, hints=self.hints,
                               call_agent=self.call_agent,
                               add_user_message=self.add_user_message, max_turns=self.max_turns)
        self.known_tools = set(tools.names())
        # Objects with state_key / to_state / from_state saved and resumed with the loop.
        self.companions = list(companions or []) + [self.retries, self.audit]
        if self.calibration is not None:
            self.companions.append(self.calibration)

    def new_delegations(self) -> Delegations:
        """How this loop's delegate calls are answered (a replay reuses recorded answers)."""
        return Delegations(self.deps, self.state, ctx=self.ctx, hints=self.hints)

    def _recalibrated(self) -> None:
        self.ctx.correction = self.calibration.correction(self.ctx.window)

    @property
    def count_source(self) -> str:
        return self.calibration.source if self.calibration is not None else "exact"

    # --- the run
    def run(self, progress: Callable[[int, int], None] | None = None) -> RunResult:
        spec, emit, state = self.deps.spec, self.deps.emit, self.state
        resumed = self._resume()
        if state.finished is not None:  # killed after the last commit, before the report
            return self._finish(RunResult("finished", state.finished, state.turn))
        goal_too_long = input_too_long(spec.goal, "goal", spec.max_input_chars)
        emit(SessionStarted(goal=spec.goal[:500] if goal_too_long else spec.goal,
                            profile=spec.profile.name, model=spec.profile.model,
                            window=self.ctx.window, simulated=spec.profile.simulated,
                            resumed=resumed, warnings=spec.profile.warnings))
        if goal_too_long:
            return self._finish(self._fail("input_too_long", goal_too_long))
        if not resumed and spec.goal:
            self.add_user_message(spec.goal, source="goal")  # its constraints are anchors
        if (state.waiting or state.approvals) and not self._deliver_waits():
            return self._finish(self._waiting())  # a child still runs, or a person decides
        total = len(spec.scenario.model_steps) if spec.scenario else self.max_turns()
        try:
            result = self.iterate(progress, total)
        except CompactionFailed as exc:
            result = self._fail("compaction_failed", str(exc))
        except (PreflightError, RequestTooLarge) as exc:
            result = self._fail(exc.code, str(exc))
        except ModelError as exc:
            result = self._fail(exc.code, str(exc))
        except CallCancelled:
            result = RunResult("cancelled", "", state.turn, "cancelled by a person")
        return self._finish(result)

    def _finish(self, result: RunResult) -> RunResult:
        if result.status in WAITS:  # SESSION_WAITING went out with the committed turn
            return result
        self.deps.emit(SessionFinished(status=result.status, final_answer=result.final_answer,
                                       turns=result.turns, error=result.error))
        return result

    def max_turns(self) -> int:
        """The turn cap; a scenario longer than it raises it to fit its steps."""
        spec = self.deps.spec
        steps = len(spec.scenario.model_steps) if spec.scenario else 0
        return max(spec.config.max_turns, steps)

    def iterate(self, progress, total) -> RunResult:
        """The turns until an answer, a wait or a limit, with the commit points around them."""
        try:
            result = self._turns(progress, total)
        except BaseException as exc:  # a kill included: what the last saved turn left goes
            self.commits.abort(exc)
            raise
        self.commits.finish()  # the last turn's state, before the session's end is told
        return result

    def _turns(self, progress, total) -> RunResult:
        state, deps = self.state, self.deps
        while state.turn < self.max_turns():
            if deps.store.cancel_requested(deps.session_id):
                return RunResult("cancelled", "", state.turn, "cancelled by a person")
            self.ledger.start()
            self.commits.begin()
            answer = self._one_turn()
            self.ledger.lap()
            if progress:
                progress(min(state.turn, total), total)
            if state.waiting or state.approvals:  # the worker is free until they end
                return self._waiting()
            if answer is not None:
                return RunResult("finished", answer, state.turn)
            if state.stuck:
                return self._fail(*state.stuck)
        return self._fail("turn_limit", f"no final answer after {self.max_turns()} turns")

    def _one_turn(self) -> str | None:
        state = self.state
        self.deps.emit(TurnStarted(turn=state.turn))
        self.take_user_messages()
        self.book.sync(state.turn)
        self.archive_person_edits()
        self.book.roll(state.turn)
        request, limit = self.keeper.prepare()
        answer_turn = self.answers.turn_due()
        reply = self.call_agent(self.answers.request_for(request, limit) if answer_turn
                                else request, limit)
        if answer_turn:  # an echo is checked against the blocks the agent's request held
            state.last_request = request
        answer = self._handle_reply(reply, answer_turn)
        state.turn += 1
        state.finished = answer
        if state.waiting or state.approvals:  # before the save: part of the committed turn
            pause = self.delegations.pause_event()
            pause.approvals = sorted(state.approvals) or None
            self.deps.emit(pause)
        self.commits.flush_events()  # stored before the state that names the last seq
        self._save_state()  # into the open batch: it commits at the next wait, durably
        self.commits.end()
        return answer

    def _waiting(self) -> RunResult:
        """The run stops until its children end ("waiting"), or else until a person
        decides its ask-first calls ("waiting_for_approval", T11)."""
        return RunResult("waiting" if self.state.waiting else WAITING_FOR_APPROVAL, "",
                         self.state.turn)

    def _deliver_waits(self) -> bool:
        """Answer the open delegate and ask-first calls once every one of them can be:
        False (nothing changed) while a child runs or a decision is missing."""
        decisions = self.approvals.decisions() if self.state.approvals else {}
        if decisions is None:
            return False
        if self.state.waiting and not self.delegations.deliver():
            return False
        if decisions:
            self.approvals.deliver(decisions, self.tool_turns.execute, self.tool_turns.deny)
        return True

    def _fail(self, code: str, message: str) -> RunResult:
        """The run ends without an answer: `failed`, or `unusable_answer` when the model's
        answers were refused (its own final state; the message quotes what it wrote)."""
        self.deps.emit(error_event(code, message, fatal=True))
        return RunResult(ending_of(code), "", self.state.turn, message, code)

    # --- inputs
    def take_user_messages(self) -> None:
        """This turn's messages from the scenario script and from people (a replay takes
        the recorded turn's instead)."""
        spec, state, deps = self.deps.spec, self.state, self.deps
        texts: list[tuple[str, str]] = []
        if spec.scenario and state.turn > state.delivered_through:
            texts += [(t, "scenario") for t in spec.scenario.user_messages_before(state.turn)]
            state.delivered_through = state.turn
        texts += [(t, "user") for t in deps.store.take_user_messages(deps.session_id,
                                                                     turn=state.turn)]
        # Files the person added (feature T9): named by the turn's hints.
        self.hints.note_new_files(deps.store.take_new_files(deps.session_id, turn=state.turn))
        for text, source in texts:
            refused = input_too_long(text, "message", spec.max_input_chars)
            if refused:  # reported, never archived
                deps.emit(error_event("input_too_long", refused, fatal=False))
                continue
            self.add_user_message(text, source)

    def add_user_message(self, text: str, source: str = "user") -> None:
        deps, turn = self.deps, self.state.turn
        ref = deps.store.archive(deps.session_id, turn, "user", text,
                                 tokens=self.counter.text(text))
        self.ctx.add({"role": "user", "content": text}, turn, ref,
                     cap=self.ctx.budget().message_cap)
        deps.emit(UserMessage(text=text, source=source, ref=ref))
        if source != "engine":  # the engine's own nudges state no constraints
            self.ctx.add_person(turn, ref, text, source)
            self.book.from_user(text, turn)

    def archive_person_edits(self) -> None:
        """A person's edit of an anchor (the admin, a pin) is their words (C19): archived as
        their message, so the audit reads it as a source, and kept in the person's words
        block, labelled with what it replaces, so it supersedes the old text everywhere."""
        deps, turn = self.deps, self.state.turn
        for source, text, replaced in self.book.take_person_edits():
            # A removal has no words of the person's: archived as the engine's note of it,
            # which the audit reads as raw material, never as a statement in force.
            body = text or f"Removed in the admin, no longer in force: {replaced}"
            ref = deps.store.archive(deps.session_id, turn, "user", body,
                                     tokens=self.counter.text(body))
            deps.emit(UserMessage(text=body, source=source if text else "engine", ref=ref))
            self.ctx.add_person(turn, ref, text, source, replaces=replaced or "")

    # --- the model
    def call_agent(self, request: Request, limit: int) -> ModelReply:
        """One agent call: a request the provider finds too long is compacted and sent
        again (feature C16), a transient fault waits and asks again within the budget."""
        overflows = 0
        while True:
            budget = self.ctx.budget()
            self.state.last_request = request
            used = self.ctx.person.model_used if request.zones.get("words") else None
            try:
                reply = self.calls.agent_call(request, limit=limit, max_tokens=budget.reserve,
                                              turn=self.state.turn,
                                              cache_marks=self.keeper.cache_marks(request),
                                              words_calls=used.calls if used else None)
            except ContextOverflow as exc:
                self.deps.emit(error_event(exc.code, str(exc), fatal=False))
                overflows += 1
                if overflows > MAX_OVERFLOW_RETRIES:
                    raise
                refused = request.messages
                request, limit = self.keeper.recover_overflow(exc, request.total)
                if request.messages == refused:  # the same request again is refused again
                    raise ModelError(exc.code, f"{exc} The engine could not shrink the request "
                                     "any further, so it was not sent again.") from exc
            except ModelError as exc:
                if not exc.transient:
                    raise
                self.retries.wait_or_give_up(exc, self.deps.emit,
                                             lambda: self.deps.store.cancel_requested(
                                                 self.deps.session_id),
                                             idle=self.calls.waiting)
            else:
                self.retries.succeeded()
                return reply

    def _handle_reply(self, reply: ModelReply, answer_turn: bool = False) -> str | None:
        """Record the answer, run its tools; return the final answer when there is one. On
        an answer turn no tool is run: a call written as text is a rejected answer."""
        state, deps, answers = self.state, self.deps, self.answers
        if not answer_turn:
            reply = recover_tool_calls(reply, self.known_tools, state.turn)
        else:
            reply = replace(reply, content=answer_text(reply.content))
        if not reply.tool_calls and not reply.content.strip() and reply.finish_reason != "length":
            return answers.empty()
        state.empty_answers = 0
        if not reply.tool_calls:
            why = refusal(reply.content, self.known_tools, answers.injected_texts(),
                          answers.tool_errors())
            if why:  # the tool-free answer turn would only be asked the same again
                return answers.rejected(reply, why, last=answer_turn and why == ERROR_COPY)
            if answers.refuses(reply, answer_turn):
                return None
            state.rejected_answers = 0
            return answers.final(reply)
        state.rejected_answers = 0
        # "" not None: llama-cpp-python's server answers `content: null` with HTTP 500.
        data = {"role": "assistant", "content": reply.content or "", "tool_calls": [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in reply.tool_calls]}
        ref = deps.store.archive(deps.session_id, state.turn, "assistant",
                                 json.dumps(data, ensure_ascii=False))
        self.ctx.add(data, state.turn, ref)
        deps.emit(AssistantMessage(content=reply.content, tool_calls=reply.tool_calls, ref=ref))
        for call in reply.tool_calls:
            self.tool_turns.run(call)
        return None

    # --- saving and resuming (feature T8)
    def _save_state(self) -> None:
        state, deps = self.state, self.deps
        deps.store.save_state(deps.session_id, {
            "turn": state.turn, "delivered_through": state.delivered_through,
            "events_seq": state.last_seq, "final_answer": state.finished,
            "context": self.ctx.to_state(), "hints": self.hints.to_state(),
            "handoff": state.handoff, "calls": self.ledger.calls,
            "tool_state": dict(state.tool_state), "waiting": dict(state.waiting),
            "approvals": dict(state.approvals),
            "companions": {c.state_key: c.to_state() for c in self.companions}})

    def _resume(self) -> bool:
        state, deps = self.state, self.deps
        saved: dict[str, Any] | None = deps.store.load_state(deps.session_id)
        self._discard_uncommitted((saved or {}).get("turn", 0),
                                  saved.get("events_seq") if saved else 0)
        if not saved:
            return False
        state.finished = saved.get("final_answer")
        state.turn = saved.get("turn", 0)
        state.delivered_through = saved.get("delivered_through", -1)
        self.ctx.restore(saved.get("context", {}))
        self.hints.from_state(saved.get("hints", {}))
        state.handoff = saved.get("handoff") or {}
        self.ledger.calls = saved.get("calls", 0)
        state.tool_state = saved.get("tool_state", {})
        for companion in self.companions:
            companion.from_state(saved.get("companions", {}).get(companion.state_key, {}))
        state.waiting = dict(saved.get("waiting") or {})
        state.approvals = dict(saved.get("approvals") or {})
        if state.waiting or state.approvals:  # not interrupted: it stopped to wait
            return True
        self.add_user_message(
            f"[resumed] This task was interrupted and resumed at turn {state.turn} from its "
            "task snapshot, summary and recent turns. Re-check external facts (files, data, "
            "dates) before relying on them.", source="engine")
        return True

    def _discard_uncommitted(self, turn: int, events_seq: int | None) -> None:
        """A worker died inside `turn`: drop what it wrote so the re-run cannot double it."""
        undone = self.deps.store.discard_uncommitted(self.deps.session_id, turn)
        discard_events = getattr(self.sink, "discard_after", None)
        undone["events"] = 0
        if discard_events and events_seq is not None:  # None: a state saved before seqs
            undone["events"] = discard_events(events_seq)
            self.state.last_seq = events_seq
        if any(undone.values()):
            self.deps.emit(error_event(
                "turn_interrupted",
                f"turn {turn} was interrupted before it was committed; it runs again "
                f"({undone['archive_rows']} archive rows removed, {undone['events']} events "
                f"marked discarded, {undone['messages']} messages given back)", fatal=False))
