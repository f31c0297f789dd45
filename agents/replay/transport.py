"""The replay provider: the simulated model's HTTP transport with recorded agent answers.

Everything a strict provider does stays as in SimTransport: counting, refusing requests
over the window, cached-prefix usage, and answering summary requests from exactly the
messages sent. Only the agent's answers differ: they come from the recording, matched by
turn. Before an answer is played, the refs it uses are translated to the replay's own
archive and checked against the request: a recorded decision that refers to something
the new context no longer holds is reported as impossible instead of played silently.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx2

from agents.protocol import CONTINUE_MARKER, is_summary_request
from agents.replay.recording import REF, Recording
from agents.scenarios import Scenario
from agents.sim.transport import SimTransport, error_response

NO_ANSWER = "replay_no_recorded_answer"


@dataclass
class Impossible:
    turn: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "reason": self.reason}


class ReplayTransport(SimTransport):
    def __init__(self, recording: Recording, scenario: Scenario, window: int,
                 summarizer: str | None = None) -> None:
        super().__init__(scenario, window, summarizer)
        self.recording = recording
        self.turn = 0  # set by the replay loop before each agent call
        self.played: dict[int, int] = {}  # answers of each turn played so far
        self.ref_map: dict[str, str] = {}  # recorded archive ref -> the replay's ref
        self.impossible: list[Impossible] = []

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if self.turn >= self.recording.turns and not _is_summary(request):
            return error_response(400, f"{NO_ANSWER}: the recording ends after turn "
                               f"{self.recording.turns - 1}; the replay asked for an answer "
                               f"at turn {self.turn}, which the recorded session never reached.")
        return super().handle_request(request)

    def _play(self, messages: list[dict[str, Any]], max_tokens: int) -> tuple[dict, str]:
        answers = self.recording.replies.get(self.turn, [])
        text = "".join(a.get("content") or "" for a in answers if not a.get("tool_calls"))
        last = messages[-1] if messages else {}
        if isinstance(last.get("content"), str) and last["content"].startswith(CONTINUE_MARKER):
            partial = "".join(m.get("content") or "" for m in messages
                              if m.get("role") == "assistant" and not m.get("tool_calls")
                              and m.get("content"))
            return self._limit(text[len(partial):] if text.startswith(partial) else text,
                               max_tokens)
        index = self.played.get(self.turn, 0)
        self.played[self.turn] = index + 1
        answer = answers[min(index, len(answers) - 1)] if answers else {"content": ""}
        if not answer.get("tool_calls"):
            # A final answer is played whole and cut by this request's own output limit,
            # as a provider would: its recorded continuations are one text here.
            return self._limit(text or answer.get("content") or "", max_tokens)
        context = json.dumps(messages, ensure_ascii=False)
        calls = []
        for call in answer["tool_calls"]:
            arguments = self._translate(call["name"], call["arguments"], context)
            calls.append({"id": call["id"], "type": "function",
                          "function": {"name": call["name"], "arguments": arguments}})
        return {"role": "assistant", "content": answer.get("content") or None,
                "tool_calls": calls}, "tool_calls"

    def _translate(self, name: str, arguments: str, context: str) -> str:
        """The recorded arguments with archive refs mapped; impossible ones are reported."""
        def swap(match) -> str:
            old = match.group(0)
            new = self.ref_map.get(old, old)
            if new not in context:
                self.impossible.append(Impossible(self.turn, (
                    f"the recorded call {name}({arguments[:200]}) refers to {old}, which the "
                    "replayed context does not hold (it was compacted away or never shown)")))
            return new
        return REF.sub(swap, arguments)


def _is_summary(request: httpx2.Request) -> bool:
    try:
        messages = json.loads(request.content or b"{}")["messages"]
        return is_summary_request(messages)
    except (ValueError, KeyError, IndexError, AttributeError, TypeError):
        return False


def replay_http_client(recording: Recording, scenario: Scenario, window: int,
                       summarizer: str | None = None) -> tuple[httpx2.Client, ReplayTransport]:
    transport = ReplayTransport(recording, scenario, window, summarizer)
    return httpx2.Client(transport=transport, base_url="http://sim.taskos.invalid/v1"), transport
