"""The agent loop (SPEC T1): model call → tool calls → results, one committed turn at a time.

Each iteration reads people's edits, rebuilds the snapshot, applies the triggers (all
compaction happens here, before the request, never while the model generates), adds
hints, sends the request and runs the tools. The state is saved at the end of every turn,
so a worker that dies loses at most the turn in flight.
"""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path
from typing import Callable

from agents.words.book import AnchorBook
from agents.compaction.source_audit import SourceAudit
from agents.loop.answers import AnswerHandling
from agents.loop.calls import CallLedger, CallRunner
from agents.loop.commits import CommitPoints
from agents.compaction.compactor import CompactionFailed
from agents.config import input_too_long
from agents.context.working import WorkingContext
from agents.loop.context_keeper import ContextKeeper
from agents.loop.delegations import Delegations
from agents.errors import error_payload
from agents.events import Event, EventSink, EventType
from agents.context.hints import HintInjector
from agents.context.limits import PreflightError, RequestTooLarge
from agents.loop.state import LoopState
from agents.provider.client import ContextOverflow, ModelClient, ModelError, ModelReply
from agents.compaction.fresh_requests import answer_text
from agents.loop.reply_vetting import ERROR_COPY, recover_tool_calls, refusal
from agents.loop.retry import CallCancelled, RetryBudget
from agents.secrets import RedactingStore, redact_value
from agents.loop.spec import DEFAULT_SYSTEM, RunResult, SessionSpec  # noqa: F401 - re-exported
from agents.store.interface import Store
from agents.counting.calibration import TokenCalibration
from agents.counting.server_tokens import ServerTokenCounter, make_counter
from agents.loop.tool_turns import TOOL_LOOP_FACTOR, ToolTurns  # noqa: F401 - re-exported
from agents.tools.registry import ToolRegistry

MAX_OVERFLOW_RETRIES = 3


class AgentLoop(AnswerHandling, ToolTurns, LoopState):
    def __init__(self, *, session_id: str, spec: SessionSpec, store: Store, events: EventSink,
                 model: ModelClient, tools: ToolRegistry, workspace: Path,
                 clock: Callable[[], dt.datetime] | None = None,
                 companions: list | None = None, retries: RetryBudget | None = None) -> None:
        self.session_id, self.spec, self.events = session_id, spec, events
        self.store = RedactingStore(store)  # no API key reaches the archive
        self.tools, self.workspace = tools, workspace
        self.clock = clock or (lambda: dt.datetime.now(dt.timezone.utc))
        self.counter = make_counter(spec.profile)
        # The simulated provider counts with the engine's own tokenizer: nothing to learn.
        self.calibration = None if spec.profile.simulated else TokenCalibration(
            prior=spec.profile.token_ratio, prior_calls=spec.profile.token_ratio_calls,
            prior_overheads=spec.profile.token_overheads,
            exact=isinstance(self.counter, ServerTokenCounter))
        self.ledger = CallLedger()
        self.calls = CallRunner(model, spec.profile, self.ledger, self.emit,
                                should_stop=lambda: store.cancel_requested(session_id))
        self.retries = retries or RetryBudget(spec.profile.retry_budget)
        self.calls.retries = self.retries
        # A turn's writes commit together, before each wait and with its state save.
        self.commits = CommitPoints(self.store.inner, events)
        self.calls.pause, self.calls.resume = self.commits.commit, self.commits.begin
        self.calls.calibration = self.calibration
        self.calls.served = getattr(self.counter, "served", None)
        self.calls.on_correction = self._recalibrated
        self.ctx = WorkingContext(counter=self.counter, config=spec.config,
                                  window=spec.profile.context_size,
                                  system_prompt=spec.system_prompt, tools=tools.schemas())
        if self.calibration is not None:
            self._recalibrated()
        self.book = AnchorBook(session_id, store, self.emit)
        self.hints = HintInjector(spec.config)
        self.keeper = ContextKeeper(self)
        # E3 from the archive: reads back what the store kept, audits what was sent.
        self.audit = SourceAudit(self.store, session_id, self.emit)
        self.turn = 0
        self.delivered_through = -1  # scenario user messages delivered up to this turn index
        self.tool_state: dict = {}
        self.empty_answers = 0
        self.rejected_answers = 0
        # (code, why) the session must stop after this turn's commit
        self.stuck: tuple[str, str] | None = None
        self.last_request = None  # the request just sent: what the model may echo back
        self.known_tools = set(tools.names())
        self.last_seq = 0  # seq of the newest event stored; saved with each committed turn
        self.finished: str | None = None  # the final answer, once a committed turn gave one
        self.delegations = Delegations(self)  # delegate calls waiting for sub-agents (T6)
        # Objects with state_key / to_state / from_state saved and resumed with the loop.
        self.companions = list(companions or []) + [self.retries, self.audit]
        if self.calibration is not None:
            self.companions.append(self.calibration)

    def _recalibrated(self) -> None:
        self.ctx.correction = self.calibration.correction(self.ctx.window)

    @property
    def count_source(self) -> str:
        return self.calibration.source if self.calibration is not None else "exact"

    def emit(self, event: Event) -> None:
        event.turn = event.turn or self.turn
        event.session_id = self.session_id
        event.payload = redact_value(event.payload)  # no API key reaches an event
        self.events.emit(event)
        self.last_seq = event.seq or self.last_seq
        self.audit.observe(event)

    # --- the run
    def run(self, progress: Callable[[int, int], None] | None = None) -> RunResult:
        resumed = self._resume()
        if self.finished is not None:  # killed after the last commit, before the report
            return self._finish(RunResult("finished", self.finished, self.turn))
        goal_too_long = input_too_long(self.spec.goal, "goal", self.spec.max_input_chars)
        self.emit(Event(EventType.SESSION_STARTED, {
            "goal": self.spec.goal[:500] if goal_too_long else self.spec.goal,
            "profile": self.spec.profile.name,
            "model": self.spec.profile.model, "window": self.ctx.window,
            "simulated": self.spec.profile.simulated, "resumed": resumed,
            "warnings": self.spec.profile.warnings}))
        if goal_too_long:
            return self._finish(self._fail("input_too_long", goal_too_long))
        if not resumed and self.spec.goal:
            self.add_user_message(self.spec.goal, source="goal")  # its constraints are anchors
        if self.delegations.waiting and not self.delegations.deliver():
            return self._finish(RunResult("waiting", "", self.turn))  # a child still runs
        total = len(self.spec.scenario.model_steps) if self.spec.scenario else self.max_turns()
        try:
            result = self._iterate(progress, total)
        except CompactionFailed as exc:
            result = self._fail("compaction_failed", str(exc))
        except (PreflightError, RequestTooLarge) as exc:
            result = self._fail(exc.code, str(exc))
        except ModelError as exc:
            result = self._fail(exc.code, str(exc))
        except CallCancelled:
            result = RunResult("cancelled", "", self.turn, "cancelled by a person")
        return self._finish(result)

    def _finish(self, result: RunResult) -> RunResult:
        if result.status == "waiting":  # SESSION_WAITING went out with the committed turn
            return result
        self.emit(Event(EventType.SESSION_FINISHED, {
            "status": result.status, "final_answer": result.final_answer, "turns": result.turns,
            "error": result.error}))
        return result

    def max_turns(self) -> int:
        """The turn cap; a scenario longer than it raises it to fit its steps."""
        steps = len(self.spec.scenario.model_steps) if self.spec.scenario else 0
        return max(self.spec.config.max_turns, steps)

    def _iterate(self, progress, total) -> RunResult:
        try:
            result = self._turns(progress, total)
        except BaseException as exc:  # a kill included: what the last saved turn left goes
            self.commits.abort(exc)
            raise
        self.commits.finish()  # the last turn's state, before the session's end is told
        return result

    def _turns(self, progress, total) -> RunResult:
        while self.turn < self.max_turns():
            if self.store.cancel_requested(self.session_id):
                return RunResult("cancelled", "", self.turn, "cancelled by a person")
            self.ledger.start()
            self.commits.begin()
            answer = self._one_turn()
            self.ledger.lap()
            if progress:
                progress(min(self.turn, total), total)
            if self.delegations.waiting:  # the worker is free until the children finish
                return RunResult("waiting", "", self.turn)
            if answer is not None:
                return RunResult("finished", answer, self.turn)
            if self.stuck:
                return self._fail(*self.stuck)
        return self._fail("turn_limit", f"no final answer after {self.max_turns()} turns")

    def _one_turn(self) -> str | None:
        self.emit(Event(EventType.TURN_STARTED, {"turn": self.turn}))
        self._take_user_messages()
        self.book.sync(self.turn)
        self.book.roll(self.turn)
        request, limit = self.keeper.prepare()
        answer_turn = self._answer_turn_due()
        reply = self._call_agent(self._answer_request(request, limit) if answer_turn
                                 else request, limit)
        if answer_turn:  # an echo is checked against the blocks the agent's request held
            self.last_request = request
        answer = self._handle_reply(reply, answer_turn)
        self.turn += 1
        self.finished = answer
        if self.delegations.waiting:  # before the save: part of the committed turn
            self.emit(self.delegations.pause_event())
        self.commits.flush_events()  # stored before the state that names the last seq
        self._save_state()  # into the open batch: it commits at the next wait, durably
        self.commits.end()
        return answer

    def _fail(self, code: str, message: str) -> RunResult:
        self.emit(Event(EventType.ERROR, error_payload(code, message, fatal=True)))
        return RunResult("failed", "", self.turn, message, code)

    # --- inputs
    def _take_user_messages(self) -> None:
        texts: list[tuple[str, str]] = []
        if self.spec.scenario and self.turn > self.delivered_through:
            texts += [(t, "scenario") for t in self.spec.scenario.user_messages_before(self.turn)]
            self.delivered_through = self.turn
        texts += [(t, "user") for t in self.store.take_user_messages(self.session_id,
                                                                     turn=self.turn)]
        for text, source in texts:
            refused = input_too_long(text, "message", self.spec.max_input_chars)
            if refused:  # reported, never archived
                self.emit(Event(EventType.ERROR, error_payload("input_too_long", refused,
                                                               fatal=False)))
                continue
            self.add_user_message(text, source)

    def add_user_message(self, text: str, source: str = "user") -> None:
        ref = self.store.archive(self.session_id, self.turn, "user", text,
                                 tokens=self.counter.text(text))
        self.ctx.add({"role": "user", "content": text}, self.turn, ref,
                     cap=self.ctx.budget().message_cap)
        self.emit(Event(EventType.USER_MESSAGE, {"text": text, "source": source, "ref": ref}))
        if source != "engine":  # the engine's own nudges state no constraints
            self.ctx.add_person(self.turn, ref, text, source)
            self.book.from_user(text, self.turn)

    # --- the model
    def _call_agent(self, request, limit) -> ModelReply:
        overflows = 0
        while True:
            budget = self.ctx.budget()
            self.last_request = request
            try:
                reply = self.calls.agent_call(request, limit=limit, max_tokens=budget.reserve,
                                              turn=self.turn)
            except ContextOverflow as exc:
                self.emit(Event(EventType.ERROR, error_payload(exc.code, str(exc), fatal=False)))
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
                self.retries.wait_or_give_up(exc, self.emit, lambda: self.store.cancel_requested(
                    self.session_id))
            else:
                self.retries.succeeded()
                return reply

    def _handle_reply(self, reply: ModelReply, answer_turn: bool = False) -> str | None:
        """Record the answer, run its tools; return the final answer when there is one. On
        an answer turn no tool is run: a call written as text is a rejected answer."""
        if not answer_turn:
            reply = recover_tool_calls(reply, self.known_tools, self.turn)
        else:
            reply = replace(reply, content=answer_text(reply.content))
        if not reply.tool_calls and not reply.content.strip() and reply.finish_reason != "length":
            return self._empty_answer()
        self.empty_answers = 0
        if not reply.tool_calls:
            why = refusal(reply.content, self.known_tools, self._injected_texts(),
                          self._tool_errors())
            if why:  # the tool-free answer turn would only be asked the same again
                return self._rejected_answer(reply, why, last=answer_turn and why == ERROR_COPY)
            if answer_turn:
                self._check_drawn_from_results(reply)
            self.rejected_answers = 0
            return self._final_answer(reply)
        self.rejected_answers = 0
        # "" not None: llama-cpp-python's server answers `content: null` with HTTP 500.
        data = {"role": "assistant", "content": reply.content or "", "tool_calls": [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in reply.tool_calls]}
        ref = self.store.archive(self.session_id, self.turn, "assistant",
                                 json.dumps(data, ensure_ascii=False))
        self.ctx.add(data, self.turn, ref)
        self.emit(Event(EventType.ASSISTANT_MESSAGE, {"content": reply.content,
                                                      "tool_calls": reply.tool_calls,
                                                      "ref": ref}))
        for call in reply.tool_calls:
            self._run_tool(call)
        return None
