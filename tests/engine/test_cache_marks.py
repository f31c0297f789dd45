"""Cache breakpoints: where the engine marks them, how they go on the wire, what they cost."""
import json

import httpx2

from agents.bench.workloads import run_once
from agents.config import ModelProfile
from agents.context.working import Request
from agents.counting.pricing import PRICE_TABLES
from agents.loop.cache_marks import agent_marks, summary_marks
from agents.provider.client import ModelClient, mark_carriers, wire_with_marks
from agents.scenarios import load_scenario
from agents.sim.transport import SimTransport

MESSAGES = [{"role": "system", "content": "You are the agent."},
            {"role": "system", "content": "<task-snapshot>goal</task-snapshot>"},
            {"role": "user", "content": "Do the task."},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_0_0", "type": "function",
                 "function": {"name": "fetch", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_0_0", "content": "the page"}]


def marked_indices(messages):
    return [i for i, m in enumerate(messages) if isinstance(m.get("content"), list)
            and any(p.get("cache_control") for p in m["content"])]


def test_marks_reach_the_wire_only_when_the_profile_takes_them():
    plain = ModelClient(ModelProfile()).request_params(MESSAGES, None, 100, cache_marks=(1, 4))
    assert plain["messages"] == MESSAGES  # a plain OpenAI-compatible server gets strings
    assert "cache_control" not in json.dumps(plain)
    client = ModelClient(ModelProfile(cache_marks=True))
    sent = client.request_params(MESSAGES, None, 100, cache_marks=(1, 4))["messages"]
    assert marked_indices(sent) == [1, 4]
    assert sent[4]["content"] == [{"type": "text", "text": "the page",
                                   "cache_control": {"type": "ephemeral"}}]
    # An assistant turn without text passes its mark to the nearest earlier text.
    sent = client.request_params(MESSAGES, None, 100, cache_marks=(3,))["messages"]
    assert marked_indices(sent) == [2]


def test_a_mark_on_a_merged_system_message_lands_on_the_merged_one():
    client = ModelClient(ModelProfile(cache_marks=True, single_system_message=True))
    sent = client.request_params(MESSAGES, None, 100, cache_marks=(1, 4))["messages"]
    assert len(sent) == 4 and marked_indices(sent) == [0, 3]


def test_the_messages_that_carry_a_mark_are_where_it_went_on_the_wire():
    # Asked on the tool-only assistant turn, the mark went on the user message before it;
    # on a merged system message, it ends with the last system message merged.
    sent = wire_with_marks(MESSAGES, (3,))
    assert mark_carriers(MESSAGES, sent) == {2}
    merged = wire_with_marks(MESSAGES, (0, 4), single_system_message=True)
    assert merged == ModelClient(ModelProfile(cache_marks=True, single_system_message=True)
                                 ).request_params(MESSAGES, None, 100, cache_marks=(0, 4))["messages"]
    assert mark_carriers(MESSAGES, merged, single_system_message=True) == {1, 4}
    assert mark_carriers(MESSAGES, wire_with_marks(MESSAGES)) == set()


def request_of(zones):
    return Request(messages=[{"role": "user", "content": z} for z in zones], zones_of=zones,
                   tokens_of=[10] * len(zones), tools=[], zones={}, total=10 * len(zones))


def test_a_request_before_a_rewrite_marks_what_the_rewrite_keeps_not_its_end():
    request = request_of(["system", "snapshot", "history", "history", "history", "history",
                          "hints"])
    assert agent_marks(request, extends=True) == (0, 1, 5)
    # The next request clears from message 4 on: the mark goes on message 3, and the
    # mark an earlier request left on message 2 is read back.
    assert agent_marks(request, extends=False, earlier=2, kept=3) == (0, 1, 2, 3)
    assert agent_marks(request, extends=False) == (0, 1)


def test_a_summary_request_repeating_the_prefix_marks_the_head_and_the_folded_part():
    parts = [("system", 5), ("snapshot", 5), ("folded", 5), ("folded", 5), ("instructions", 5)]
    messages = [{"role": "user", "content": "x"}] * len(parts)
    assert summary_marks(messages, parts) == (0, 1, 3)
    fresh = [("instructions", 5), ("material", 5)]
    assert summary_marks(messages[:2], fresh) == ()


def test_the_simulated_provider_refuses_more_than_four_marks():
    scenario = load_scenario("retrieval-6x1600")
    transport = SimTransport(scenario, 4000)
    messages = [{"role": "user", "content": [{"type": "text", "text": f"m{i}",
                                              "cache_control": {"type": "ephemeral"}}]}
                for i in range(5)]
    response = httpx2.Client(transport=transport, base_url="http://sim.invalid/v1").post(
        "/chat/completions", json={"model": "m", "messages": messages, "max_tokens": 10})
    assert response.status_code == 400 and "cache_control" in response.text
    response = httpx2.Client(transport=transport, base_url="http://sim.invalid/v1").post(
        "/chat/completions", json={"model": "m", "messages": messages[:4], "max_tokens": 10})
    assert response.status_code == 200
    # Marks are read, then gone: the request is counted as its text.
    usage = response.json()["usage"]
    assert usage["cache_creation_input_tokens"] == 0 and usage["cache_read_input_tokens"] == 0


def written_and_read(calls):
    return [(c["cache_read_tokens"], c["cache_write_tokens"]) for c in calls]


def test_a_managed_run_writes_no_prefix_that_no_later_request_reads():
    # At a 4 000 window every round clears the result before it and the snapshot is
    # refrozen with it: no request extends the one before, so nothing is worth writing.
    calls = run_once("retrieval-6x1600", 4000, managed=True).report["model_calls"]
    assert all("cache_write_tokens" in c for c in calls)
    usage = written_and_read(calls)
    for i, (read, written) in enumerate(usage):
        if written:
            assert any(later >= read + written for later, _ in usage[i + 1:]), (i, usage)


def test_the_unmanaged_baseline_marks_its_end_and_is_billed_by_the_same_rule():
    report = run_once("retrieval-6x1600", 4000, managed=False).report
    calls = report["model_calls"]
    usage = written_and_read(calls)
    # The last message marked each time: each request reads all the one before wrote.
    assert usage[0] == (0, 0)  # under the cacheable minimum
    for (read, written), (next_read, _) in zip(usage[1:], usage[2:]):
        assert written > 0 and next_read == read + written
    anthropic = PRICE_TABLES["anthropic-like"]
    billed = sum(anthropic.cost(c["input_tokens"], c["cached_tokens"], c["output_tokens"],
                                (c["cache_read_tokens"], c["cache_write_tokens"]))
                 for c in calls)
    assert report["cost"]["anthropic-like"] == round(billed, 4)
    assert report["cost_anthropic_strict"] == round(billed, 4)  # no tool_choice change
