"""How the loop takes a reply without tool calls (feature T1): an empty answer, one that
cannot be the final answer (see agents.loop.reply_vetting), or the final answer, continued
while it is cut by the output limit (feature C15); and the weak-model answer turn, a
tool-free request for the answer from the tool results.
"""
from __future__ import annotations

import json
from typing import Callable

from agents.compaction.fresh_requests import ANSWER_FRAME, answer_request
from agents.context.hints import HintInjector
from agents.context.working import Request, WorkingContext
from agents.errors import error_event
from agents.events import AssistantMessage
from agents.loop.context_keeper import ContextKeeper
from agents.loop.reply_vetting import draws_on
from agents.loop.state import LoopDeps, LoopState
from agents.protocol import CONTINUE_MARKER
from agents.provider.client import ModelError, ModelReply

MAX_CONTINUATIONS = 5
MAX_EMPTY_ANSWERS = 2  # an empty answer is asked again this often before the session fails
MAX_REJECTED_ANSWERS = 1  # an unusable answer is asked again this often before the session fails
INJECTED_ZONES = ("snapshot", "summary", "since", "hints")


class Answers:
    """The loop's replies without tool calls. `call_agent(request, limit)` asks the model
    again (a cut answer's continuation), `add_user_message(text, source)` nudges it, and
    `max_turns()` is the run's turn limit."""

    def __init__(self, deps: LoopDeps, state: LoopState, *, ctx: WorkingContext,
                 keeper: ContextKeeper, hints: HintInjector,
                 call_agent: Callable[[Request, int], ModelReply],
                 add_user_message: Callable[[str, str], None],
                 max_turns: Callable[[], int]) -> None:
        self.deps, self.state, self.ctx, self.keeper, self.hints = deps, state, ctx, keeper, hints
        self.call_agent, self.add_user_message = call_agent, add_user_message
        self.max_turns = max_turns

    def empty(self) -> None:
        """A model that answers nothing is asked once more, then the session fails clearly."""
        state = self.state
        state.empty_answers += 1
        message = f"the model returned an empty answer ({state.empty_answers} in a row)"
        if state.empty_answers > MAX_EMPTY_ANSWERS:
            raise ModelError("bad_response", message)
        self.deps.emit(error_event("bad_response", message, fatal=False))
        self.add_user_message("Your last answer was empty. Continue the task with a tool call, "
                              "or give the final answer.", source="engine")
        return None

    def injected_texts(self) -> list[str]:
        """The engine's own blocks in the last request (snapshot, summary, hints)."""
        request = self.state.last_request
        if request is None:
            return []
        return [m.get("content") or "" for m, zone in zip(request.messages, request.zones_of)
                if zone in INJECTED_ZONES] + [self.state.answer_material]

    def tool_errors(self) -> list[str]:
        """The tool errors in the last request: what an answer may not merely repeat."""
        request = self.state.last_request
        errors = []
        for m in request.messages if request is not None else ():
            content = str(m.get("content") or "")
            if m.get("role") == "tool" and content.startswith("Error: "):
                errors.append(content)
        return errors

    def check_drawn_from_results(self, reply: ModelReply) -> None:
        """On the tool-free answer turn ("answer from those results only") an answer that
        holds nothing of any tool result is no answer: the session ends saying why.
        SmolLM2 answered "name the CSV file you found" with "The list_files tool returns a
        list of all the files in the specified folder." """
        request = self.state.last_request
        results = [str(m.get("content") or "") for m in request.messages
                   if m.get("role") == "tool" or "<system-info>" in str(m.get("content") or "")]
        results = [r for r in results if not r.startswith("Error: ")]
        # The tools' own words (names, parameters, descriptions) are no result: SmolLM2's
        # "…all the files in the workspace that match the given path" held only "path",
        # which is also the header of list_files' table.
        schemas = json.dumps(self.deps.tools.schemas(), ensure_ascii=False)
        if draws_on(reply.content, results, [self.deps.spec.goal, self.state.answer_material,
                                             schemas]):
            return
        self.deps.emit(AssistantMessage(content=reply.content, tool_calls=[],
                                        rejected="nothing from the results"))
        why = ("no tool call of this session returned a result to answer from"
               if not results else "it holds no word or figure of the tool results")
        raise ModelError("unusable_answer", (
            "asked for its answer from the tool results, the model wrote "
            f"{reply.content.strip()[:200]!r}, which is not drawn from them: {why}"))

    def turn_due(self) -> bool:
        """A weak profile's turn that is asked for the answer without tools: the last turn
        (a tool result no later turn reads is wasted), or after the same successful call
        was repeated up to the hint (SmolLM2 called list_files six times running)."""
        self.state.answer_material = ""
        spec = self.deps.spec
        if not spec.profile.tool_free_summaries:
            return False
        return (self.state.turn >= self.max_turns() - 1
                or self.hints.repeats >= spec.config.tool_retries_limit)

    def request_for(self, request: Request, limit: int) -> Request:
        """`request`'s material as one fresh, tool-free request (agents.compaction.fresh_requests);
        `request` itself when that would not fit."""
        goal = self.deps.spec.goal
        messages = answer_request(request.messages, goal)
        # What an answer may not merely repeat: the request's own words and the goal (the
        # summary is an injected block already); copying a tool result is drawn from it.
        self.state.answer_material = "\n".join([messages[0]["content"], ANSWER_FRAME, goal])
        tokens = [self.ctx.counter.message(m) for m in messages]
        total = self.ctx.counter.request(messages)
        if total > limit:
            return request
        return Request(messages=messages, zones_of=["answer_request"] * len(messages),
                       tokens_of=tokens, tools=[], zones={"answer_request": total}, total=total)

    def rejected(self, reply: ModelReply, why: str, last: bool = False) -> None:
        """A reply that cannot be the final answer: asked again once, then the session
        fails; at once when asking again cannot help (`last`)."""
        state = self.state
        state.rejected_answers += 1
        self.deps.emit(AssistantMessage(content=reply.content, tool_calls=[], rejected=why))
        message = f"the model's answer was not accepted as a final answer: {why}"
        if last:
            raise ModelError("unusable_answer", (
                "asked for its answer from the tool results, the model only repeated a tool's "
                f"error message ({reply.content.strip()[:200]!r}); the session has no answer "
                "drawn from a tool result"))
        if state.rejected_answers > MAX_REJECTED_ANSWERS:
            raise ModelError("unusable_answer", f"{message} ({state.rejected_answers} in a row)")
        self.deps.emit(error_event("unusable_answer", message, fatal=False))
        self.add_user_message(why, source="engine")
        return None

    def final(self, reply: ModelReply) -> str:
        deps, turn = self.deps, self.state.turn
        parts = [reply.content]
        continuations = 0
        while reply.finish_reason == "length" and continuations < MAX_CONTINUATIONS:
            continuations += 1
            deps.emit(error_event(
                "finish_reason_length", f"answer cut at {reply.output_tokens} tokens; continuing",
                fatal=False))
            self.ctx.extra_reserve += self.ctx.budget().reserve
            self.ctx.add({"role": "assistant", "content": reply.content}, turn)
            self.ctx.add({"role": "user", "content": f"{CONTINUE_MARKER} Continue exactly where "
                          "you stopped; do not repeat what you already wrote."}, turn)
            request, limit = self.keeper.prepare(hints=False)
            reply = self.call_agent(request, limit)
            parts.append(reply.content)
        if reply.finish_reason == "length":
            self._incomplete(parts)
        answer = "".join(parts)
        ref = deps.store.archive(deps.session_id, turn, "assistant", answer)
        self.ctx.add({"role": "assistant", "content": answer}, turn, ref)
        deps.emit(AssistantMessage(content=answer, tool_calls=[]))
        return answer

    def _incomplete(self, parts: list[str]) -> None:
        """Keep the cut pieces in the archive, apart, and end the session as failed."""
        deps = self.deps
        for number, piece in enumerate(parts, 1):
            deps.store.archive(deps.session_id, self.state.turn, "assistant", piece,
                               tool_args={"incomplete_answer_piece": number})
        deps.emit(AssistantMessage(content="".join(parts), tool_calls=[], incomplete=True))
        raise ModelError("answer_incomplete", (
            f"the answer was still cut off by the output limit after {MAX_CONTINUATIONS} "
            f"continuations ({len(parts)} pieces, kept separately in the archive of turn "
            f"{self.state.turn}); it is not reported as a final answer"))
