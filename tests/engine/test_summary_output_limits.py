"""Summaries that fit real output limits (issue 11): a summary cut by its output limit is
asked again with the window's room, then split into smaller chunks, before truncation."""
import json
import re

from agents.compaction.compactor import Compactor
from agents.config import ContextConfig
from agents.context.working import WorkingContext
from agents.counting.tokens import TokenCounter
from agents.provider.client import ModelReply

COUNTER = TokenCounter()
SUMMARY = json.dumps({"task_overview": ["Read the reports."],
                      "current_state": ["read the reports of rounds 0-7"]})


def context_with_rounds(rounds: int = 8, window: int = 4096) -> WorkingContext:
    """Rounds of user question, tool call and tool result; the history is too big for one
    prefix request, so compaction goes through fresh chunked requests."""
    ctx = WorkingContext(counter=COUNTER, config=ContextConfig(), window=window,
                         system_prompt="s")
    for turn in range(rounds):
        ctx.add({"role": "user", "content": f"Round {turn}: read report {turn}."}, turn,
                f"arc:t:{turn}0")
        ctx.add({"role": "assistant", "content": "", "tool_calls": [{
            "id": f"c{turn}", "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": f"r{turn}.txt"})}}]},
            turn, f"arc:t:{turn}1")
        ctx.add({"role": "tool", "tool_call_id": f"c{turn}",
                 "content": f"report {turn}: " + "grid load figures rose again " * 40}, turn,
                f"arc:t:{turn}2")
    return ctx


def tool_results(messages) -> list[str]:
    """The report numbers of the tool results a summary request holds."""
    return [re.search(r"report (\d+):", m["content"]).group(1) for m in messages
            if m["role"] == "tool"]


def test_a_small_windows_summary_gets_the_windows_room_at_once_not_after_a_cut():
    ctx = context_with_rounds()
    asked = []

    def summarize(messages, max_tokens, tokens, tools=None):
        asked.append(max_tokens)
        cut = max_tokens <= ctx.budget().summary_output  # the small model writes long
        return ModelReply(content=SUMMARY[:40] if cut else SUMMARY,
                          finish_reason="length" if cut else "stop")

    outcome = Compactor(ctx, summarize).compact("budget", constraints=[])
    assert not outcome.fallback, outcome.fallback_reason
    # One call: asked with the zone's room it would be cut, and its text never used.
    assert len(asked) == 1 and ctx.budget().summary_output < asked[0] <= 4096
    assert outcome.raised_output == 0 and outcome.merged_calls == outcome.summary_calls == 1
    assert "read the reports of rounds 0-7" in ctx.summary_text


def test_a_summary_still_cut_is_made_from_smaller_chunks_and_merged():
    ctx = context_with_rounds()
    sizes = []

    def summarize(messages, max_tokens, tokens, tools=None):
        held = tool_results(messages)
        sizes.append(len(held))
        if len(held) > 4:  # too much input for this model's output, whatever the room
            return ModelReply(content=SUMMARY[:40], finish_reason="length")
        return ModelReply(content=json.dumps({"important_discoveries": [
            f"reports {', '.join(held)} read"]}))

    outcome = Compactor(ctx, summarize).compact("budget", constraints=[])
    assert not outcome.fallback, outcome.fallback_reason
    assert max(sizes) > 4 and sizes[-1] <= 4
    # Every report is in a partial summary, and the partial summaries were merged.
    assert ctx.summary_text.count("reports ") >= 2
    assert sorted(re.findall(r"\d+", " ".join(re.findall(r"reports ([\d, ]+) read",
                                                           ctx.summary_text)))) == \
        [str(n) for n in range(7)]
