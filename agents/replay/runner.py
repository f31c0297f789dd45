"""Run a replay of a recorded session under other settings, and compare run reports (E2).

Agent answers come from the recording; summary calls go to a model: the simulated one
for a simulated profile (a replay costs nothing), the profile's real endpoint otherwise.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable

from agents.events import EventSink
from agents.loop.spec import SessionSpec, generic_scenario
from agents.protocol import is_summary_request
from agents.provider.client import ModelClient, ModelReply
from agents.replay.loop import ReplayLoop
from agents.replay.recording import Recording
from agents.replay.transport import replay_http_client
from agents.runner import SessionRun, run_session
from agents.store.interface import Store

SIM_URL = "http://sim.taskos.invalid/v1"
# Report keys compared between runs; numbers get a delta, the rest old/new only.
COMPARED = ("status", "turns", "total_input_tokens", "peak_input_tokens", "compactions",
            "summary_calls", "over_window_requests", "anchor_survival", "cached_tokens",
            "cache_read_tokens", "cache_write_tokens", "cost", "audit_failures",
            "impossible_decisions")


class DispatchModel:
    """Agent calls to the recording, summary calls to the profile's real endpoint."""

    def __init__(self, agent: ModelClient, summary: ModelClient) -> None:
        self.agent, self.summary = agent, summary

    def complete(self, messages: list[dict[str, Any]], tools: Any, max_tokens: int,
                 model: str | None = None, **options: Any) -> ModelReply:
        chosen = self.summary if is_summary_request(messages) else self.agent
        return chosen.complete(messages, tools, max_tokens, model=model, **options)

    def request_params(self, messages: list[dict[str, Any]], tools: Any, max_tokens: int,
                       model: str | None = None, tool_choice: str | None = None) -> dict:
        chosen = self.summary if is_summary_request(messages) else self.agent
        return chosen.request_params(messages, tools, max_tokens, model, tool_choice)


def replay_session(spec: SessionSpec, *, recording: Recording, session_id: str, store: Store,
                   events: EventSink, workspace: Path,
                   progress: Callable[[int, int], None] | None = None, **_: Any) -> SessionRun:
    """Replay `recording` as session `session_id` under `spec` and return the run with its
    report."""
    sim_plan = spec.scenario or generic_scenario(spec.goal)
    profile = spec.profile
    http_client, transport = replay_http_client(recording, sim_plan, profile.context_size,
                                                spec.summarizer)
    agent = ModelClient(profile, http_client=http_client, base_url=SIM_URL)
    model = agent if profile.simulated else DispatchModel(agent, ModelClient(profile))
    built: list[ReplayLoop] = []

    def make_loop(**kwargs: Any) -> ReplayLoop:
        built.append(ReplayLoop(recording=recording, transport=transport, **kwargs))
        return built[0]

    run = run_session(spec, session_id=session_id, store=store, events=events,
                      workspace=workspace, progress=progress, model=model, make_loop=make_loop)
    run.report["impossible_decisions"] = built[0].impossible if built else []
    run.report["reused_children"] = built[0].reused_children if built else []
    run.report["replay_of"] = recording.session_id
    run.replay_transport = transport  # its .requests: every body the replay sent
    return run


def replay_runner(recording: Recording) -> Callable[..., SessionRun]:
    """replay_session with the recording bound: a drop-in for agents.runner.run_session."""
    return functools.partial(replay_session, recording=recording)


def differences(source: dict[str, Any], replay: dict[str, Any]) -> dict[str, Any]:
    """Key by key: the source's value, the replay's, and the change when both are numbers."""
    out: dict[str, Any] = {}
    for key in COMPARED:
        old, new = source.get(key), replay.get(key)
        if isinstance(old, list) or isinstance(new, list):
            old, new = len(old or []), len(new or [])
        entry: dict[str, Any] = {"source": old, "replay": new}
        if isinstance(old, (int, float)) and isinstance(new, (int, float)) \
                and not isinstance(old, bool):
            entry["delta"] = round(new - old, 6)
            if old:
                entry["change"] = round((new - old) / old, 4)
        out[key] = entry
    return out
