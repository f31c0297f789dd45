"""The simulated model as an HTTP transport the `openai` SDK talks to in-process.

It behaves like a strict provider and imports nothing from the engine: it counts the
received JSON with its own code (agents.sim.counting), refuses a request whose prompt plus
`max_tokens` exceeds its window with the text OpenAI-compatible servers use, honours
`max_tokens` for every output, tool calls included (cutting with finish_reason "length"),
reports usage and prefix-cached tokens (and, for a request that marks cache breakpoints,
what Anthropic's caching would read and write), and plays a scenario one step per agent
turn.
Summary requests are answered from exactly the messages given, in the scenario's or the
caller's summarizer mode (agents.sim.summarizer: faithful, lossy, hostile), and so is the
request that condenses the person's older messages (agents.sim.words_answer); probe
questions from the conversation before them (agents.sim.probe_answers). `latency_s` makes
every answer take that long, as a real model's does, so a person (or a browser test) can
watch a run move instead of seeing it end within a second.
"""
from __future__ import annotations

import json
import re
import time
from typing import Any

import httpx2

from agents.protocol import CONTINUE_MARKER, SUMMARY_MARKER, WORDS_MARKER, is_tail_request
from agents.scenarios import Scenario
from agents.sim import counting, probe_answers, words_answer
from agents.sim.cache import MAX_BREAKPOINTS, BreakpointCache, PromptCache, read_marks
from agents.sim.summarizer import SummaryPlayer
from agents.sim.summary_request import to_labelled

SIM_MODEL = "taskos-sim"
_CALL_ID = re.compile(r"^call_(\d+)_\d+$")


class SimTransport(httpx2.BaseTransport):
    def __init__(self, scenario: Scenario, window: int, summarizer: str | None = None,
                 latency_s: float = 0.0):
        self.scenario = scenario
        self.latency_s = max(0.0, latency_s)
        self.window = window
        self.summaries = SummaryPlayer(summarizer or scenario.summarizer or "faithful")
        self.requests: list[dict[str, Any]] = []  # every accepted request body
        self.prompt_tokens: list[int] = []  # this provider's count of each accepted request
        self.refused: list[tuple[int, int]] = []  # (prompt, max_tokens) of refused requests
        self.cache = PromptCache(counting.message_tokens, counting.tools_tokens)
        # What the same requests would have had cached under Anthropic's stricter rule (a
        # tool_choice change voids the cached messages): (prompt, cached, output) per
        # accepted request, for the benchmark's third price column.
        self.strict_cache = PromptCache(counting.message_tokens, counting.tools_tokens,
                                        strict=True)
        # (prompt, cached, output, (read, written) or None) per accepted request; the last
        # item when the request carried cache_control marks (agents/sim/cache.py).
        self.strict_usage: list[tuple[int, int, int, tuple[int, int] | None]] = []
        # Anthropic's opt-in caching of the marked prefixes, under either rule.
        self.marked_cache = BreakpointCache(counting.message_tokens, counting.tools_tokens)
        self.marked_strict = BreakpointCache(counting.message_tokens, counting.tools_tokens,
                                             strict=True)

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if not request.url.path.endswith("/chat/completions"):
            return error_response(
                404, f"the simulated model serves /chat/completions, not {request.url.path}")
        try:
            body = json.loads(request.content or b"{}")
            messages, tools, marked, tools_marked = read_marks(body["messages"],
                                                               body.get("tools"))
        except (ValueError, KeyError, AttributeError) as exc:
            return error_response(400, f"invalid request body: {exc}")
        marks = len(marked) + tools_marked
        if marks > MAX_BREAKPOINTS:  # Anthropic's refusal, in the OpenAI-compatible shape
            return error_response(400, f"A maximum of {MAX_BREAKPOINTS} blocks with "
                                       f"cache_control may be provided. Found {marks}.")
        body = {**body, "messages": messages, **({"tools": tools} if tools else {})}
        prompt = counting.prompt_tokens(body)
        asked = body.get("max_tokens") or body.get("max_completion_tokens")
        max_tokens = int(asked) if asked else max(0, self.window - prompt)
        if prompt + max_tokens > self.window:
            self.refused.append((prompt, max_tokens))
            return error_response(
                400, f"This model's maximum context length is {self.window} tokens. However, "
                     f"you requested {prompt + max_tokens} tokens ({prompt} in the messages, "
                     f"{max_tokens} in the completion). Please reduce the length of the "
                     "messages or completion.", code="context_length_exceeded")
        self.requests.append(body)
        self.prompt_tokens.append(prompt)
        if self.latency_s:  # refusals above come back at once, as providers send them
            time.sleep(self.latency_s)
        first = messages[0].get("content") if messages else ""
        if isinstance(first, str) and first.startswith(f"{SUMMARY_MARKER}\n{WORDS_MARKER}"):
            message, finish = self._limit(words_answer.answer(messages, self.summaries.mode),
                                          max_tokens)
        elif isinstance(first, str) and first.startswith(SUMMARY_MARKER):
            # The opening message is the instructions: read for the budgets they state.
            message, finish = self._limit(json.dumps(self.summaries.answer(
                messages[1:], instructions=messages[0]), ensure_ascii=False), max_tokens)
        elif probe_answers.is_probe_request(messages):
            message, finish = self._limit(probe_answers.answer(messages), max_tokens)
        elif is_tail_request(messages):  # the agent's own prefix, the instruction last
            # The instruction goes last, as the model reads it: the budgets it states bind.
            labelled = to_labelled(messages) + messages[-1:]
            message, finish = self._limit(json.dumps(self.summaries.answer(labelled),
                                                     ensure_ascii=False), max_tokens)
        else:
            message, finish = self._play(messages, max_tokens)
        cached = self.cache.cached_tokens(messages, body.get("tools"))
        output = _output_tokens(message)
        usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": output,
                                 "total_tokens": prompt + output,
                                 "prompt_tokens_details": {"cached_tokens": cached}}
        strict_marked = None
        if marks:
            # Reported as Anthropic-compatible gateways pass them on; prompt_tokens_details
            # keeps the automatic (OpenAI-like) figure, so one run is priced under both.
            read, written = self.marked_cache.usage(messages, marked, body.get("tools"),
                                                    tools_marked)
            usage.update(cache_read_input_tokens=read, cache_creation_input_tokens=written)
            strict_marked = self.marked_strict.usage(messages, marked, body.get("tools"),
                                                     tools_marked, body.get("tool_choice"))
        self.strict_usage.append((prompt, self.strict_cache.cached_tokens(
            messages, body.get("tools"), body.get("tool_choice")), output, strict_marked))
        return _json_response(200, {
            "id": f"simcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
            "model": body.get("model", SIM_MODEL),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage})

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
        message = {"role": "assistant", "content": step.say or None, "tool_calls": calls}
        if _output_tokens(message) <= max_tokens:
            return message, "tool_calls"
        return _cut_tool_calls(message, max_tokens), "length"

    def _continue(self, partial: str, max_tokens: int) -> tuple[dict, str]:
        final = next((s.final for s in self.scenario.model_steps if s.final is not None), "")
        for step in self.scenario.model_steps:
            if step.final and partial and step.final.startswith(partial):
                final = step.final
        rest = final[len(partial):] if final.startswith(partial) else final
        return self._limit(rest, max_tokens)

    def _limit(self, text: str, max_tokens: int) -> tuple[dict, str]:
        tokens = counting.encode(text)
        if len(tokens) <= max_tokens:
            return {"role": "assistant", "content": text}, "stop"
        cut = counting.decode(tokens[:max(0, max_tokens)])
        return {"role": "assistant", "content": cut}, "length"


def _output_tokens(message: dict[str, Any]) -> int:
    """Completion tokens of an answer: its text and every tool call's name and arguments."""
    return counting.text_tokens(message.get("content")) + sum(
        counting.text_tokens(c["function"]["name"]) + counting.text_tokens(c["function"]["arguments"])
        for c in message.get("tool_calls") or ())


def _cut_tool_calls(message: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """What a provider returns when tool calls run into max_tokens: the calls that fit, the
    next one with its arguments cut where the limit fell, none after it."""
    left = max_tokens - counting.text_tokens(message.get("content"))
    if left < 0:
        tokens = counting.encode(message.get("content") or "")
        return {"role": "assistant", "content": counting.decode(tokens[:max_tokens])}
    kept = []
    for call in message["tool_calls"]:
        name = call["function"]["name"]
        args = counting.encode(call["function"]["arguments"])
        cost = counting.text_tokens(name) + len(args)
        if cost <= left:
            kept.append(call)
            left -= cost
            continue
        room = left - counting.text_tokens(name)
        if room > 0:
            kept.append({**call, "function": {"name": name,
                                              "arguments": counting.decode(args[:room])}})
        break
    return {"role": "assistant", "content": message.get("content"), "tool_calls": kept} if kept \
        else {"role": "assistant", "content": message.get("content") or ""}


def next_step_index(messages: list[dict[str, Any]]) -> int:
    """The scenario step to play: one past the newest step whose tool calls are in view."""
    seen = -1
    for message in messages:
        for call in message.get("tool_calls") or ():
            match = _CALL_ID.match(call.get("id", ""))
            if match:
                seen = max(seen, int(match.group(1)))
    return seen + 1


def _json_response(status: int, body: dict[str, Any]) -> httpx2.Response:
    """A JSON answer. A lone surrogate (a scenario may script one) goes out as its JSON
    escape, the only way a real server can send it: no UTF-8 body carries it raw."""
    try:
        return httpx2.Response(status, json=body)
    except UnicodeEncodeError:
        return httpx2.Response(status, content=json.dumps(body).encode("ascii"),
                               headers={"content-type": "application/json"})


def error_response(status: int, message: str, code: str | None = None) -> httpx2.Response:
    """An error as OpenAI-compatible servers send it (the replay's transport says its own)."""
    return httpx2.Response(status, json={"error": {
        "message": message, "type": "invalid_request_error", "code": code}})


def sim_http_client(scenario: Scenario, window: int, summarizer: str | None = None,
                    latency_s: float = 0.0) -> tuple[httpx2.Client, SimTransport]:
    transport = SimTransport(scenario, window, summarizer, latency_s)
    return httpx2.Client(transport=transport, base_url="http://sim.taskos.invalid/v1"), transport
