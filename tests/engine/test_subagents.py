"""Sub-agents (feature T6) in memory: delegate, wait, resume with the children's answers."""
from __future__ import annotations

import copy
import json
import tempfile
from collections import defaultdict
from pathlib import Path

import pytest

from agents.config import ContextConfig, ModelProfile
from agents.events import ListSink
from agents.loop.spec import SessionSpec
from agents.scenarios import SCENARIO_DIR, ScenarioError, parse_scenario
from agents.store.memory import MemoryStore
from agents.subagents import run_tree
from agents.tools.delegate import DelegationLimits

RAW_ROW = "2025-01-31,2025,Q1,North,Solar Panel"  # a line of sales.csv the children read


def research(mutate=None) -> dict:
    data = json.loads((SCENARIO_DIR / "research-subagents.json").read_text())
    if mutate:
        mutate(data)
    return data


def run(data: dict | None = None, limits: DelegationLimits | None = None, on_event=None,
        tmp: Path | None = None):
    data = data or research()
    folder = tmp or Path(tempfile.mkdtemp())
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "scenario.json"
    path.write_text(json.dumps(data))
    store, sinks = MemoryStore(), defaultdict(ListSink)

    def events_for(session_id):
        sink = sinks[session_id]
        if on_event:
            original = sink.emit

            def emit(event, sink=sink):
                original(event)
                on_event(store, session_id, event)
            sink.emit = emit
        return sink

    result = run_tree(SessionSpec.plan(goal="", scenario=str(path),
                                       profile=ModelProfile(name="sim", context_size=16000),
                                       config=ContextConfig(), delegation=limits),
                      session_id="p", store=store, events_for=events_for,
                      workspace=path.parent / "ws")
    return result, store, sinks


def agent_requests(sink: ListSink) -> list[str]:
    return ["\n".join(str(m.get("content") or "") for m in e.payload["messages"])
            for e in sink.of_type("MODEL_CALL") if e.payload["kind"] == "agent"]


def test_three_children_answer_and_the_parent_sees_only_their_answers(tmp_path):
    result, store, sinks = run(tmp=tmp_path)
    assert result.status == "finished"
    children = store.list_children("p")
    assert [c.status for c in children] == ["finished"] * 3
    before, after = agent_requests(sinks["p"])
    for child in children:
        assert child.final_answer in after and child.final_answer not in before
        assert child.answer_ref.startswith(f"arc:{child.id}:")
        assert RAW_ROW in "\n".join(agent_requests(sinks[child.id]))  # the child read the data
    assert RAW_ROW not in after  # ... and none of it reached the parent
    report = result.report["children"]
    growth = report["growth_at_resume"][0]
    assert growth["answers_tokens"] == report["answers_tokens"] > 0
    # The parent grew by the answers and its own delegate call, nothing like the children.
    assert growth["input_after"] - growth["input_before"] < 2 * report["answers_tokens"]
    assert report["children_input_tokens"] > 20 * report["answers_tokens"]
    assert [e.type for e in sinks["p"].events].count("SESSION_WAITING") == 1


def test_children_inherit_tier1_constraints_unless_told_not_to(tmp_path):
    _, store, _ = run(tmp=tmp_path)
    for child in store.list_children("p"):
        texts = [a.text for a in store.load_anchors(child.id) if a.tier == 1]
        assert any("The report must include a table" in t for t in texts)

    def no_inherit(data):
        for call in data["steps"][0]["tools"]:
            call["args"]["inherit_constraints"] = False
    _, store, _ = run(research(no_inherit), tmp=tmp_path / "b")
    for child in store.list_children("p"):
        assert not [a for a in store.load_anchors(child.id) if a.tier == 1]


def test_a_failed_child_reaches_the_parent_as_a_tool_error(tmp_path):
    def empty_answers(data):
        data["subtasks"]["quality"]["steps"] = [{"final": ""}]
    result, store, sinks = run(research(empty_answers), tmp=tmp_path)
    failed = [c for c in store.list_children("p") if c.status == "failed"]
    assert len(failed) == 1 and "empty answer" in failed[0].error
    errors = [e.payload for e in sinks["p"].of_type("TOOL_RESULT")
              if e.payload.get("child") == failed[0].id]
    assert errors and errors[0]["error"].startswith(f"sub-agent session {failed[0].id} failed")
    assert f"Error: sub-agent session {failed[0].id} failed" in agent_requests(sinks["p"])[1]
    assert result.status == "finished"  # the parent decides what to do with the failure


def test_cancelling_the_waiting_parent_cancels_its_children(tmp_path):
    def cancel_on_wait(store, session_id, event):
        if session_id == "p" and event.type == "SESSION_WAITING":
            store.cancelled.add("p")
    result, store, _ = run(on_event=cancel_on_wait, tmp=tmp_path)
    assert result.status == "cancelled"
    assert [c.status for c in store.list_children("p")] == ["cancelled"] * 3


def test_the_children_limit_refuses_further_delegate_calls(tmp_path):
    result, store, sinks = run(limits=DelegationLimits(max_children=2), tmp=tmp_path)
    assert len(store.list_children("p")) == 2
    refused = [e.payload for e in sinks["p"].of_type("TOOL_RESULT")
               if e.payload["name"] == "delegate" and e.payload["error"]]
    assert len(refused) == 1 and "already started 2 sub-agents" in refused[0]["error"]
    assert result.status == "finished"


def test_the_depth_limit_stops_a_child_from_delegating(tmp_path):
    def nested(data):
        data["subtasks"]["regions"]["tools"] = ["delegate", "read_file", "csv_group_aggregate"]
        data["subtasks"]["regions"]["steps"].insert(0, {"tool": "delegate", "args": {
            "goal": "Go deeper.", "scenario": "quality"}})
    result, store, sinks = run(research(nested), limits=DelegationLimits(max_depth=1),
                               tmp=tmp_path)
    assert result.status == "finished"
    assert store.list_children("p.1") == []
    refused = [e.payload["error"] for e in sinks["p.1"].of_type("TOOL_RESULT")
               if e.payload["name"] == "delegate"]
    assert refused and "nested at most 1 deep" in refused[0]
    # With depth 2 the grandchild runs, and its answer reaches the child.
    result, store, sinks = run(research(nested), tmp=tmp_path / "deep")
    assert [c.status for c in store.list_children("p.1")] == ["finished"]
    assert store.delegation_depth("p.1.1") == 2


def test_delegate_steps_are_checked_when_the_scenario_loads():
    data = research()
    bad = copy.deepcopy(data)
    bad["steps"][0]["tools"][0]["args"] = {"scenario": "regions"}
    with pytest.raises(ScenarioError, match=r"steps\[0\]\.tools\[0\]\.args\.goal"):
        parse_scenario(bad)
    bad = copy.deepcopy(data)
    bad["steps"][0]["tools"][0]["args"]["scenario"] = "weather"
    with pytest.raises(ScenarioError, match="expected one of the subtasks"):
        parse_scenario(bad)
    bad = copy.deepcopy(data)
    bad["subtasks"]["regions"]["subtasks"] = {}
    with pytest.raises(ScenarioError, match="cannot have subtasks"):
        parse_scenario(bad)
