"""Replaying a session that delegated (feature E2 × T6): recorded sub-agents' answers reused."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from agents.config import ContextConfig, ModelProfile
from agents.events import ListSink
from agents.loop.spec import SessionSpec
from agents.replay.recording import build_recording
from agents.replay.runner import replay_session
from agents.scenarios import load_scenario
from agents.store.memory import MemoryStore
from tests.engine.test_subagents import research, run


def recorded_tree(tmp_path, mutate=None):
    """research-subagents run headless: parent "p", children "p.1".."p.3"."""
    result, store, sinks = run(research(mutate), tmp=tmp_path)
    assert result.status == "finished"
    recording = build_recording("p", sinks["p"].events, lambda ref: store.read_ref("p", ref))
    return result, store, sinks, recording


def replay_parent(recording, tmp_path, window=16000, config=None):
    scenario = load_scenario(str(tmp_path / "scenario.json"))
    store, sink = MemoryStore(), ListSink()
    with tempfile.TemporaryDirectory() as tmp:
        replay = replay_session(SessionSpec.plan(goal=scenario.goal, scenario=scenario,
                                                 profile=ModelProfile(name="sim", context_size=window),
                                                 config=config or ContextConfig()),
                                recording=recording, session_id="p", store=store, events=sink,
                                workspace=Path(tmp))
    return replay, store, sink


def agent_messages(sink):
    return [json.dumps(e.payload["messages"], sort_keys=True) for e in sink.of_type("MODEL_CALL")
            if e.payload["kind"] == "agent"]


def test_a_delegating_session_replays_with_its_childrens_recorded_answers(tmp_path,
                                                                         monkeypatch):
    source, source_store, sinks, recording = recorded_tree(tmp_path)
    assert len(recording.delegations) == 3 and len(recording.answers) == 3
    import agents.subagents


    def no_child(*args, **kwargs):
        raise AssertionError("a replay must not start a sub-agent")

    monkeypatch.setattr(agents.subagents, "run_tree", no_child)
    monkeypatch.setattr(MemoryStore, "create_child", no_child)
    replay, store, sink = replay_parent(recording, tmp_path)
    assert replay.status == "finished" and replay.final_answer == source.final_answer
    # The parent's requests are the recorded parent's, message for message.
    assert agent_messages(sink) == agent_messages(sinks["p"])
    reused = replay.report["reused_children"]
    children = source_store.list_children("p")
    assert [r["child"] for r in reused] == [c.id for c in children]
    assert all(r["reused"] and r["status"] == "finished" and r["turn"] == 1 for r in reused)
    assert [r["recorded_input_tokens"] for r in reused] == [c.total_input_tokens
                                                           for c in children]
    # Nothing waited and nothing ran below the replay: one run, no child sessions.
    assert store.list_children("p") == []
    assert [e.type for e in sink.events].count("SESSION_STARTED") == 1
    answered = [e.payload for e in sink.of_type("TOOL_RESULT") if e.payload.get("child")]
    assert [a["reused"] for a in answered] == [True] * 3
    # Only the parent's own calls count: the children's work is the recording's.
    source_parent_input = sum(e.payload["input_tokens"] for e in sinks["p"].of_type("MODEL_CALL"))
    assert replay.report["total_input_tokens"] == source_parent_input
    assert replay.report["children"]["children_input_tokens"] == sum(
        c.total_input_tokens for c in children)


def test_a_smaller_window_compacts_the_parent_and_keeps_its_constraints(tmp_path):
    source, _, sinks, recording = recorded_tree(tmp_path)
    replay, _, sink = replay_parent(recording, tmp_path, window=2000)
    assert replay.status == "finished" and replay.final_answer == source.final_answer
    assert replay.report["compactions"] > source.report["compactions"]
    assert replay.report["summary_calls"] >= 1  # asked of the simulated summarizer again
    assert replay.report["anchor_survival"] == 1.0
    assert replay.report["over_window_requests"] == 0
    assert replay.report["peak_input_tokens"] <= 2000
    assert agent_messages(sink) != agent_messages(sinks["p"])
    assert [r["reused"] for r in replay.report["reused_children"]] == [True] * 3


def test_the_replay_reads_a_reused_answer_back_through_the_sources_archive(tmp_path):
    source, source_store, sinks, recording = recorded_tree(
        tmp_path, lambda data: data["tools"].append("read_ref"))
    child = source_store.list_children("p")[0]
    last = max(recording.replies)  # the final answer's turn: read the child's answer first
    final = recording.replies[last]
    recording.replies[last] = [{"content": "", "finish_reason": "tool_calls", "tool_calls": [
        {"id": "call_read_0", "name": "read_ref",
         "arguments": json.dumps({"ref": child.answer_ref})}]}]
    recording.replies[last + 1] = final
    replay, _, sink = replay_parent(recording, tmp_path)
    assert replay.status == "finished" and replay.report["impossible_decisions"] == []
    read = [e.payload for e in sink.of_type("TOOL_RESULT") if e.payload["name"] == "read_ref"]
    assert read and read[0]["error"] is None
    assert child.final_answer[:60] in read[0]["preview"]


def test_a_child_answer_the_recording_lacks_is_a_tool_error_in_the_replay(tmp_path):
    _, _, _, recording = recorded_tree(tmp_path)
    lost = sorted(recording.answers)[1]
    del recording.answers[lost]
    replay, _, sink = replay_parent(recording, tmp_path)
    errors = [e.payload["error"] for e in sink.of_type("TOOL_RESULT")
              if e.payload.get("child") == lost]
    assert errors == [f"the recording holds no answer of sub-agent session {lost}: the "
                      "recorded session stopped before it answered"]
    assert [r["reused"] for r in replay.report["reused_children"]].count(False) == 1
