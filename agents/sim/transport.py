"""The simulated model as an HTTP transport the `openai` SDK talks to in-process.

It behaves like a strict provider: it counts the request with tiktoken, refuses one longer
than its window with the usual "maximum context length" error, honours `max_tokens`
(cutting with finish_reason "length"), reports usage and prefix-cached tokens, and plays
a scenario one step per agent turn. Summary requests are answered extractively from
exactly the messages given (agents.sim.summarizer).
"""
from __future__ import annotations

import json
import re
from typing import Any

import httpx2

from agents.scenarios import Scenario
from agents.sim.cache import PromptCache
from agents.sim.summarizer import build_summary
from agents.sim.summary_request import SUMMARY_MARKER, is_tail_request, to_labelled
from agents.tokens import TokenCounter

CONTINUE_MARKER = "[taskos:continue]"
SIM_MODEL = "taskos-sim"
_CALL_ID = re.compile(r"^call_(\d+)_\d+$")


class SimTransport(httpx2.BaseTransport):
    def __init__(self, scenario: Scenario, window: int, counter: TokenCounter | None = None):
        self.scenario = scenario
        self.window = window
        self.counter = counter or TokenCounter()
        self.requests: list[dict[str, Any]] = []  # every request body, for tests and audits
        self.cache = PromptCache(self.counter.message, self.counter.tools)

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if not request.url.path.endswith("/chat/completions"):
            return _error(404, f"the simulated model serves /chat/completions, not {request.url.path}")
        try:
            body = json.loads(request.content or b"{}")
            messages = body["messages"]
        except (ValueError, KeyError) as exc:
            return _error(400, f"invalid request body: {exc}")
        self.requests.append(body)
        prompt = self.counter.request(messages, body.get("tools"))
        if prompt > self.window:
            return _error(400, f"This model's maximum context length is {self.window} tokens. "
                               f"However, your messages resulted in {prompt} tokens. "
                               "Please reduce the length of the messages.",
                          code="context_length_exceeded")
        max_tokens = int(body.get("max_tokens") or self.window)
        first = messages[0].get("content") if messages else ""
        if isinstance(first, str) and first.startswith(SUMMARY_MARKER):
            message, finish = self._limit(json.dumps(build_summary(messages[1:]),
                                                     ensure_ascii=False), max_tokens)
        elif is_tail_request(messages):  # the agent's own prefix, the instruction last
            message, finish = self._limit(json.dumps(build_summary(to_labelled(messages)),
                                                     ensure_ascii=False), max_tokens)
        else:
            message, finish = self._play(messages, max_tokens)
        cached = self.cache.cached_tokens(messages, body.get("tools"))
        output = self.counter.text(message.get("content") or "") + sum(
            self.counter.text(c["function"]["arguments"]) for c in message.get("tool_calls", []))
        return httpx2.Response(200, json={
            "id": f"simcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
            "model": body.get("model", SIM_MODEL),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": output,
                      "total_tokens": prompt + output,
                      "prompt_tokens_details": {"cached_tokens": cached}}})

    def _play(self, messages: list[dict[str, Any]], max_tokens: int) -> tuple[dict, str]:
        last = messages[-1] if messages else {}
        if isinstance(last.get("content"), str) and last["content"].startswith(CONTINUE_MARKER):
            partial = "".join(m.get("content") or "" for m in messages
                              if m.get("role") == "assistant" and not m.get("tool_calls")
                              and m.get("content"))
            return self._continue(partial, max_tokens)
        step_index = next_step_index(messages)
        steps = self.scenario.model_steps
        if step_index >= len(steps):
            return self._limit(steps[-1].final or "Done.", max_tokens)
        step = steps[step_index]
        if step.final is not None:
            return self._limit(step.final, max_tokens)
        calls = [{"id": f"call_{step_index}_{k}", "type": "function",
                  "function": {"name": c["tool"], "arguments": json.dumps(c["args"], ensure_ascii=False)}}
                 for k, c in enumerate(step.tool_calls)]
        return {"role": "assistant", "content": step.say or None, "tool_calls": calls}, "tool_calls"

    def _continue(self, partial: str, max_tokens: int) -> tuple[dict, str]:
        final = next((s.final for s in self.scenario.model_steps if s.final is not None), "")
        for step in self.scenario.model_steps:
            if step.final and partial and step.final.startswith(partial):
                final = step.final
        rest = final[len(partial):] if final.startswith(partial) else final
        return self._limit(rest, max_tokens)

    def _limit(self, text: str, max_tokens: int) -> tuple[dict, str]:
        tokens = self.counter.encoding.encode(text, disallowed_special=())
        if len(tokens) <= max_tokens:
            return {"role": "assistant", "content": text}, "stop"
        cut = self.counter.encoding.decode(tokens[:max(0, max_tokens)])
        return {"role": "assistant", "content": cut}, "length"


def next_step_index(messages: list[dict[str, Any]]) -> int:
    """The scenario step to play: one past the newest step whose tool calls are in view."""
    seen = -1
    for message in messages:
        for call in message.get("tool_calls") or ():
            match = _CALL_ID.match(call.get("id", ""))
            if match:
                seen = max(seen, int(match.group(1)))
    return seen + 1


def _error(status: int, message: str, code: str | None = None) -> httpx2.Response:
    return httpx2.Response(status, json={"error": {"message": message, "type": "invalid_request_error",
                                                   "code": code}})


def sim_http_client(scenario: Scenario, window: int) -> tuple[httpx2.Client, SimTransport]:
    transport = SimTransport(scenario, window)
    return httpx2.Client(transport=transport, base_url="http://sim.taskos.invalid/v1"), transport
