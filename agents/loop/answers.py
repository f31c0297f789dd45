"""How the loop takes a reply without tool calls (SPEC T1, issue 11): an empty answer, one
that cannot be the final answer (see agents.loop.reply_vetting), or the final answer, continued
while it is cut by the output limit. A mixin of AgentLoop, kept apart to keep both short.
"""
from __future__ import annotations

import json

from agents.context.working import Request
from agents.errors import error_payload
from agents.compaction.fresh_requests import ANSWER_FRAME, answer_request
from agents.events import Event, EventType
from agents.provider.client import ModelError, ModelReply
from agents.loop.reply_vetting import draws_on
from agents.sim.transport import CONTINUE_MARKER

MAX_CONTINUATIONS = 5
MAX_EMPTY_ANSWERS = 2  # an empty answer is asked again this often before the session fails
MAX_REJECTED_ANSWERS = 1  # an unusable answer is asked again this often before the session fails
INJECTED_ZONES = ("snapshot", "summary", "since", "hints")


class AnswerHandling:
    """Needs the loop's emit, store, ctx, keeper, turn, _call_agent and add_user_message."""

    def _empty_answer(self) -> None:
        """A model that answers nothing is asked once more, then the session fails clearly."""
        self.empty_answers += 1
        message = f"the model returned an empty answer ({self.empty_answers} in a row)"
        if self.empty_answers > MAX_EMPTY_ANSWERS:
            raise ModelError("bad_response", message)
        self.emit(Event(EventType.ERROR, error_payload("bad_response", message, fatal=False)))
        self.add_user_message("Your last answer was empty. Continue the task with a tool call, "
                              "or give the final answer.", source="engine")
        return None

    def _injected_texts(self) -> list[str]:
        """The engine's own blocks in the last request (snapshot, summary, hints)."""
        request = self.last_request
        if request is None:
            return []
        return [m.get("content") or "" for m, zone in zip(request.messages, request.zones_of)
                if zone in INJECTED_ZONES] + [getattr(self, "answer_material", "")]

    def _tool_errors(self) -> list[str]:
        """The tool errors in the last request: what an answer may not merely repeat."""
        request = self.last_request
        errors = []
        for m in request.messages if request is not None else ():
            content = str(m.get("content") or "")
            if m.get("role") == "tool" and content.startswith("Error: "):
                errors.append(content)
        return errors

    def _check_drawn_from_results(self, reply: ModelReply) -> None:
        """On the tool-free answer turn ("answer from those results only") an answer that
        holds nothing of any tool result is no answer: the session ends saying why.
        SmolLM2 answered "name the CSV file you found" with "The list_files tool returns a
        list of all the files in the specified folder." """
        request = self.last_request
        results = [str(m.get("content") or "") for m in request.messages
                   if m.get("role") == "tool" or "<system-info>" in str(m.get("content") or "")]
        results = [r for r in results if not r.startswith("Error: ")]
        # The tools' own words (names, parameters, descriptions) are no result: SmolLM2's
        # "…all the files in the workspace that match the given path" held only "path",
        # which is also the header of list_files' table.
        schemas = json.dumps(self.tools.schemas(), ensure_ascii=False)
        if draws_on(reply.content, results, [self.spec.goal, self.answer_material, schemas]):
            return
        self.emit(Event(EventType.ASSISTANT_MESSAGE, {"content": reply.content, "tool_calls": [],
                                                      "rejected": "nothing from the results"}))
        why = ("no tool call of this session returned a result to answer from"
               if not results else "it holds no word or figure of the tool results")
        raise ModelError("unusable_answer", (
            "asked for its answer from the tool results, the model wrote "
            f"{reply.content.strip()[:200]!r}, which is not drawn from them: {why}"))

    def _answer_turn_due(self) -> bool:
        """A weak profile's turn that is asked for the answer without tools: the last turn
        (a tool result no later turn reads is wasted), or after the same successful call
        was repeated up to the hint (SmolLM2 called list_files six times running)."""
        self.answer_material = ""
        if not self.spec.profile.tool_free_summaries:
            return False
        return (self.turn >= self.max_turns() - 1
                or self.hints.repeats >= self.spec.config.tool_retries_limit)

    def _answer_request(self, request: Request, limit: int) -> Request:
        """`request`'s material as one fresh, tool-free request (agents.compaction.fresh_requests);
        `request` itself when that would not fit."""
        messages = answer_request(request.messages, self.spec.goal)
        # What an answer may not merely repeat: the request's own words and the goal (the
        # summary is an injected block already); copying a tool result is drawn from it.
        self.answer_material = "\n".join([messages[0]["content"], ANSWER_FRAME, self.spec.goal])
        tokens = [self.ctx.counter.message(m) for m in messages]
        total = self.ctx.counter.request(messages)
        if total > limit:
            return request
        return Request(messages=messages, zones_of=["answer_request"] * len(messages),
                       tokens_of=tokens, tools=[], zones={"answer_request": total}, total=total)

    def _rejected_answer(self, reply: ModelReply, why: str, last: bool = False) -> None:
        """A reply that cannot be the final answer: asked again once, then the session
        fails; at once when asking again cannot help (`last`)."""
        self.rejected_answers += 1
        self.emit(Event(EventType.ASSISTANT_MESSAGE, {"content": reply.content, "tool_calls": [],
                                                      "rejected": why}))
        message = f"the model's answer was not accepted as a final answer: {why}"
        if last:
            raise ModelError("unusable_answer", (
                "asked for its answer from the tool results, the model only repeated a tool's "
                f"error message ({reply.content.strip()[:200]!r}); the session has no answer "
                "drawn from a tool result"))
        if self.rejected_answers > MAX_REJECTED_ANSWERS:
            raise ModelError("unusable_answer", f"{message} ({self.rejected_answers} in a row)")
        self.emit(Event(EventType.ERROR, error_payload("unusable_answer", message, fatal=False)))
        self.add_user_message(why, source="engine")
        return None

    def _final_answer(self, reply: ModelReply) -> str:
        parts = [reply.content]
        continuations = 0
        while reply.finish_reason == "length" and continuations < MAX_CONTINUATIONS:
            continuations += 1
            self.emit(Event(EventType.ERROR, error_payload(
                "finish_reason_length", f"answer cut at {reply.output_tokens} tokens; continuing",
                fatal=False)))
            self.ctx.extra_reserve += self.ctx.budget().reserve
            self.ctx.add({"role": "assistant", "content": reply.content}, self.turn)
            self.ctx.add({"role": "user", "content": f"{CONTINUE_MARKER} Continue exactly where "
                          "you stopped; do not repeat what you already wrote."}, self.turn)
            request, limit = self.keeper.prepare(hints=False)
            reply = self._call_agent(request, limit)
            parts.append(reply.content)
        if reply.finish_reason == "length":
            self._incomplete_answer(parts)
        answer = "".join(parts)
        ref = self.store.archive(self.session_id, self.turn, "assistant", answer)
        self.ctx.add({"role": "assistant", "content": answer}, self.turn, ref)
        self.emit(Event(EventType.ASSISTANT_MESSAGE, {"content": answer, "tool_calls": []}))
        return answer

    def _incomplete_answer(self, parts: list[str]) -> None:
        """Keep the cut pieces in the archive, apart, and end the session as failed."""
        for number, piece in enumerate(parts, 1):
            self.store.archive(self.session_id, self.turn, "assistant", piece,
                               tool_args={"incomplete_answer_piece": number})
        self.emit(Event(EventType.ASSISTANT_MESSAGE, {"content": "".join(parts), "tool_calls": [],
                                                      "incomplete": True}))
        raise ModelError("answer_incomplete", (
            f"the answer was still cut off by the output limit after {MAX_CONTINUATIONS} "
            f"continuations ({len(parts)} pieces, kept separately in the archive of turn "
            f"{self.turn}); it is not reported as a final answer"))
