"""Record a scenario in memory, then replay it from its events and archive."""
from __future__ import annotations

import tempfile
from pathlib import Path

from agents.config import ContextConfig, ModelProfile
from agents.events import ListSink
from agents.loop.spec import SessionSpec
from agents.replay.recording import build_recording
from agents.replay.runner import replay_session
from agents.scenarios import load_scenario
from agents.store.memory import MemoryStore
from tests.engine.helpers import Outcome, run_scenario


def record(name: str, window: int, config: ContextConfig | None = None,
           session_id: str = "s1") -> Outcome:
    return run_scenario(name, window=window, config=config, session_id=session_id)


def replay(source: Outcome, name: str, window: int, config: ContextConfig | None = None,
           session_id: str = "s1"):
    """Replay `source` into a fresh store; returns (run, sink, store)."""
    recording = build_recording(
        "s1", source.sink.events, lambda ref: source.store.read_ref("s1", ref))
    store, sink = MemoryStore(), ListSink()
    scenario = load_scenario(name)
    with tempfile.TemporaryDirectory() as tmp:
        run = replay_session(SessionSpec.plan(goal=scenario.goal, scenario=scenario,
                                              profile=ModelProfile(name="sim",
                                                                     context_size=window),
                                              config=config or ContextConfig()),
                             recording=recording, session_id=session_id, store=store, events=sink,
                             workspace=Path(tmp))
    return run, sink, store
