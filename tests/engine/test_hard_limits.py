"""Hard limits before anything is sent: preflight, fit()'s hard check, summary requests
re-checked after every shrink, caps honoured (issue 13 §2)."""
import pytest

from agents.config import ContextConfig
from agents.context.history import Msg
from agents.context.working import WorkingContext
from agents.counting.tokens import TokenCounter
from agents.events import EventType

from .helpers import run_scenario

COUNTER = TokenCounter()


def parallel(n, tokens, topic="t"):
    return {"tools": [{"tool": "fetch_document", "args": {"tokens": tokens, "topic": f"{topic}{i} " + "battery storage on the northern grid " * 2}}
                      for i in range(n)]}


def test_twenty_parallel_tool_results_at_window_4000_never_make_a_summary_request_too_long():
    out = run_scenario({"name": "p20", "goal": "Read everything.", "steps": [
        parallel(20, 400), parallel(20, 400, "u"), {"final": "done"}]}, window=4000)
    assert out.transport.refused == []
    # The newest round alone is over the window: no summary could ride with it, so none
    # is asked for (tests/engine/test_clearing.py); the older round is truncated.
    assert out.payloads(EventType.COMPACTION), "the scenario must compact"
    for body, prompt in zip(out.transport.requests, out.transport.prompt_tokens):
        assert prompt + body["max_tokens"] <= 4000  # the provider's own count
    assert out.run.report["over_window_requests"] == 0
    assert out.run.status == "finished", out.run.result.error


@pytest.mark.parametrize("cap", [8, 12, 16, 20, 24, 32, 40, 41, 64])
def test_a_shortened_message_honours_its_cap_even_below_the_cut_notes_size(cap):
    ctx = WorkingContext(counter=COUNTER, config=ContextConfig(), window=4000, system_prompt="s")
    msg = Msg.build(COUNTER, {"role": "tool", "tool_call_id": "call_3_12",
                              "content": "revenue 1,234 units " * 300}, 2, "arc:t1:77")
    framing = msg.tokens - COUNTER.text(msg.text)
    cut = ctx.shortened(msg, cap)
    assert cut.tokens <= max(cap, framing)
    assert cut.tokens == COUNTER.message(cut.data)


def test_preflight_fails_before_any_call_naming_the_part_its_size_the_limit_and_the_fix():
    system = "Follow the house style guide in every detail. " * 400  # far over a 4k window
    out = run_scenario({"name": "big-system", "goal": "Say hi.", "system": system,
                        "steps": [{"final": "hi"}]}, window=4000)
    assert out.run.status == "failed"
    assert out.transport.requests == [] and out.transport.refused == []
    assert out.payloads(EventType.MODEL_CALL) == []
    error = out.run.result.error
    size = COUNTER.text(system)
    assert "system prompt" in error and "window is 4,000 tokens" in error
    assert f"{size:,}" in error or f"{size + 1:,}" in error or "largest part is the system prompt" in error
    assert "Fix:" in error and "shorten the system prompt" in error
    fatal = [e for e in out.payloads(EventType.ERROR) if e["fatal"]]
    assert fatal[-1]["code"] == "preflight_failed"
    assert out.run.report["error"] == error  # reaches Session.error through the report


def test_fit_never_sends_a_request_it_could_not_shrink(monkeypatch):
    # With cutting disabled the newest round cannot shrink: the request must not be sent.
    monkeypatch.setattr(WorkingContext, "shortened", lambda self, msg, cap: msg)
    out = run_scenario({"name": "huge", "goal": "Read.", "steps": [
        {"tool": "fetch_document", "args": {"tokens": 9000, "topic": "x"}}, {"final": "done"}]},
        window=4000)
    assert out.run.status == "failed"
    assert "was not sent" in out.run.result.error
    assert out.transport.refused == []
    assert [e for e in out.payloads(EventType.ERROR) if e["fatal"]][-1]["code"] == "request_too_large"


def test_summary_requests_are_rechecked_after_squeezing_parallel_calls_with_long_arguments():
    import json

    from agents.compaction.compactor import Compactor
    from agents.provider.client import ModelReply

    ctx = WorkingContext(counter=COUNTER, config=ContextConfig(), window=4000, system_prompt="s")
    calls = [{"id": f"call_0_{i}", "type": "function", "function": {
        "name": "fetch_document", "arguments": json.dumps(
            {"topic": f"topic {i}: " + "battery storage on the northern grid " * 5})}}
             for i in range(20)]
    ctx.add({"role": "assistant", "content": None, "tool_calls": calls}, 1, "arc:t:1")
    for i in range(20):
        ctx.add({"role": "tool", "tool_call_id": f"call_0_{i}",
                 "content": f"result {i}: " + "grid load figures " * 60}, 1, f"arc:t:{i + 2}")
    ctx.add({"role": "user", "content": "Go on."}, 2, "arc:t:30")
    ctx.add({"role": "assistant", "content": None, "tool_calls": [calls[0]]}, 2, "arc:t:31")
    ctx.add({"role": "tool", "tool_call_id": "call_0_0", "content": "ok"}, 2, "arc:t:32")
    sent = []

    def summarize(messages, max_tokens, tokens, tools=None):
        exact = COUNTER.request(messages)
        sent.append((exact, max_tokens))
        ids = {c["id"] for m in messages for c in m.get("tool_calls") or ()}
        assert all(m["tool_call_id"] in ids for m in messages if m["role"] == "tool")
        return ModelReply(content=json.dumps({"task_overview": ["Read everything."]}))

    Compactor(ctx, summarize).compact("budget", constraints=["Never email the customer"])
    assert sent and all(tokens + out <= 4000 for tokens, out in sent), sent


def _rules(n):
    return " ".join(f"Do not touch the file report_{i}.csv under any folder." for i in range(n))


def test_preflight_counts_the_person_words_that_no_compaction_can_drop():
    # 120 prohibitions in a message: the system, tools, snapshot and reserve alone fit 4k,
    # but the person's own rule sentences are in every request too, and they alone are
    # more than a request can carry. That once failed the session at the message; the
    # preflight still counts them, and now says so and carries those that fit. (The
    # snapshot points at them rather than listing them a second time, so 70, which once
    # filled the window twice over, now fit.)
    out = run_scenario({"name": "many-rules", "goal": "Read the files.", "steps": [
        {"tool": "list_files", "args": {}}, {"user": _rules(120)}, {"final": "ok"}]},
        window=4000)
    assert out.run.status == "finished", out.run.result.error
    assert len(out.transport.requests) > 1 and out.transport.refused == []
    assert not [e for e in out.payloads(EventType.ERROR) if e["fatal"]]
    told = [e for e in out.payloads(EventType.ERROR) if e["code"] == "words_over_window"]
    assert len(told) == 1 and "as hard-constraint sentences" in told[0]["message"]
    assert all(c["input_tokens"] <= 4000 for c in out.payloads(EventType.MODEL_CALL))


def test_the_person_words_minimum_is_only_their_constraint_sentences():
    from agents.words.person import PersonWords

    chatter = "We talked about the weather and the new office for a while. " * 40
    words = PersonWords()
    words.add(0, "arc:t1:0", chatter + "Never email the customer.", source="goal")
    count = COUNTER.text
    minimum = words.minimum_tokens([], count)
    assert minimum < count(chatter) // 5
    assert minimum >= count("Never email the customer.")
    out = run_scenario({"name": "chatty", "goal": chatter + "Never email the customer.",
                        "steps": [{"final": "ok"}]}, window=4000)
    assert out.run.status == "finished", out.run.result.error
