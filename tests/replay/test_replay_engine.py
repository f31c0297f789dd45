"""Replay (feature E2) in memory: recorded decisions, archived results, a new context."""
import json

import pytest

from agents.config import ContextConfig
from agents.loop.spec import SessionSpec
from agents.protocol import is_summary_request
from agents.replay.recording import RecordingError, build_recording
from tests.replay.helpers import record, replay


@pytest.mark.parametrize("name,window,clearing", [("sales-report", 16000, False),
                                                   ("retrieval-6x1600", 4000, False),
                                                   ("retrieval-6x1600", 4000, True)])
def test_a_replay_with_its_own_settings_sends_the_same_requests_byte_for_byte(name, window,
                                                                             clearing):
    # With the clearing tier on these windows need no summary; off, the summary tier runs,
    # so both kinds of compaction are replayed byte for byte.
    config = ContextConfig(clear_tool_results=clearing)
    source = record(name, window, config)
    run, _, _ = replay(source, name, window, config)
    sent = [json.dumps(b, sort_keys=True) for b in run.replay_transport.requests]
    recorded = [json.dumps(b, sort_keys=True) for b in source.transport.requests]
    assert run.status == "finished" and sent == recorded
    if clearing:
        assert any("[cleared: " in line for line in sent)  # results were cleared, too
    else:
        assert any(is_summary_request(b["messages"])
                   for b in run.replay_transport.requests)  # summaries were asked again, too
    assert run.report["impossible_decisions"] == []


def test_long_200_in_a_quarter_of_the_window_keeps_every_tier1_anchor():
    source = record("long-200", 128_000)
    run, _, _ = replay(source, "long-200", 32_000)
    assert run.status == "finished" and run.turns == source.run.turns
    assert run.report["compactions"] > source.run.report["compactions"]
    assert run.report["anchor_survival"] == 1.0
    assert run.report["over_window_requests"] == 0


def test_tool_results_come_from_the_archive_not_from_running_the_tool(monkeypatch):
    source = record("sales-report", 16000)
    import agents.tools.data as data

    def unreadable(*args, **kwargs):
        raise AssertionError("a replay must not read the CSV again")

    monkeypatch.setattr(data, "load_csv", unreadable)
    run, _, _ = replay(source, "sales-report", 16000)
    assert run.replay_transport.requests == source.transport.requests


def test_a_decision_the_new_context_cannot_support_is_reported_at_its_turn():
    scenario = {"name": "refs", "goal": "read back", "window": 4000, "steps": [
        {"tool": "fetch_document", "args": {"tokens": 1600, "topic": "a"}},
        {"tool": "fetch_document", "args": {"tokens": 1600, "topic": "b"}},
        {"tool": "fetch_document", "args": {"tokens": 1600, "topic": "c"}},
        {"final": "done"}]}
    from agents.scenarios import parse_scenario
    from tests.engine.helpers import run_scenario
    source = run_scenario(parse_scenario(scenario), window=128_000, session_id="s1")
    # The recorded model read turn 0's result back at turn 3, while it still had it in view.
    first_ref = source.payloads("TOOL_RESULT")[0]["ref"]
    calls = [e for e in source.sink.events if e.type == "MODEL_CALL"]
    calls[-1].reply = {"content": "", "finish_reason": "tool_calls", "tool_calls": [
        {"id": "call_9_0", "name": "read_ref", "arguments": json.dumps({"ref": first_ref})}]}
    recording = build_recording("s1", source.sink.events,
                                lambda ref: source.store.read_ref("s1", ref))
    recording.replies[4] = [{"content": "done", "tool_calls": [], "finish_reason": "stop"}]
    import tempfile
    from pathlib import Path

    from agents.config import ModelProfile
    from agents.events import ListSink
    from agents.replay.runner import replay_session
    from agents.store.memory import MemoryStore
    sink = ListSink()
    with tempfile.TemporaryDirectory() as tmp:
        run = replay_session(SessionSpec.plan(goal="read back", scenario=parse_scenario(scenario),
                                              profile=ModelProfile(name="sim", context_size=4000),
                                              config=ContextConfig(max_rounds=1)),
                             recording=recording, session_id="s1", store=MemoryStore(),
                             events=sink, workspace=Path(tmp))
    assert run.status == "finished"
    impossible = run.report["impossible_decisions"]
    assert [i["turn"] for i in impossible] == [3]
    assert first_ref in impossible[0]["reason"]
    errors = [e.payload for e in sink.of_type("ERROR")]
    assert any(e["code"] == "replay_decision_impossible" and "turn 3" in e["message"]
               for e in errors)


def test_a_recording_without_answers_is_refused_with_a_reason():
    source = record("retrieval-6x1600", 4000)
    for event in source.sink.of_type("MODEL_CALL"):
        event.reply = None  # as calls were recorded before their answers were kept
    with pytest.raises(RecordingError, match="before TaskOS stored the model's answers"):
        build_recording("s1", source.sink.events, lambda ref: None)


def test_a_replay_past_the_end_of_its_recording_fails_clearly():
    source = record("retrieval-6x1600", 4000)
    recording = build_recording("s1", source.sink.events,
                                lambda ref: source.store.read_ref("s1", ref))
    last = max(recording.replies)
    recording.replies[last] = [{"content": "", "finish_reason": "tool_calls", "tool_calls": [
        {"id": "call_99_0", "name": "fetch_document",
         "arguments": json.dumps({"tokens": 10, "topic": "x"})}]}]
    import tempfile
    from pathlib import Path

    from agents.config import ModelProfile
    from agents.events import ListSink
    from agents.replay.runner import replay_session
    from agents.scenarios import load_scenario
    from agents.store.memory import MemoryStore
    scenario = load_scenario("retrieval-6x1600")
    with tempfile.TemporaryDirectory() as tmp:
        run = replay_session(SessionSpec.plan(goal=scenario.goal, scenario=scenario,
                                              profile=ModelProfile(name="sim",
                                                                     context_size=4000),
                                              config=ContextConfig()),
                             recording=recording, session_id="s1", store=MemoryStore(),
                             events=ListSink(), workspace=Path(tmp))
    assert run.status == "failed" and "the recording ends after turn" in run.result.error
