"""Model calls with their accounting: every call becomes a MODEL_CALL event (feature W9)."""
from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from agents.config import ModelProfile
from agents.context.working import Request
from agents.counting.calibration import request_kind
from agents.counting.llama_cpp.prompt_count import read_back
from agents.errors import error_event
from agents.events import Compaction, Event, ModelCall
from agents.loop.cache_marks import summary_marks
from agents.loop.interrupt import CallDeadline, run_interruptible
from agents.loop.retry import CallCancelled
from agents.provider.client import (ContextOverflow, ModelClient, ModelError, ModelReply,
                                    OutputOverflow)

# The key order of the messages the engine builds (loop.py): what a reader of a stored
# call assumes unless the call noted another order for a message.
MESSAGE_KEY_ORDER = ("role", "tool_call_id", "content", "name", "tool_calls")


def canonical_keys(message: dict[str, Any]) -> list[str]:
    """The keys of `message` in MESSAGE_KEY_ORDER, unknown keys after them as they come."""
    known = [key for key in MESSAGE_KEY_ORDER if key in message]
    return known + [key for key in message if key not in MESSAGE_KEY_ORDER]


# Whether a key order is canonical, by the order itself: every call asks it of each of its
# messages (dozens), and a session's messages come in a handful of shapes.
_CANONICAL_ORDERS: dict[tuple[str, ...], bool] = {}
CANONICAL_ORDERS_KEPT = 256


def noted_key_order(message: dict[str, Any]) -> list[str] | None:
    """The keys of `message` in their order when that is not canonical_keys(message)."""
    keys = tuple(message)
    canonical = _CANONICAL_ORDERS.get(keys)
    if canonical is None:
        if len(_CANONICAL_ORDERS) >= CANONICAL_ORDERS_KEPT:
            _CANONICAL_ORDERS.clear()
        canonical = _CANONICAL_ORDERS[keys] = list(keys) == canonical_keys(message)
    return None if canonical else list(keys)


@dataclass
class CallLedger:
    """Counts calls and the engine's own time per turn (model and tools excluded; the
    snapshot, triggers, compaction bookkeeping and the state save included)."""

    calls: int = 0
    turn_ms: list[float] = field(default_factory=list)
    turn_calls: list[int] = field(default_factory=list)  # model calls in each turn
    # The same turns in CPU time of the loop's thread: unlike wall time it does not grow
    # when the machine is busy. The model answers in a helper thread (interrupt.py), so its
    # CPU is never in it; a tool's is taken out like its wall time.
    turn_cpu_ms: list[float] = field(default_factory=list)
    # A turn compacted when it emitted a COMPACTION that was not a no-op: a summary, a
    # truncation, a clearing of old results or a rebuilt snapshot (observe()).
    turn_compacted: list[bool] = field(default_factory=list)
    _compacted: bool = False
    _mark: float = field(default_factory=time.perf_counter)
    _cpu_mark: float = field(default_factory=time.thread_time)
    _outside: float = 0.0  # time spent in the model or tools since the mark
    _outside_cpu: float = 0.0
    _calls_at_mark: int = 0

    @property
    def engine_ms(self) -> list[float]:
        return self.turn_ms

    def start(self) -> None:
        self._mark, self._outside = time.perf_counter(), 0.0
        self._cpu_mark, self._outside_cpu = time.thread_time(), 0.0
        self._calls_at_mark, self._compacted = self.calls, False

    def outside(self, seconds: float, cpu_seconds: float = 0.0) -> None:
        self._outside += seconds
        self._outside_cpu += cpu_seconds

    def observe(self, event: Event) -> None:
        if isinstance(event, Compaction) and not event.noop:
            self._compacted = True

    def lap(self, compacted: bool = False) -> None:
        """Close one turn's engine time and start the next."""
        now, cpu = time.perf_counter(), time.thread_time()
        self.turn_ms.append(max(0.0, (now - self._mark - self._outside) * 1000))
        self.turn_cpu_ms.append(max(0.0, (cpu - self._cpu_mark - self._outside_cpu) * 1000))
        self.turn_calls.append(self.calls - self._calls_at_mark)
        self.turn_compacted.append(compacted or self._compacted)
        self._compacted = False
        self._mark, self._outside, self._calls_at_mark = now, 0.0, self.calls
        self._cpu_mark, self._outside_cpu = cpu, 0.0

    def per_call_ms(self, first: int = 0, last: int | None = None) -> float | None:
        """Mean engine time per model call over turns [first, last), summary calls counted."""
        ms, calls = self.turn_ms[first:last], self.turn_calls[first:last]
        return sum(ms) / sum(calls) if sum(calls) else None

    def per_call_cpu_ms(self) -> float | None:
        """Mean engine CPU time per model call, summary calls counted."""
        calls = sum(self.turn_calls)
        return sum(self.turn_cpu_ms) / calls if calls else None


class CallRunner:
    def __init__(self, model: ModelClient, profile: ModelProfile, ledger: CallLedger,
                 emit: Callable[[Event], None],
                 should_stop: Callable[[], bool] | None = None) -> None:
        self.model = model
        self.profile = profile
        self.ledger = ledger
        self.emit = emit
        self.should_stop = should_stop  # read while a call is in flight: cancel cuts it short
        # The session's RetryBudget: a summary call that meets a transient fault waits and
        # asks again like an agent call, instead of falling back to truncation at once.
        self.retries = None
        # Commit points (agents/loop/commits.py): nothing stays open while the model works;
        # each MODEL_CALL commits with the next wait's batch or the turn's state save.
        self.pause: Callable[[], None] = lambda: None
        self.resume: Callable[[], None] = lambda: None
        self._last_tools: tuple[int, list[dict[str, Any]]] | None = None  # (call, schemas)
        self._dumped_tools: tuple[list[dict[str, Any]], str] | None = None  # (list, its JSON)
        # Counting per model: every provider count teaches the ratio (agents.counting.calibration);
        # on_correction tells the loop to hand the new window divisor to the working context.
        self.calibration = None
        self.on_correction: Callable[[], None] | None = None
        # Exact counts of whole requests (agents.counting.llama_cpp.prompt_count), where the server allows.
        self.served = None
        # The session's token counter: a server's tokenizer says when it stopped answering.
        self.counter = None

    def agent_call(self, request: Request, *, limit: int, max_tokens: int, turn: int,
                   cache_marks: tuple[int, ...] = (),
                   words_calls: list[int] | None = None) -> ModelReply:
        """`cache_marks`: the messages whose prefix a later request will repeat
        (agents.loop.cache_marks), marked on the wire where the profile takes marks.
        `words_calls`: the condensing calls whose answer the request's words block uses."""
        sent = self._sent(request.messages, request.tools, max_tokens, None, None, cache_marks)
        # Read only with a calibration (_record, _calibrate, _beyond_estimate): without one
        # (the simulated provider) the messages are not walked again for it.
        count_kind = ("" if self.calibration is None
                      else request_kind(request.tools, "auto", request.messages))
        figures = self._exact(request.messages, request.tools, "auto")
        try:
            reply = self._timed(request.messages, request.tools, max_tokens, None,
                                cache_marks=cache_marks)
        except ContextOverflow as exc:
            # Counted exactly, a request the server saw as longer than it was grew with the
            # model's own output inside the server (OutputOverflow).
            if figures is not None and exc.requested > figures.tokens:
                exc = OutputOverflow(exc, figures.tokens)
            elif figures is None and not isinstance(exc, OutputOverflow):
                exc = self._beyond_estimate(exc, request.total, count_kind,
                                            len(request.messages)) or exc
            self._refused("agent", exc, request.total, limit, request.zones,
                          request.described(), turn, sent, count_kind, figures)
            raise exc
        reply = self._record("agent", reply, request.total, limit, request.zones, request.described(),
                     turn, sent=sent, count_kind=count_kind, figures=figures,
                     words_calls=words_calls)
        return reply

    def summary_call(self, messages: list[dict[str, Any]], *, tokens: int, limit: int,
                     max_tokens: int, turn: int, tools: list[dict[str, Any]] | None = None,
                     tool_choice: str | None = None,
                     parts: list[tuple[str, int]] | None = None) -> ModelReply:
        """A summary request; with `tools` it repeats the agent's prefix with the agent's
        own tools and tool_choice ("auto"): a provider that voids its cached messages when
        tool_choice changes (Anthropic) then still bills the prefix as cached. "none" is
        for asking again after an answer that called a tool instead of summing up.
        `parts`: what each message is (instructions, folded, previous summary…) and its
        tokens, recorded with it so the inspector breaks the call down as an agent call."""
        model = self.profile.summary_model or None
        if parts is not None and len(parts) == len(messages):
            described = [{**m, "zone": zone, "tokens": count}
                         for m, (zone, count) in zip(messages, parts)]
        else:
            described = [{**m, "zone": "summary_request"} for m in messages]
        choice = (tool_choice or "auto") if tools else None
        marks = summary_marks(messages, parts) if tools else ()
        sent = self._sent(messages, tools, max_tokens, model, choice, marks)
        figures = self._exact(messages, tools, choice)
        try:
            reply = self._summary_with_retries(messages, tools, max_tokens, model, choice, marks)
        except ContextOverflow as exc:
            self._refused("summary", exc, tokens, limit, {"summary_request": tokens},
                          described, turn, sent, request_kind(tools, choice, messages), figures)
            raise
        reply = self._record("summary", reply, tokens, limit, {"summary_request": tokens}, described,
                     turn, sent=sent, count_kind=request_kind(tools, choice, messages),
                     figures=figures)
        return reply

    def probe_call(self, messages: list[dict[str, Any]], *, tokens: int, limit: int,
                   max_tokens: int, turn: int) -> ModelReply:
        """The probe questions after a compaction (agents.compaction.probes): no tools, no retries —
        a probe that fails is reported, it never holds the session up."""
        model = self.profile.summary_model or None
        described = [{**m, "zone": "probe"} for m in messages]
        sent = self._sent(messages, None, max_tokens, model, None)
        figures = self._exact(messages, None, None)
        try:
            reply = self._timed(messages, None, max_tokens, model)
        except ContextOverflow as exc:
            self._refused("probe", exc, tokens, limit, {"probe": tokens}, described, turn,
                          sent, request_kind(None, None), figures)
            raise
        reply = self._record("probe", reply, tokens, limit, {"probe": tokens}, described, turn,
                     sent=sent, count_kind=request_kind(None, None), figures=figures)
        return reply

    def _summary_with_retries(self, messages, tools, max_tokens, model,
                              tool_choice, cache_marks=()) -> ModelReply:
        while True:
            try:
                reply = self._timed(messages, tools, max_tokens, model, tool_choice=tool_choice,
                                    cache_marks=cache_marks)
            except ModelError as exc:
                if self.retries is None or not exc.transient:
                    raise
                self.retries.wait_or_give_up(exc, self.emit, self.should_stop or (lambda: False),
                                             idle=self.waiting)
            else:
                if self.retries is not None:
                    self.retries.succeeded()
                return reply

    def _exact(self, messages, tools, tool_choice):
        """The request's exact figures as the server will render it (PromptCount), or None
        where exact counting is off. Asking the server is a wait like the call itself."""
        wire = getattr(self.model, "wire", None)
        if self.served is None or wire is None:
            return None
        counting = self.served.active
        with self.waiting():
            figures = self.served.count(wire(messages), tools or None,
                                        tool_choice if tools else None)
        if counting and not self.served.active:  # the tokenizer failed on this request
            self._lose(self._counter_stopped() or self.served.mismatch, self.ledger.calls + 1)
        return figures

    def _counter_stopped(self) -> str:
        """Why the server's tokenizer is no longer asked ("" while it is)."""
        return getattr(self.counter, "stopped", "")

    def _lose(self, reason: str, call: int) -> None:
        """Exactness ends at call number `call`: say why once, in an ERROR event (not
        fatal), and from then on label the calls with the source that replaced it."""
        calibration = self.calibration
        if calibration is None:
            return
        dropped = self.served is not None and self.served.tools_dropped
        calibration.tools_dropped = calibration.tools_dropped or dropped
        if calibration.lose(call, reason, text_exact=not self._counter_stopped()):
            self.emit(error_event("tools_not_rendered" if dropped else "exact_count_lost",
                                  f"Token counts are not exact from call {call} on: {reason}.",
                                  fatal=False))
        if self.on_correction is not None:
            self.on_correction()

    @property
    def unescapes(self) -> bool:
        """Whether replies are read back unescaped: on a server whose chat template was
        confirmed to escape what it renders, for the whole session, however counting goes
        on (a tokenizer that stopped answering does not change the template; a reply left
        escaped is escaped again when sent back, `&#34;` → `&amp;#34;`, call after call)."""
        return self.served is not None and not self.served.template_differs

    def _beyond_estimate(self, exc: ContextOverflow, engine_tokens: int, kind: str,
                         messages: int) -> OutputOverflow | None:
        """Without an exact figure, a refusal naming far more tokens than the calibrated
        figure of what was sent is the model's answer filling the window, not a miscount:
        read as a miscount, one runaway answer would shrink the window for good."""
        calibration = self.calibration
        if calibration is None or calibration.source != "calibrated" or not exc.requested:
            return None
        estimate = calibration.estimate(engine_tokens, kind, messages)
        if exc.requested <= estimate * (1 + max(0.05, 2 * calibration.error())):
            return None
        return OutputOverflow(exc, estimate, counted="the calibrated count")

    def _sent(self, messages, tools, max_tokens, model, tool_choice,
              cache_marks=()) -> dict[str, Any]:
        """The request's parameters other than the messages, in the order they are sent.

        Tool schemas repeat on nearly every call, so once a call recorded them the next
        calls record {"tools_of_call": N} instead of a copy (see _stored_request). The
        cache marks that went on the wire are kept as the messages they were asked on
        ("cache_marks"): the messages are stored unmarked, shared with the next call's.
        """
        params_of = getattr(self.model, "request_params", None)
        if params_of is None:  # a stand-in model in tests: nothing to reconstruct from
            return {}
        # The messages are stored beside this, annotated; only their place in the body here:
        # none are passed, so they are not turned into wire messages a second time (the call
        # itself does that), and no other parameter depends on them.
        params = params_of([], tools, max_tokens, model, tool_choice)
        sent = {key: ("<messages>" if key == "messages" else value)
                for key, value in params.items()}
        # A JSONB column keeps no key order: tool schemas are kept as text, and a message
        # whose keys are not in MESSAGE_KEY_ORDER (one restored from a saved state) has its
        # order noted, so the body can be rebuilt byte for byte.
        if sent.get("tools"):
            sent["tools"] = self._tools_text(sent["tools"])
        orders = {str(i): order for i, m in enumerate(messages)
                  if (order := noted_key_order(m)) is not None}
        if orders:
            sent["key_orders"] = orders
        if cache_marks and self.profile.cache_marks:  # as _interruptible sends them
            sent["cache_marks"] = list(cache_marks)
        return sent

    def _tools_text(self, tools: list[dict[str, Any]]) -> str:
        # The session's schema list is built once and never changed in place (its token
        # count is cached the same way, agents/context/working.py): dumped once, not every call.
        if self._dumped_tools is None or self._dumped_tools[0] is not tools:
            self._dumped_tools = (tools, json.dumps(tools, ensure_ascii=False))
        return self._dumped_tools[1]

    def _stored_request(self, call: int, sent: dict[str, Any]) -> dict[str, Any]:
        tools = sent.get("tools")
        if tools is None:
            return sent
        if self._last_tools is not None and self._last_tools[1] == tools:
            return {**sent, "tools": {"tools_of_call": self._last_tools[0]}}
        self._last_tools = (call, tools)
        return sent

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Around every wait of the engine's — a model call, the server's tokenizer, a
        retry's backoff: what the turn wrote is committed first and the next batch opens
        after, so no transaction (on SQLite: the database's one write lock) is held while
        nothing is computed (issue 25 item 1)."""
        self.pause()
        try:
            yield
        finally:
            self.resume()

    def _timed(self, messages, tools, max_tokens, model, tool_choice=None,
               cache_marks=()) -> ModelReply:
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            with self.waiting():
                return self._interruptible(messages, tools, max_tokens, model, tool_choice,
                                           cache_marks)
        except ModelError as exc:
            exc.elapsed_s = time.perf_counter() - started  # charged to the retry budget
            raise
        finally:
            self.ledger.outside(time.perf_counter() - started, time.thread_time() - cpu)

    def _interruptible(self, messages, tools, max_tokens, model, tool_choice,
                       cache_marks=()) -> ModelReply:
        """One call, cut short by a cancel request or the profile's total call_timeout; the
        call left behind is closed, so a server that watches its connections stops."""
        extra: dict[str, Any] = {"tool_choice": tool_choice} if tool_choice else {}
        if cache_marks and self.profile.cache_marks:  # stand-in models in tests take none
            extra["cache_marks"] = cache_marks
        if self.served is not None:
            # llama-cpp-python: it streams no usage (exact counts check it) and no tool call
            # the model chose; its server does not stop a request whose client went away.
            extra["stream"] = False
        try:
            return run_interruptible(
                lambda: self.model.complete(messages, tools, max_tokens, model=model, **extra),
                deadline_s=self.profile.call_timeout, should_stop=self.should_stop)
        except CallDeadline as exc:
            self._abort()
            raise ModelError("deadline_exceeded", f"context deadline exceeded: {exc}") from exc
        except CallCancelled:
            self._abort()
            raise

    def _abort(self) -> None:
        abort = getattr(self.model, "abort", None)
        if abort is not None:
            abort()

    def _refused(self, kind: str, exc: ContextOverflow, engine_tokens: int, limit: int,
                 zones: dict[str, int], messages: list[dict[str, Any]], turn: int,
                 sent: dict[str, Any], count_kind: str = "", figures=None) -> None:
        """A request the provider refused as too long is still a call that was made: it is
        recorded with the provider's own count, so peaks and over-window totals show it."""
        output = isinstance(exc, OutputOverflow)  # what was sent fitted: nothing to learn
        reply = ModelReply(content="", finish_reason="refused", input_tokens=exc.sent_tokens
                           if output else max(exc.requested, engine_tokens))
        self._record(kind, reply, engine_tokens, limit, zones, messages, turn, sent=sent,
                     refused=True, error=str(exc), count_kind=count_kind, figures=figures,
                     output_overflow=output)
        if not output:
            self._calibrate(engine_tokens, exc.requested, count_kind, len(messages))

    def _calibrate(self, engine_tokens: int, provider_tokens: int, count_kind: str,
                   messages: int) -> None:
        if self.calibration is None or not self.calibration.observe(
                engine_tokens, provider_tokens, count_kind, messages):
            return
        if self.on_correction is not None:
            self.on_correction()

    def _record(self, kind: str, reply: ModelReply, engine_tokens: int, limit: int,
                zones: dict[str, int], messages: list[dict[str, Any]], turn: int,
                sent: dict[str, Any], refused: bool = False, error: str = "",
                count_kind: str = "", figures=None, output_overflow: bool = False,
                words_calls: list[int] | None = None) -> ModelReply:
        """Emit the call's MODEL_CALL; return the reply as the engine reads it."""
        self.ledger.calls += 1
        input_tokens = reply.input_tokens or engine_tokens
        extra: dict[str, Any] = {"refused": True, "error": error} if refused else {}
        if words_calls:
            extra["words_calls"] = list(words_calls)
        if output_overflow:
            extra["overflow"] = "output"
        calibration = self.calibration
        if calibration is not None:  # the engine's figure as it stood before this call
            if self._counter_stopped() and calibration.exact:  # it failed on a text
                self._lose(self._counter_stopped(), self.ledger.calls)
            if kind == "agent":
                calibration.agent_kind = count_kind
                calibration.agent_messages = len(messages)
            estimate = calibration.estimate(engine_tokens, count_kind, len(messages))
            extra.update(estimated_tokens=estimate, count_source=calibration.source,
                         count_kind=count_kind)
            served = None if figures is None or refused else self.served.check(
                figures, reply.content, reply.tool_calls, reply.input_tokens)
            if refused and figures is not None:
                extra.update(estimated_tokens=figures.tokens, count_source="exact")
            if served is not None:  # the whole request rendered and counted: exact
                extra.update(estimated_tokens=figures.tokens, count_source="exact",
                             served_tokens=served)
                calibration.confirmed = True
                # The framing fit learns from the figure that must fit the window.
                self._calibrate(engine_tokens, figures.tokens, count_kind, len(messages))
            elif not refused:
                if figures is not None:  # this call showed the rendering is not the server's
                    extra.update(count_mismatch=self.served.mismatch)
                    self._lose(self.served.mismatch, self.ledger.calls)
                    extra.update(count_source=calibration.source)
                elif calibration.exact and not calibration.lost and reply.input_tokens:
                    # The server's tokenizer counts the texts and the framing is fitted:
                    # exact only for a call whose report the figure matched.
                    calibration.confirmed = estimate == reply.input_tokens
                    extra.update(count_source=calibration.source)
                self._calibrate(engine_tokens, reply.input_tokens, count_kind, len(messages))
            calibration.label(self.ledger.calls, extra["count_source"])
        if self.unescapes and not refused:
            reply = read_back(reply)  # recorded as read, so a replay reads the same
        profile = self.profile
        self.emit(ModelCall(
            call=self.ledger.calls, kind=kind, input_tokens=input_tokens,
            engine_tokens=engine_tokens, zones=zones, output_tokens=reply.output_tokens,
            cached_tokens=reply.cached_tokens, cache_read_tokens=reply.cache_read_tokens,
            cache_write_tokens=reply.cache_write_tokens, finish_reason=reply.finish_reason,
            latency_ms=round(reply.latency_ms, 2),
            cost=profile.cost(input_tokens, reply.cached_tokens, reply.output_tokens),
            over_window=(refused and not output_overflow) or input_tokens > limit,
            limit=limit, **extra,
            model=(profile.summary_model if kind == "summary" else "") or profile.model,
            # The answer itself, tool calls included: what a replay plays back (feature E2).
            reply={"content": reply.content, "tool_calls": reply.tool_calls,
                   "finish_reason": reply.finish_reason},
            # The rest of the request body (model, max_tokens, tools...), so the inspector
            # can rebuild byte for byte what the provider received.
            request=self._stored_request(self.ledger.calls, sent), messages=messages,
            turn=turn))
        return reply
