"""How the loop takes a reply without tool calls (feature T1): an empty answer, one that
cannot be the final answer (see agents.loop.reply_vetting), or the final answer, continued
while it is cut by the output limit (feature C15); and the weak-model answer turn, a
tool-free request for the answer from the tool results and the person's messages.

A final answer is the model's own text drawn from the tool results or the person's
messages. On a weak server a session ended "finished" on "I'm ready to assist. What's
your task?", on a copy of the time hint with another date, on the task restated, and on
an HTML-escaped copy of the summary block: none of that is an answer, whatever the turn.
"""
from __future__ import annotations

import json
from typing import Callable

from agents.compaction.fresh_requests import ANSWER_FRAME, ANSWER_PERSON, answer_request
from agents.context.hints import HintInjector
from agents.context.working import Request, WorkingContext
from agents.errors import error_event
from agents.events import AssistantMessage
from agents.loop.context_keeper import ContextKeeper
from agents.loop.reply_vetting import REASONS, unsupported
from agents.loop.state import LoopDeps, LoopState
from agents.protocol import CONTINUE_MARKER
from agents.provider.client import ModelError, ModelReply

MAX_CONTINUATIONS = 5
MAX_EMPTY_ANSWERS = 2  # an empty answer is asked again this often before the session fails
MAX_REJECTED_ANSWERS = 1  # an unusable answer is asked again this often before the session fails
INJECTED_ZONES = ("snapshot", "words", "summary", "since", "hints")


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
        """What an answer may not merely repeat: the engine's own blocks in the last request
        (snapshot, the person's words, summary, hints), the system prompt, the goal, the
        time hint as the engine writes it (a copy with another date compares equal: digits
        do) and the answer turn's own words."""
        request, spec = self.state.last_request, self.deps.spec
        blocks = [] if request is None else [
            m.get("content") or "" for m, zone in zip(request.messages, request.zones_of)
            if zone in INJECTED_ZONES]
        return blocks + [spec.system_prompt, spec.goal, self.hints.time_text(self.deps.clock()),
                         self.state.answer_material]

    def tool_errors(self) -> list[str]:
        """The tool errors in the last request: what an answer may not merely repeat."""
        request = self.state.last_request
        errors = []
        for m in request.messages if request is not None else ():
            content = str(m.get("content") or "")
            if m.get("role") == "tool" and content.startswith("Error: "):
                errors.append(content)
        return errors

    def results(self) -> list[str]:
        """The tool results of the last request that succeeded (not the summary: it is the
        engine's, and any word of it passed for "drawn from the results")."""
        request = self.state.last_request
        results = [str(m.get("content") or "") for m in request.messages
                   if m.get("role") == "tool"
                   or str(m.get("content") or "").startswith("[result of tool call")]
        bodies = [r.split("\n", 1)[-1] if r.startswith("[result of tool call") else r
                  for r in results]
        return [r for r in bodies if not r.startswith("Error: ")]

    def person_messages(self) -> list[str]:
        """The person's messages after the goal, in force or not: material of theirs."""
        return [m.text for m in self.ctx.person.messages if m.source != "goal"]

    def why_unsupported(self, reply: ModelReply, answer_turn: bool) -> str | None:
        """Why a reply that is neither a call nor an echo is no final answer (it asks back,
        restates the task, or holds nothing of the tool results or the person's messages);
        None when it may stand. Being drawn from them is required on the answer turn, and
        on every turn of a weak profile once there is something to draw from: a strong
        model's "see the key figures above" closes work its earlier turns wrote out. The tools' own words (names,
        parameters, descriptions) are no result: SmolLM2's "…all the files in the workspace
        that match the given path" held only "path", which is also the header of
        list_files' table."""
        schemas = json.dumps(self.deps.tools.schemas(), ensure_ascii=False)
        return unsupported(reply.content, sources=self.results() + self.person_messages(),
                           goal=self.deps.spec.goal,
                           given=[self.deps.spec.system_prompt, self.state.answer_material,
                                  schemas], archive=self.keeper.audit.source_marks_until,
                           expected=answer_turn,
                           required=self.deps.spec.profile.tool_free_summaries)

    def refuses(self, reply: ModelReply, answer_turn: bool) -> bool:
        """False when a reply that is neither a call nor an echo may stand as the final
        answer; else True, and it was asked again (`rejected`). On the tool-free answer turn asking again would ask the same:
        the session ends saying what the model wrote and why it is no answer. SmolLM2
        answered "name the CSV file you found" with "The list_files tool returns a list of
        all the files in the specified folder." """
        why = self.why_unsupported(reply, answer_turn)
        if why is None:
            return False
        if not answer_turn:
            self.rejected(reply, why)
            return True
        self.deps.emit(AssistantMessage(content=reply.content, tool_calls=[], rejected=why))
        raise ModelError("unusable_answer", (
            "asked for its answer from the tool results, the model wrote "
            f"{reply.content.strip()[:200]!r}, which is not drawn from them: {REASONS[why]}"))

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
        messages = answer_request(request.messages, goal, self.person_messages())
        # What an answer may not merely repeat: the request's own words and the goal (the
        # summary is an injected block already); copying a tool result is drawn from it.
        # The person's later messages too: written back as the answer they are theirs, not
        # the model's (Gemma-3-270M returned the turn's own frame with the person's line).
        self.state.answer_material = "\n".join([messages[0]["content"], ANSWER_FRAME,
                                                 ANSWER_PERSON, goal,
                                                 *self.person_messages()])
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
            raise ModelError("unusable_answer", (
                f"{message} ({state.rejected_answers} in a row); the last one was "
                f"{reply.content.strip()[:200]!r}"))
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
