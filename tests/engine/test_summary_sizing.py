"""Summaries sized to what they hold, no summary call that would add nothing, and one
prompt cache for agent and summary requests."""
import json
import re

from agents.compaction.compactor import Compactor
from agents.compaction.summary import (SECTION_SHARES, StructuredSummary, render,
                                       section_budgets)
from agents.config import ContextConfig
from agents.context.working import WorkingContext
from agents.counting.tokens import TokenCounter
from agents.protocol import SUMMARY_MARKER, is_tail_request
from agents.provider.client import ModelReply

from .helpers import run_scenario

COUNTER = TokenCounter()
SUMMARY = {"task_overview": ["Read the grid reports."],
           "current_state": ["read_file r0.txt to r5.txt read (archive turn 5)"],
           "important_discoveries": ["grid load rose 12% in the North region (archive turn 2)"]}


def context(rounds: int = 6, result: str = "grid load rose 12% in the North region",
            window: int = 16_000) -> WorkingContext:
    """Rounds of a question, one read_file call and its result; round n reads r{n}.txt."""
    ctx = WorkingContext(counter=COUNTER, config=ContextConfig(), window=window,
                         system_prompt="s")
    for turn in range(rounds):
        ctx.add({"role": "user", "content": "Read the grid reports."}, turn, f"arc:t:{turn}0")
        ctx.add({"role": "assistant", "content": "", "tool_calls": [{
            "id": f"c{turn}", "type": "function", "function": {
                "name": "read_file", "arguments": json.dumps({"path": f"r{turn}.txt"})}}]},
            turn, f"arc:t:{turn}1")
        ctx.add({"role": "tool", "tool_call_id": f"c{turn}", "content": result}, turn,
                f"arc:t:{turn}2")
    return ctx


def with_summary(ctx: WorkingContext, summary: dict) -> WorkingContext:
    held = StructuredSummary.from_dict(summary)
    ctx.set_summary(held.to_dict(), render(held))
    return ctx


def recording(answer: dict | None = None):
    asked = []

    def summarize(messages, max_tokens, tokens, tools=None, **extra):
        asked.append({"messages": messages, "tools": tools, **extra})
        return ModelReply(content=json.dumps(answer or SUMMARY))
    return summarize, asked


def test_no_summary_is_asked_for_when_the_folded_rounds_hold_nothing_the_summary_lacks():
    ctx = with_summary(context(), SUMMARY)
    before = ctx.summary_text
    summarize, asked = recording()
    outcome = Compactor(ctx, summarize).compact("rolling", constraints=[])
    assert asked == [] and outcome.summary_calls == 0 and outcome.nothing_new
    assert not outcome.fallback and ctx.summary_text == before
    assert outcome.archived_turns and len(ctx.history) < 18  # folded all the same
    # One figure or one word the summary lacks is worth the call; so is a first summary.
    for result in ("grid load rose 13% in the North region",  # a figure it lacks
                   "grid load rose 12% in the Alpine region",  # a word it lacks
                   "北部电网负荷上升12%"):  # a run of CJK characters it lacks
        ctx = with_summary(context(result=result), SUMMARY)
        summarize, asked = recording()
        outcome = Compactor(ctx, summarize).compact("rolling", constraints=[])
        assert len(asked) == 1 and not outcome.nothing_new, result
    summarize, asked = recording()
    outcome = Compactor(context(), summarize).compact("rolling", constraints=[])
    assert len(asked) == 1 and not outcome.fallback


def test_each_section_keeps_its_newest_items_within_its_own_budget():
    # 60 discoveries of ~40 tokens: 2 400 tokens, over the discoveries' share of a 128k
    # window's summary zone (800 of its 8 000 tokens).
    found = [f"site {i} reported a grid load of {1000 + i} MW in the North region during the "
             f"third quarter of the year, from the operator (archive turn {i})" for i in range(60)]
    summarize, _ = recording({"task_overview": ["Read the grid reports."],
                              "important_discoveries": found})
    ctx = context(window=128_000)
    Compactor(ctx, summarize).compact("rolling", constraints=[])
    kept = StructuredSummary.from_dict(ctx.summary)
    budget = section_budgets(ctx.budget().summary_cap)["important_discoveries"]
    assert budget == int(ctx.budget().summary_cap * SECTION_SHARES["important_discoveries"])
    assert kept.important_discoveries == found[-len(kept.important_discoveries):]
    assert 0 < COUNTER.text("\n".join(f"- {d}" for d in kept.important_discoveries)) <= budget
    assert kept.task_overview == ["Read the grid reports."]
    assert COUNTER.text(ctx.summary_text) < ctx.budget().summary_cap // 2  # not padded


def test_a_summary_answer_that_calls_a_tool_is_asked_again_with_the_tools_not_callable():
    ctx = context(rounds=3)
    choices = []

    def summarize(messages, max_tokens, tokens, tools=None, tool_choice=None):
        choices.append(tool_choice)
        if tool_choice is None:  # the agent's own tool_choice: the model calls a tool
            return ModelReply(content="", tool_calls=[
                {"id": "x", "name": "read_file", "arguments": "{}"}], finish_reason="tool_calls")
        return ModelReply(content=json.dumps(SUMMARY))

    ctx.tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    outcome = Compactor(ctx, summarize).compact("rolling", constraints=[])
    assert choices == [None, "none"] and outcome.summary_calls == 2
    assert not outcome.fallback and "grid load rose 12%" in ctx.summary_text


def test_a_summary_answer_that_calls_a_tool_twice_is_rejected_clearly():
    ctx = context(rounds=3)

    def summarize(messages, max_tokens, tokens, tools=None, tool_choice=None):
        return ModelReply(content="", tool_calls=[
            {"id": "x", "name": "read_file", "arguments": "{}"}], finish_reason="tool_calls")

    ctx.tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    outcome = Compactor(ctx, summarize).compact("rolling", constraints=[])
    assert outcome.fallback and outcome.summary_calls == 2
    assert "called read_file instead of writing the summary" in outcome.fallback_reason


def test_agent_and_summary_requests_of_a_run_carry_the_same_tools_and_tool_choice():
    steps = [{"tool": "fetch_document", "args": {"tokens": 400, "topic": f"grid storage #{i}"}}
             for i in range(40)]
    out = run_scenario({"name": "docs", "goal": "Read forty documents.",
                        "steps": steps + [{"final": "done"}]}, window=8000)
    bodies = out.transport.requests
    summaries = [b for b in bodies if is_tail_request(b["messages"])]
    agents = [b for b in bodies if not is_tail_request(b["messages"])
              and not str(b["messages"][0].get("content") or "").startswith(SUMMARY_MARKER)]
    assert summaries and agents
    offered = {(json.dumps(b.get("tools"), sort_keys=True), b.get("tool_choice"))
               for b in summaries + agents}
    assert len(offered) == 1 and next(iter(offered))[1] == "auto"
    # So the strict cache rule (a tool_choice change voids the cached messages) costs
    # nothing: every request has as many tokens cached under it as under the usual rule.
    usual = [c["cached_tokens"] for c in out.run.report["model_calls"] if not c.get("refused")]
    assert [cached for _, cached, _, _ in out.transport.strict_usage] == usual
    assert sum(usual) > 0


def test_the_summary_request_states_each_sections_budget_so_no_more_is_written():
    for window in (128_000, 32_000):
        ctx = context(window=window)
        summarize, asked = recording()
        Compactor(ctx, summarize).compact("rolling", constraints=[])
        text = "\n".join(str(m.get("content") or "") for m in asked[0]["messages"])
        for name, budget in section_budgets(ctx.budget().summary_cap).items():
            assert f"- {name}: at most {budget} tokens (about " in text, (window, name)




def test_the_simulated_model_writes_within_the_budgets_a_prefix_summary_request_states(
        monkeypatch):
    from agents.counting.tokens import count_text
    from agents.sim.summarizer import SummaryPlayer

    answers = []
    answer = SummaryPlayer.answer
    monkeypatch.setattr(SummaryPlayer, "answer",
                        lambda self, messages: answers.append(answer(self, messages))
                        or answers[-1])
    steps = [{"tool": "fetch_document", "args": {"tokens": 400, "topic": f"grid storage #{i}"}}
             for i in range(120)]
    out = run_scenario({"name": "docs", "goal": "Read the documents.",
                        "steps": steps + [{"final": "done"}]}, window=32_000)
    asked = [str(b["messages"][-1].get("content")) for b in out.transport.requests
             if is_tail_request(b["messages"])]
    budgets = [int(re.search(r"- important_discoveries: at most (\d+) tokens", text).group(1))
               for text in asked]
    assert answers and len(budgets) == len(answers)
    for budget, summary in zip(budgets, answers):
        found = summary["important_discoveries"]
        assert found and count_text("\n".join(f"- {d}" for d in found)) <= budget
