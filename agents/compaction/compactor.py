"""History compaction (features C3, C5–C7, C13, C16): fold old units into the summary.

Every summary request is sized before it is sent: the old units are cut into chunks that
fit the window minus the summary's own output room, so the compaction request can never
overflow ("compress half-way and overflow again" cannot happen). A summary that fails,
is invalid or is cut short falls back to truncation with the marker of feature C7.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from agents.compaction.fresh_requests import SUMMARIZER_PROMPT, SUMMARY_TAIL, summary_request
from agents.compaction.novelty import adds_nothing
from agents.compaction.summary import (SUMMARY_INSTRUCTIONS, TRUNCATION_MARKER, StructuredSummary,
                                       SummaryError, budget_lines, least_useful_tokens, merge,
                                       parse_model_summary, render, render_lines, shrink_to,
                                       within_sections)
from agents.compaction.units import split_for_compaction, split_unit
from agents.context.history import Msg, Unit, flatten
from agents.context.working import WorkingContext
from agents.counting.tokens import REPLY_PRIMING, TOKENS_PER_MESSAGE
from agents.protocol import (CONSTRAINTS_LINE, FOLD_LINE, LABELS_LINE, SUMMARY_MARKER,
                             archive_label, label_line)
from agents.provider.client import ModelError, ModelReply

# summarize(messages, max_tokens, request_tokens, tools) -> reply; raises ModelError
Summarize = Callable[[list[dict[str, Any]], int, int, list | None], ModelReply]
PER_MESSAGE_SLACK = 2  # the turn/ref prefix can merge a token or two with the text after it
_FRESH_FORM = "The messages after this one are"
_PREFIX_FORM = ("The messages to fold (their number and archive labels are at the end of "
                "this message) are")
MIN_SUMMARY_ROOM = 64  # below this a summary request carries too little history to be worth it
RAISE_SLACK = 16  # tokens kept free when a cut summary is asked again with the window's room
FIRST_OUTPUT_CAP = 4096  # output room a first summary call may get beyond its zone's
# The request that repeats the agent's cached prefix is made only when it leaves this much
# more than the summary's output room: asked for a summary of the zone's size, a model
# writes past it by the answer's JSON framing, and a cut answer is asked again in chunks,
# the first call paid for and never used (long-1000 at 4 096: 532 tokens of room, an
# answer of 544).
PREFIX_OUTPUT_HEADROOM = 1.25
ARGS_KEEP_CHARS = 200  # tool-call arguments shown in a squeezed summary request
# What each message of a summary request is, as the call's record names it (the
# inspector's zone column): the agent's own head zones keep their names, except its
# summary, which the request folds into: the previous summary.
FOLDED, INSTRUCTIONS, CONSTRAINTS, PREVIOUS = ("folded", "instructions", "constraints",
                                               "previous-summary")
MATERIAL = "material"  # a fresh request's one user message: rules, notes and folded units


@dataclass
class CompactionOutcome:
    trigger: str
    compacted: list[Msg] = field(default_factory=list)
    summary_before: str = ""
    summary_after: str = ""
    fallback: bool = False
    fallback_reason: str = ""
    summary_calls: int = 0
    merged_calls: int = 0  # of them, those whose reply went into the summary
    skipped: bool = False  # no summary asked: it would not fit the next request
    raised_output: int = 0  # output room a cut summary was asked again with, if it was
    nothing_new: bool = False  # no summary asked: the summary held all that was folded
    # How each accepted model summary was read: "json", or "text" (headed sections).
    summary_forms: list[str] = field(default_factory=list)

    @property
    def archived_turns(self) -> list[int]:
        turns = [m.turn for m in self.compacted]
        return [min(turns), max(turns)] if turns else []

    @property
    def refs(self) -> list[str]:
        return [m.ref for m in self.compacted if m.ref]


def is_marker(msg: Msg) -> bool:
    return msg.role == "system" and msg.text == TRUNCATION_MARKER


class Compactor:
    def __init__(self, ctx: WorkingContext, summarize: Summarize, fresh: bool = False) -> None:
        self.ctx = ctx
        self.summarize = summarize
        # Weak models (the profile's tool_free_summaries): never the prefix-reusing request,
        # and each chunk as agents.compaction.fresh_requests packs it.
        self.fresh = fresh
        self._asked = ""  # the texts of the last summary request
        self._room = 0  # tokens the summary being made may take in the next request
        self._overview: int | None = None  # the task overview's stated budget, if any
        # The request being asked, message by message: (what it is, its tokens as the
        # engine counts them), summing with the reply priming and the tool schemas to the
        # request's count. Read by the summarize callback for the call's record.
        self.request_parts: list[tuple[str, int]] = []

    def compact(self, trigger: str, *, constraints: list[str], instructions: str = "",
                emergency: bool = False) -> CompactionOutcome | None:
        """Fold old units into the summary; None when there is nothing old to fold."""
        ctx = self.ctx
        budget = ctx.budget()
        units = ctx.units()
        keep_from = split_for_compaction(
            units, keep_tokens=min(budget.keep_tokens, budget.history // 2),
            keep_rounds=budget.keep_rounds, emergency=emergency)
        if keep_from == 0:
            return None
        old, kept = units[:keep_from], units[keep_from:]
        outcome = CompactionOutcome(trigger=trigger, summary_before=ctx.summary_text,
                                    compacted=[m for m in flatten(old) if not is_marker(m)])
        self._room = self.summary_room(flatten(kept))
        self._overview = self.overview_budget(outcome.compacted, constraints)
        summary = None
        # A summary nobody would send is not asked for: the room must hold the summary's
        # own frame and a line, else every line written is dropped to fit it.
        least = max(MIN_SUMMARY_ROOM, least_useful_tokens(ctx.count))
        if self._room < least:
            outcome.skipped = True
            outcome.fallback_reason = (
                f"no summary was requested: the next request would leave it {self._room} "
                f"tokens (at least {least} needed: the summary's frame and one line) beside "
                "the newest rounds, the system prompt, the task snapshot and the person's "
                "words")
        elif ctx.summary and adds_nothing(outcome.compacted, ctx.summary_text):
            # Every figure and word leaving is in the summary already: archived, no call.
            summary = StructuredSummary.from_dict(ctx.summary)
            outcome.nothing_new = True
        else:
            try:
                summary = self._summarize_units(old, constraints, instructions, outcome)
            except (ModelError, SummaryError) as exc:
                outcome.fallback_reason = str(exc)
        if summary is None:
            if not ctx.config.compression_fallback_to_truncation:
                raise CompactionFailed(
                    f"The summary call failed ({outcome.fallback_reason}) and "
                    "compression_fallback_to_truncation is off, so history cannot shrink.")
            outcome.fallback = True
            marker = Msg.build(ctx.counter, {"role": "system", "content": TRUNCATION_MARKER},
                               turn=old[-1].messages[-1].turn)
            ctx.history = [marker] + flatten(kept)
        else:
            ctx.set_summary(summary.to_dict(), render(summary))
            ctx.history = flatten(kept)
        outcome.summary_after = ctx.summary_text
        return outcome

    def summary_room(self, kept: list[Msg]) -> int:
        """Tokens a summary may take in the next agent request, with `kept` as its history:
        what the window leaves beside everything else that request will carry."""
        ctx = self.ctx
        history = ctx.history
        ctx.history = kept  # the person's words block grows by what leaves the history
        try:
            others = ctx.input_tokens() - ctx.zones()["summary"]
        finally:
            ctx.history = history
        framing = ctx.count("system") + TOKENS_PER_MESSAGE
        return ctx.budget().input_limit - others - framing

    def overview_budget(self, leaving: list[Msg], constraints: list[str]) -> int | None:
        """The task overview's budget to state in the request: the room the summary will
        have, when what the person wrote that is folded now (with the constraints and the
        overview so far) is longer than that room, else None (nothing stated). A model
        asked for "the user's goal and every constraint" copies a long brief whole, and an
        overview longer than the zone is never kept (the brief itself stays in the task
        snapshot and the person's words)."""
        ctx = self.ctx
        room = min(ctx.budget().summary_cap, self._room)
        previous = (ctx.summary or {}).get("task_overview") or []
        asked = (sum(m.tokens for m in leaving if m.role == "user")
                 + sum(ctx.count(str(line)) for line in [*constraints, *previous]))
        return room if asked > room else None

    # --- summary requests
    def _summarize_units(self, old: list[Unit], constraints: list[str], instructions: str,
                         outcome: CompactionOutcome) -> StructuredSummary | None:
        ctx = self.ctx
        budget = ctx.budget()
        current = (StructuredSummary.from_dict(ctx.summary) if ctx.summary else None)
        pending = [u for u in old if not all(is_marker(m) for m in u.messages)]
        limit = budget.summary_input_limit
        if pending and not self.fresh:
            reused = self._prefix_request(old, constraints, instructions)
            if reused is not None:  # one request that repeats the agent's cached prefix
                request, tokens = reused
                reply = self._ask(request, tokens, ctx.tools or None, outcome)
                if reply.finish_reason != "length":
                    return self._merged(current, reply, outcome)
                # Cut even with all the window's room: fold it in smaller chunks instead.
        share = 1.0  # of the room a chunk may fill; halved each time a summary is cut
        while pending:
            head, tail = self._frame(current, constraints, instructions)
            base = REPLY_PRIMING + sum(ctx.counter.message(m) for m in head + [tail])
            room = int((limit - base) * share)
            if room < MIN_SUMMARY_ROOM:
                raise SummaryError(f"the summary request's fixed part ({base} tokens) leaves no "
                                   f"room for history under its limit of {limit} tokens")
            chunk: list[dict[str, Any]] = []
            taken: list[Unit] = []
            used = 0
            while pending:
                msgs = [self._prefixed(m) for m in pending[0].messages]
                cost = sum(ctx.counter.message(m) + PER_MESSAGE_SLACK for m in msgs)
                if cost > room - used:
                    if chunk:
                        break
                    pieces = split_unit(pending[0])
                    if len(pieces) > 1:  # many parallel calls: one call with its result each
                        pending[:1] = pieces
                        continue
                    msgs = self._squeezed(msgs, room)  # one unit alone is too big: cut it
                    cost = sum(ctx.counter.message(m) + PER_MESSAGE_SLACK for m in msgs)
                chunk.extend(msgs)
                used += cost
                taken.append(pending.pop(0))
            request = self._packed(head, chunk, tail, current, constraints, instructions)
            tokens = ctx.counter.request(request)
            squeeze_room = room
            while tokens > limit:  # re-checked after every shrink: never sent over the limit
                squeeze_room = int(squeeze_room * 0.8)
                if squeeze_room < MIN_SUMMARY_ROOM:
                    raise SummaryError(f"the summary request cannot be brought under its limit "
                                       f"of {limit} tokens ({tokens} after shrinking)")
                chunk = self._squeezed(chunk, squeeze_room)
                request = self._packed(head, chunk, tail, current, constraints, instructions)
                tokens = ctx.counter.request(request)
            reply = self._ask(request, tokens, None, outcome)
            if reply.finish_reason == "length" and len(taken) > 1 and not self.fresh:
                pending[:0] = taken  # cut: the same units again, in chunks half the size
                share /= 2
                continue
            current = self._merged(current, reply, outcome)
        return current

    def _frame(self, current: StructuredSummary | None, constraints: list[str],
               instructions: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The fixed part of a chunked summary request: head messages and the closing one
        (for a fresh request, the whole request around an empty chunk: sized the same way)."""
        if self.fresh:
            request = self._packed([], [], {}, current, constraints, instructions)
            return request[:-1], request[-1]
        return (self._head_messages(current, constraints, instructions),
                {"role": "user", "content": "Write the summary JSON now."})

    def _packed(self, head: list[dict[str, Any]], chunk: list[dict[str, Any]],
                tail: dict[str, Any], current: StructuredSummary | None,
                constraints: list[str], instructions: str) -> list[dict[str, Any]]:
        if self.fresh:
            request = summary_request(chunk, previous=render(current) if current else "",
                                      constraints=constraints, instructions=instructions)
            names = [INSTRUCTIONS, MATERIAL]
        else:
            request = head + chunk + [tail]
            names = self._head_parts(current, constraints) + [FOLDED] * len(chunk) + [INSTRUCTIONS]
        count = self.ctx.counter.message
        self.request_parts = [(name, count(m)) for name, m in zip(names, request)]
        return request

    def _ask(self, request: list[dict[str, Any]], tokens: int, tools: list | None,
             outcome: CompactionOutcome) -> ModelReply:
        """One summary call; a summary cut by its output limit is asked again once with all
        the output room the window leaves (a small model writes long summaries)."""
        budget = self.ctx.budget()
        # A small window's summary zone is shorter than the summary a model writes: cut
        # there, it is asked again and the first call's text is never used. So the first
        # call gets the rest of the window, up to what any server accepts as an output limit.
        rest = self.ctx.window - int(tokens * max(1.0, self.ctx.correction)) - RAISE_SLACK
        max_tokens = max(budget.summary_output, min(rest, FIRST_OUTPUT_CAP))
        # What the reply is checked against: a copy of it is no summary.
        self._asked = "\n".join(str(m.get("content") or "") for m in request)
        reply = self.summarize(request, max_tokens, tokens, tools)
        outcome.summary_calls += 1
        choice: dict[str, str] = {}
        if tools and reply.tool_calls:
            # Offered the agent's tools as the agent is (one cached prefix for both kinds of
            # request), the model called one instead of summing up: asked once more with the
            # tools not callable, which costs that request its cached messages on a strict
            # provider, but not a fallback to truncation.
            choice = {"tool_choice": "none"}
            reply = self.summarize(request, max_tokens, tokens, tools, **choice)
            outcome.summary_calls += 1
            if reply.tool_calls:
                raise SummaryError(
                    f"the summary answer called {_called(reply)} instead of writing the "
                    "summary, asked with tool_choice \"auto\" and again with \"none\"")
        # In the provider's tokens: the real window less the prompt as the provider counts it.
        room = self.ctx.window - int(tokens * max(1.0, self.ctx.correction)) - RAISE_SLACK
        # A fresh (weak-model) summary is plain lines: a cut one is read up to the cut.
        if reply.finish_reason == "length" and room > max_tokens * 5 // 4 and not self.fresh:
            outcome.raised_output = room
            reply = self.summarize(request, room, tokens, tools, **choice)
            outcome.summary_calls += 1
        return reply

    def _merged(self, current: StructuredSummary | None, reply: ModelReply,
                outcome: CompactionOutcome) -> StructuredSummary:
        budget = self.ctx.budget()
        text = reply.content
        if reply.finish_reason == "length":
            if not self.fresh:
                raise SummaryError("the summary was cut off by its output limit")
            text = text.rsplit("\n", 1)[0] if "\n" in text.strip() else ""  # the cut line goes
        echoes = (SUMMARIZER_PROMPT, SUMMARY_TAIL) if self.fresh else None
        merged = merge(current, parse_model_summary(text, outcome.summary_forms, echoes,
                                                    material=self._asked,
                                                    earlier=render(current) if current else ""))
        count = self.ctx.count
        current = shrink_to(within_sections(merged, budget.summary_cap, count),
                            min(budget.summary_cap, self._room), count, count.lines)
        if count.lines(render_lines(current)) > budget.summary_max:
            raise SummaryError("the summary is longer than its zone allows")
        outcome.merged_calls += 1
        return current

    def _prefix_request(self, old: list[Unit], constraints: list[str],
                        instructions: str) -> tuple[list[dict[str, Any]], int] | None:
        """The agent's stable head and the units to fold, unchanged, then the instruction.

        Everything before the instruction is byte-identical to the start of the agent's
        last request, so a provider bills it as cached (C17). None when it would not fit
        the window minus the summary's output room: then fresh, chunked requests are used.
        """
        ctx = self.ctx
        folded = flatten(old)
        head = [m for _, m in ctx.stable_head()]
        labels = [label_line(i, m.turn, m.ref) for i, m in enumerate(folded, start=1)]
        body = SUMMARY_INSTRUCTIONS.replace(_FRESH_FORM, _PREFIX_FORM)
        if not body.startswith(SUMMARY_MARKER):
            body = f"{SUMMARY_MARKER}\n{body}"
        lines = [body.rstrip(), *budget_lines(ctx.budget().summary_cap, self._overview),
                 FOLD_LINE.format(count=len(folded)), LABELS_LINE, *labels]
        if instructions:
            lines.append(f"Focus for this summary (from the person running the task): "
                         f"{instructions}")
        if constraints:
            lines.extend([CONSTRAINTS_LINE, *(f"- {c}" for c in constraints)])
        tail = {"role": "user", "content": "\n".join(lines)}
        tokens = (REPLY_PRIMING + ctx._tools_tokens + ctx.counter.message(tail)
                  + sum(m.tokens for m in head) + sum(m.tokens for m in folded))
        budget = ctx.budget()
        if tokens > budget.window - int(budget.summary_output * PREFIX_OUTPUT_HEADROOM):
            return None
        self.request_parts = ([(PREVIOUS if zone == "summary" else zone, m.tokens)
                               for zone, m in ctx.stable_head()]
                              + [(FOLDED, m.tokens) for m in folded]
                              + [(INSTRUCTIONS, ctx.counter.message(tail))])
        return [m.data for m in head] + [m.data for m in folded] + [tail], tokens

    def _head_messages(self, current: StructuredSummary | None, constraints: list[str],
                       instructions: str) -> list[dict[str, Any]]:
        system = SUMMARY_INSTRUCTIONS
        if not system.startswith(SUMMARY_MARKER):
            system = f"{SUMMARY_MARKER}\n{system}"
        stated = budget_lines(self.ctx.budget().summary_cap, self._overview)
        if stated:
            system = "\n".join([system.rstrip(), *stated])
        if instructions:
            system += f"\nFocus for this summary (from the person running the task): {instructions}"
        head = [{"role": "system", "content": system}]
        if constraints:
            head.append({"role": "system", "content": "Hard constraints (keep verbatim in "
                         "task_overview):\n" + "\n".join(f"- {c}" for c in constraints)})
        if current is not None:
            head.append({"role": "system", "content": render(current)})
        return head

    @staticmethod
    def _head_parts(current: StructuredSummary | None, constraints: list[str]) -> list[str]:
        """What each message `_head_messages` returns is, in the same order."""
        return ([INSTRUCTIONS] + ([CONSTRAINTS] if constraints else [])
                + ([PREVIOUS] if current is not None else []))

    @staticmethod
    def _prefixed(msg: Msg) -> dict[str, Any]:
        data = dict(msg.data)
        if msg.role in ("user", "tool") or data.get("content"):
            data["content"] = f"{archive_label(msg.turn, msg.ref)}\n{data.get('content') or ''}"
        return data

    def _squeezed(self, msgs: list[dict[str, Any]], room: int) -> list[dict[str, Any]]:
        """Each message cut to its share of `room`; tool-call arguments are cut too (the
        summarizer needs what was called, not a whole file the model wrote)."""
        share = max(8, room // max(1, len(msgs)) - PER_MESSAGE_SLACK)
        out = []
        for data in msgs:
            if data.get("tool_calls"):
                data = {**data, "tool_calls": [_short_args(c, ARGS_KEEP_CHARS * share // 512)
                                               for c in data["tool_calls"]]}
            msg = Msg.build(self.ctx.counter, data)
            if msg.tokens > share and isinstance(data.get("content"), str):
                msg = self.ctx.shortened(msg, share)
            out.append(msg.data)
        return out


def _called(reply: ModelReply) -> str:
    return ", ".join(sorted({str(c.get("name") or "a tool") for c in reply.tool_calls}))


def _short_args(call: dict[str, Any], keep: int) -> dict[str, Any]:
    function = call.get("function") or {}
    args = str(function.get("arguments") or "")
    if len(args) <= keep + 1:
        return call
    return {**call, "function": {**function, "arguments": args[:max(0, keep)] + "…"}}


class CompactionFailed(RuntimeError):
    """History could not be shrunk and the configuration forbids truncation."""

