"""Weak local profiles (issue 11): fresh, tool-free summary and probe requests, and one
system message, against a fake llama-cpp-python server with a tiny model (chatml_server).

On the real lane SmolLM2-135M answered every summary request that repeated the agent's
prefix with `functions.list_files:\\n{ }`, and the server wrote the tool list into every
system message. The fake does both; these sessions show what the profile settings change.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from agents.compaction.fresh_requests import SUMMARIZER_PROMPT, SUMMARY_TAIL
from agents.compaction.summary import SummaryError, parse_model_summary
from agents.config import ContextConfig, ModelProfile
from agents.counting.tokens import TokenCounter
from agents.events import EventType, ListSink
from agents.loop.spec import SessionSpec
from agents.provider.client import wire_messages
from agents.runner import run_session
from agents.store.memory import MemoryStore

from .chatml_server import TOOLS_INTRO, ChatmlServer

REGIONS = ("North", "South", "East", "West", "Central", "Coast", "Hills", "Valley")
GOAL = ("Never write or delete any file. The final report must stay under 120 words. Read "
        "the part files with read_file and report the revenue of each region.")


def part(i: int) -> str:
    rows = [f"{REGIONS[i]} revenue {1000 + 37 * i}.{i}0 in month {m}" for m in range(1, 4)]
    notes = [f"note {k}: the {REGIONS[i].lower()} office filed its sheet on time" for k in range(30)]
    return "\n".join(rows + notes)


def session(*, fresh: bool, single: bool, parts: int = 7, script: list | None = None,
            max_turns: int = 12, answer: str | None = None,
            tools: tuple[str, ...] = ("list_files", "read_file"), events: list | None = None):
    script = script or [("tool", "list_files", {})] + [
        ("tool", "read_file", {"path": f"part{i}.txt"}) for i in range(parts)] + ["answer"]
    profile_kw = dict(name="local", model="smollm2-fake", api_key_env="", context_size=4096,
                      server_tokenizer=True, tool_results_as_user=True, probe_questions=True,
                      tool_free_summaries=fresh, single_system_message=single)
    sink = ListSink()
    with ChatmlServer(script, answer=answer) as server, tempfile.TemporaryDirectory() as tmp:
        for i in range(parts):
            Path(tmp, f"part{i}.txt").write_text(part(i))
        profile = ModelProfile(base_url=server.base_url, **profile_kw)
        run = run_session(SessionSpec.plan(goal=GOAL, scenario=None, profile=profile,
                                           config=ContextConfig(max_rounds=1, max_turns=max_turns,
                                                                clear_tool_results=False),
                                           tools=list(tools)),
                          session_id="weak", store=MemoryStore(), events=sink, workspace=Path(tmp))
    if events is not None:
        events.extend(sink.events)
    calls = [e.payload for e in sink.of_type(EventType.MODEL_CALL)]
    compactions = [e.payload for e in sink.of_type(EventType.COMPACTION)  # those that fold
                   if not e.payload.get("noop") and e.payload["trigger"] != "anchor"]
    return run, server, calls, compactions


def agent_prompts(server: ChatmlServer) -> list[dict]:
    return [r for r in server.requests if r["body"].get("tool_choice") == "auto"]


def test_a_weak_profile_sends_summaries_and_probes_fresh_and_without_tools_and_uses_them():
    run, server, calls, compactions = session(fresh=True, single=True)
    assert run.status == "finished" and not server.refused
    assert compactions and not any(c["fallback"] for c in compactions), compactions
    for call in (c for c in calls if c["kind"] in ("summary", "probe")):
        body = server.requests[call["call"] - 1]["body"]
        # no tools, no tool_choice, no assistant turns to continue: a system prompt and the
        # material as one user message
        assert "tools" not in body and "tool_choice" not in body
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
    # the tiny model's bullet lines (no headings, no JSON) are read as a summary ...
    assert {"prose"} <= {f for c in compactions for f in c["summary_forms"]}
    last = compactions[-1]["summary_after"]
    assert "North revenue 1000.00" in last  # a figure from a tool result, not the goal
    # ... its figures are checked against the archive, and the probes find the figures
    assert all(not c["audit"]["unsupported_numbers"] for c in compactions)
    probes = [c["probe"] for c in compactions]
    assert all(p["asked"] for p in probes) and sum(p["recovered"] for p in probes) > 0


def test_the_same_tiny_model_continues_a_summary_request_that_repeats_the_agents_prefix():
    # The cache-stable layout (kept for paid profiles): the prefix's tool-call turns are
    # continued, the answer is a call written as text, and the compaction falls back.
    run, server, calls, compactions = session(fresh=False, single=True)
    summaries = [server.requests[c["call"] - 1] for c in calls if c["kind"] == "summary"]
    # The agent's own tool_choice first; the answer called the tool, so asked again with
    # "none", the model writes the call as text.
    choices = [s["body"]["tool_choice"] for s in summaries]
    assert summaries and choices == ["auto", "none"] * (len(choices) // 2)
    assert compactions and all(c["fallback"] for c in compactions)
    assert "call of read_file written as text" in compactions[0]["fallback_reason"]


def test_one_system_message_pays_the_tools_once_even_with_the_truncation_marker():
    # fresh=False: every compaction falls back, so the truncation marker (a system message)
    # is in every later request, next to the system prompt, the snapshot and the words.
    run, server, calls, compactions = session(fresh=False, single=True)
    assert compactions and all(c["fallback"] for c in compactions)
    prompts = agent_prompts(server)
    marked = [r for r in prompts
              if "Some earlier messages were truncated" in r["prompt"]]
    assert marked and not server.refused
    for request in prompts:
        assert request["prompt"].count(TOOLS_INTRO) == 1
        assert [m["role"] for m in request["body"]["messages"]].count("system") == 1
    assert marked[0]["body"]["messages"][0]["content"].startswith(
        prompts[0]["body"]["messages"][0]["content"][:200])  # the system prompt comes first


def test_without_one_system_message_the_server_writes_the_tools_into_each():
    run, server, calls, compactions = session(fresh=True, single=False, parts=3)
    prompts = agent_prompts(server)
    systems = [[m["role"] for m in r["body"]["messages"]].count("system") for r in prompts]
    assert all(r["prompt"].count(TOOLS_INTRO) == n for r, n in zip(prompts, systems))
    assert max(systems) >= 2


REPEATING = [("tool", "list_files", {})] * 8  # SmolLM2 on the tool task: the same call


def test_a_weak_model_that_repeats_a_call_is_asked_for_its_answer_without_tools():
    run, server, calls, _ = session(fresh=True, single=True, parts=2, script=REPEATING,
                                    max_turns=6)
    agent = [server.requests[c["call"] - 1]["body"] for c in calls if c["kind"] == "agent"]
    # three calls (the repeat limit), then the answer turn: no tools, the results as text
    assert [b.get("tool_choice") for b in agent] == ["auto", "auto", "auto", None]
    assert [m["role"] for m in agent[-1]["messages"]] == ["system", "user"]
    assert run.status == "finished" and "part1.txt" in run.final_answer  # from the result


def test_without_the_weak_profile_the_repeating_model_runs_out_of_turns():
    run, server, calls, _ = session(fresh=False, single=True, parts=2, script=REPEATING,
                                    max_turns=6)
    agent = [server.requests[c["call"] - 1]["body"] for c in calls if c["kind"] == "agent"]
    assert all(b["tool_choice"] == "auto" and b["tools"] for b in agent)
    assert run.status == "failed" and run.result.code in ("turn_limit", "tool_repeat_loop")


# --- the pieces


def test_a_small_models_bullet_lines_are_read_as_facts_only_where_prose_is_allowed():
    answer = ("Here is a summary of the conversation:\n- North revenue 1000.00 in month 1\n"
              "- - The final report must stay under 120 words\nOk.")
    forms: list[str] = []
    summary = parse_model_summary(answer, forms, prose_ok=(SUMMARIZER_PROMPT,))
    assert summary.important_discoveries == ["North revenue 1000.00 in month 1",
                                             "The final report must stay under 120 words"]
    assert forms == ["prose"]
    with pytest.raises(SummaryError, match="names none of the C6 sections"):
        parse_model_summary(answer)  # the JSON-asking request takes no prose


def test_a_summary_that_is_a_tool_call_or_only_echoes_the_request_is_refused():
    with pytest.raises(SummaryError, match="call of list_files written as text"):
        parse_model_summary("functions.list_files:\n{ }", prose_ok=())
    echo = "Goal and constraints:\nDone so far:\nKey data:\nNext steps:\n" + SUMMARY_TAIL
    with pytest.raises(SummaryError):
        parse_model_summary(echo, prose_ok=(SUMMARIZER_PROMPT, SUMMARY_TAIL))


def test_one_system_message_merges_the_leading_ones_in_order_and_sends_a_later_one_as_user():
    messages = [{"role": "system", "content": "prompt"}, {"role": "system", "content": "snap"},
                {"role": "system", "content": "marker"}, {"role": "user", "content": "go"},
                {"role": "system", "content": "late"}]
    assert wire_messages(messages, single_system_message=True) == [
        {"role": "system", "content": "prompt\n\nsnap\n\nmarker"},
        {"role": "user", "content": "go"}, {"role": "user", "content": "late"}]
    assert wire_messages(messages) == messages


def test_llama_cpp_pythons_tokenizer_counts_the_text_as_its_template_renders_it_escaped():
    from agents.counting.server_tokens import probe_server_counter

    from .chatml_server import count, esc

    with ChatmlServer([]) as server:
        counter = probe_server_counter(server.base_url)
        text = """read_file {"path": "it's.csv"}"""
        assert counter is not None and counter.escaped
        assert counter.text(text) == count(esc(text)) > count(text)  # &#34; &#39;, as Jinja escapes
        # the tool list is written with `tojson`, which keeps its quotes
        schemas = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
        assert counter.tools(schemas) == TokenCounter().tools(schemas)


def test_an_answer_that_fills_the_window_is_not_read_as_our_request_being_too_long():
    # The server writes tool-call arguments without max_tokens; a looping model fills the
    # window with them and the refusal names more tokens than the request had (real lane,
    # 2026-12-02: a 2 430-token request "refused" at 4 096 + output).
    script = [("tool", "list_files", {}), ("tool", "read_file", {"path": "part0.txt"}),
              ("runaway", "read_file")] + [
        ("tool", "read_file", {"path": f"part{i}.txt"}) for i in range(1, 4)] + ["answer"]
    events: list = []
    run, server, calls, _ = session(fresh=True, single=True, parts=4, script=script,
                                    events=events)
    assert run.status == "finished", run.result.error
    assert server.refused == [4097]
    [refused] = [c for c in calls if c.get("refused")]
    assert refused["overflow"] == "output" and not refused["over_window"]
    assert refused["input_tokens"] == refused["estimated_tokens"] < 4096  # what was sent
    [error] = [e.payload for e in events if e.type == EventType.ERROR]
    assert error["code"] == "output_overflow" and "max_tokens does not bound" in error["message"]
    assert "compacted the history" in error["action"]
    # The engine's window is not shrunk by a count that was not of its request (believed,
    # 4 097 / 1 015 would have divided it by four).
    # The summary of the compaction that follows had 790 tokens then.
    after = [c["limit"] for c in calls[calls.index(refused) + 1:]]
    assert len(after) > 3 and min(after) > 0.95 * calls[0]["limit"]
