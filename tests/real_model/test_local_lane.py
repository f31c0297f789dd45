"""Whole sessions on a real local model (issue 11 "Done when"), opt-in: see conftest.

Each session's figures are appended to TASKOS_REAL_MODEL_REPORT (JSON lines), so a run
leaves the evidence behind: statuses, tool calls, compactions with their summaries and
audits, the counting error per call and the requests the server refused as too long.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from agents.config import ContextConfig, ModelProfile
from agents.events import EventType, ListSink
from agents.loop.spec import SessionSpec
from agents.runner import run_session
from agents.store.memory import MemoryStore

from .conftest import N_CTX

# Minutes per session on a busy 2-core CPU: the default 300 s test timeout is too short.
pytestmark = [pytest.mark.real_model, pytest.mark.timeout(1800)]
CLEAR_FAILURES = {"unusable_answer", "tool_retry_loop", "tool_repeat_loop", "turn_limit",
                  "bad_response"}
CONSTRAINTS = ("Never write or delete any file.", "The final report must stay under 120 words.")


def run_real(base_url: str, name: str, goal: str, tools: list[str], max_turns: int,
             **config):
    # local: its tool schemas are bounded (agents.provider.argument_bounds), so a model
    # looping in its arguments stops at the output reserve instead of holding the server's
    # one slot to the end of the window (such runaways took most of a run's half hour).
    profile = ModelProfile(name="local", model="smollm2-135m-instruct", base_url=base_url,
                           api_key_env="", context_size=N_CTX, server_tokenizer=True, local=True,
                           tool_results_as_user=True, probe_questions=True,
                           tool_free_summaries=True, single_system_message=True,
                           temperature=0.2, read_timeout=300, call_timeout=600,
                           retry_budget=900)
    sink = ListSink()
    with tempfile.TemporaryDirectory() as tmp:
        run = run_session(SessionSpec.plan(goal=goal, scenario=None, profile=profile,
                                           config=ContextConfig(max_turns=max_turns, **config),
                                           tools=tools),
                          session_id=name, store=MemoryStore(), events=sink, workspace=Path(tmp))
    record = evidence(name, run, sink)
    with open(os.environ.get("TASKOS_REAL_MODEL_REPORT", "/tmp/taskos-real-model.jsonl"),
              "a") as out:
        out.write(json.dumps(record) + "\n")
    return run, sink, record


def evidence(name: str, run, sink: ListSink) -> dict:
    calls = [e.payload for e in sink.of_type(EventType.MODEL_CALL)]
    answered = [c for c in calls if not c.get("refused")]
    errors = [abs(c["estimated_tokens"] - c["input_tokens"]) / c["input_tokens"]
              for c in answered if c.get("estimated_tokens") and c["input_tokens"]]
    # The same error, counted per kind of request: the fit learns each kind's overhead
    # from its own calls, so "after 3 calls" is per kind.
    seen: dict[str, int] = {}
    settled = []
    for c in answered:
        if c.get("estimated_tokens") and c["input_tokens"]:
            kind = c.get("count_kind", "")
            seen[kind] = seen.get(kind, 0) + 1
            if seen[kind] > 3:
                settled.append(round(abs(c["estimated_tokens"] - c["input_tokens"])
                                     / c["input_tokens"], 4))
    [finished] = [e.payload for e in sink.of_type(EventType.SESSION_FINISHED)]
    return {
        "session": name, "status": finished["status"], "error": finished["error"],
        "final_answer": finished["final_answer"][:500], "turns": finished["turns"],
        "error_codes": [e.payload["code"] for e in sink.of_type(EventType.ERROR)],
        "rejected_answers": [(e.payload["content"][:300], e.payload["rejected"][:120])
                             for e in sink.of_type(EventType.ASSISTANT_MESSAGE)
                             if e.payload.get("rejected")],
        # answer turns: the weak profile's tool-free request for the final answer
        "answer_turns": sum(c["kind"] == "agent" and c.get("count_kind") == "no-tools"
                            for c in calls),
        "tool_calls": [(e.payload["name"], e.payload["args"])
                       for e in sink.of_type(EventType.TOOL_CALL)],
        "calls": len(calls), "summary_calls": sum(c["kind"] == "summary" for c in calls),
        # Requests the engine sent over the window; an answer that filled it (the model
        # looping in tool-call arguments the server does not bound) is counted apart.
        "refused_by_server": sum(bool(c.get("refused")) and c.get("overflow") != "output"
                                 for c in calls),
        "output_overflows": sum(c.get("overflow") == "output" for c in calls),
        # What the engine counted and allowed for each refused request, and what the server
        # said: a refusal with exact counting is an engine bug, and this is where to start.
        "refused_calls": [{k: c.get(k) for k in ("kind", "turn", "count_kind", "engine_tokens",
                                                 "estimated_tokens", "limit", "overflow",
                                                 "zones", "error")}
                          for c in calls if c.get("refused")],
        "peak_server_prompt": max((c["input_tokens"] for c in answered), default=0),
        "counting_error": [round(e, 4) for e in errors],
        "counting_error_by_call": [(c["kind"], c.get("count_kind"), c.get("engine_tokens"),
                                    c.get("estimated_tokens"), c["input_tokens"])
                                   for c in answered],
        "counting_error_settled": settled, "overheads": run.report.get("token_overheads"),
        "probe_recovery": run.report.get("probe_recovery"),
        "summaries": run.report.get("summaries"),
        "count_source": run.report.get("count_source"), "ratio": run.report.get("token_ratio"),
        "summary_answers": [c["reply"]["content"] for c in answered if c["kind"] == "summary"],
        "compactions": [{k: c.get(k) for k in ("trigger", "fallback", "fallback_reason",
                                               "summary_after", "audit", "summary_calls",
                                               "raised_output", "summary_forms", "probe")}
                        for c in (e.payload for e in sink.of_type(EventType.COMPACTION))
                        if not c.get("noop")],
    }


def test_a_tool_task_calls_tools_through_the_server_and_ends_clearly(local_server):
    run, sink, record = run_real(
        local_server, "tool-task",
        "Call the list_files tool to see the files in the workspace, then answer with the "
        "name of the CSV file you found.", ["list_files", "read_file"], max_turns=6)
    assert record["tool_calls"], record  # real tool calls went through the server
    if record["status"] == "finished":
        answer = record["final_answer"]
        assert answer.strip() and not answer.lstrip().startswith(("{", "[", "<tool_call>"))
    else:
        assert record["error_codes"][-1] in CLEAR_FAILURES, record


def test_a_long_task_compacts_keeps_its_constraints_and_never_goes_over(local_server):
    goal = (f"{CONSTRAINTS[0]} {CONSTRAINTS[1]} Read the file sales.csv with the read_file "
            "tool, part by part, and report the total revenue per region. Keep reading with "
            "read_file until you have seen the whole file.")
    # Rounds fold after 4 (max_rounds 1) so a 4096 window sees several compactions in the
    # turns a 135M model lasts. It repeats list_files; with a repeat limit of 6 its answer
    # turn came at turn 8, after one compaction, so the limit is 12 and the cap 16 turns.
    run, sink, record = run_real(local_server, "long-task", goal, ["read_file", "list_files"],
                                 max_turns=16, max_rounds=1, tool_retries_limit=12)
    assert record["refused_by_server"] == 0, record
    for compaction in record["compactions"]:
        assert compaction["audit"]["missing_anchors"] == [], compaction
    assert all(e <= 0.02 for e in record["counting_error_settled"]), record["counting_error"]
    # Every compaction that folded turns is probed (an anchor refresh folds none).
    folded = [c for c in record["compactions"] if c["trigger"] != "anchor"]
    assert len(folded) >= 2, record["compactions"]  # "compacts several times"
    assert all(c.get("probe") for c in folded), record["compactions"]
    if record["status"] != "finished":  # failed or unusable_answer, for a reason it names
        assert record["error_codes"][-1] in CLEAR_FAILURES, record
