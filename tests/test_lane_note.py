"""What scripts/local_lane.py writes in its note, from stored calls (no server: these run in
the ordinary suite)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "local_lane.py"
_spec = importlib.util.spec_from_file_location("local_lane", SCRIPT)
lane = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lane)

COMMAND = ["python", "-m", "llama_cpp.server", "--model", "m.gguf", "--model_alias",
           "smollm2-135m-instruct", "--n_ctx", "4096", "--chat_format",
           "chatml-function-calling", "--n_threads", "1"]


def test_own_template_serves_without_a_chat_format_and_others_replace_it():
    own = lane.server_args(COMMAND, alias="gemma-3-270m", chat_format="own")
    assert "--chat_format" not in own
    assert own[own.index("--model_alias") + 1] == "gemma-3-270m"
    assert own.count("--model_alias") == 1 and own[-2:] == ["--model_alias", "gemma-3-270m"]
    llama2 = lane.server_args(COMMAND, alias="a", chat_format="llama-2")
    assert llama2.count("--chat_format") == 1 and llama2[-1] == "llama-2"
    assert llama2[llama2.index("--n_ctx") + 1] == "4096"


def call(**fields):
    return {"call": 1, "turn": 0, "kind": "agent", "request": {"tools": "[...]"},
            "messages": [{"role": "user", "content": "goal"}], **fields}


def test_an_exact_claim_is_true_only_when_the_server_counted_the_same():
    rows = lane.call_rows([
        call(count_source="exact", estimated_tokens=900, input_tokens=900),
        call(count_source="exact", estimated_tokens=900, input_tokens=1099),
        call(count_source="calibrated", estimated_tokens=900, input_tokens=950),
        call(count_source="exact", estimated_tokens=5000, input_tokens=5000, refused=True),
    ])
    assert [r["truth"] for r in rows] == [
        "true", "FALSE (off by 199)", "true (not claimed exact)",
        "refused: server figure unknown"]
    assert rows[1]["off_by"] == 199 and rows[2]["off_by"] == 50


def test_the_answer_request_must_carry_the_constraint_added_mid_task():
    said = [{"role": "user", "content": "goal"},
            {"role": "user", "content": "Note: use data up to 2026-10-31 only"}]
    tool_turn = call(turn=1, messages=said)
    answer_without = call(call=2, turn=3, request={}, zones={"answer_request": 300})
    answer_with = call(call=3, turn=3, request={}, messages=said)
    rows = lane.call_rows([tool_turn, answer_without, answer_with])
    assert [r["answer_turn"] for r in rows] == [False, True, True]
    assert lane.constraint_verdict(rows, 1) == "MISSING from answer request(s) call 2"
    assert lane.constraint_verdict(lane.call_rows([tool_turn, answer_with]), 1) == (
        "carried by every answer request (1)")
    assert lane.constraint_verdict(rows, None).startswith("constraint never delivered")
    dropped = call(call=4, turn=2)
    assert lane.constraint_verdict(lane.call_rows([tool_turn, dropped, answer_with]), 1) == (
        "carried by every answer request (1); MISSING from agent call(s) 4")
    sent = call(call=5, turn=2, sent_text='{"messages":[{"content":"up to 2026-10-31"}]}')
    assert lane.call_rows([sent])[0]["has_constraint"]


def test_checkmodel_verdicts_are_one_line_per_capability_with_the_fix():
    check = {"exit": 3, "verdicts": {"server": "llama-cpp-python", "seconds": 12.5,
                                      "capabilities": [
        {"name": "reachable", "verdict": "pass", "found": "answered", "fix": ""},
        {"name": "tools", "verdict": "fail", "found": "same count with and without tools",
         "fix": "start llama-cpp-python with --chat_format chatml-function-calling"}]}}
    lines = lane.check_lines(check)
    assert lines[1] == "  - reachable: **pass** — answered"
    assert lines[2].startswith("  - tools: **fail** — same count") and lines[2].endswith(
        "fix: start llama-cpp-python with --chat_format chatml-function-calling")
    refused = lane.check_lines({"exit": 1, "verdicts": {"error": "server down"}})
    assert len(refused) == 1 and "server down" in refused[0]
