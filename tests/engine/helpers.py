"""Run scenarios in memory through the real loop, SDK and simulated model."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.config import ContextConfig, ModelProfile
from agents.events import ListSink
from agents.loop.spec import SessionSpec
from agents.runner import SessionRun, run_session
from agents.scenarios import Scenario, load_scenario, parse_scenario
from agents.sim.transport import SimTransport, sim_http_client
from agents.store.memory import MemoryStore


def summary_instruction(body: dict[str, Any]) -> str | None:
    """The instruction text of a summary request body (it comes last, after the agent's
    own prefix, or first in a fresh chunked request), else None."""
    for message in (body["messages"][-1], body["messages"][0]):
        content = message.get("content")
        if isinstance(content, str) and content.startswith("[taskos:summary-request]"):
            return content
    return None


@dataclass
class Outcome:
    run: SessionRun
    sink: ListSink
    store: MemoryStore
    transport: SimTransport

    def payloads(self, kind: str) -> list[dict[str, Any]]:
        return [e.payload for e in self.sink.of_type(kind)]


def run_scenario(scenario: str | dict | Scenario, window: int | None = None,
                 config: ContextConfig | None = None, store: MemoryStore | None = None,
                 session_id: str = "t1", transport_window: int | None = None,
                 profile: ModelProfile | None = None) -> Outcome:
    if isinstance(scenario, str):
        scenario = load_scenario(scenario)
    elif isinstance(scenario, dict):
        scenario = parse_scenario(scenario)
    window = window or scenario.window or 128_000
    profile = profile or ModelProfile(name="sim", context_size=window)
    client, transport = sim_http_client(scenario, transport_window or window)
    store = store or MemoryStore()
    sink = ListSink()
    with tempfile.TemporaryDirectory() as tmp:
        run = run_session(SessionSpec.plan(goal=scenario.goal, scenario=scenario, profile=profile,
                                           config=config or ContextConfig()),
                          session_id=session_id, store=store, events=sink, workspace=Path(tmp),
                          http_client=client)
    return Outcome(run=run, sink=sink, store=store, transport=transport)
