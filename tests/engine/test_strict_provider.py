"""The simulated provider is strict like a real one, and its refusals are recorded (issue 13)."""
import json
import sys

import pytest

from agents.config import ModelProfile
from agents.counting.tokens import TokenCounter
from agents.events import EventType
from agents.loop.spec import SessionSpec
from agents.provider.client import ContextOverflow, ModelClient, parse_overflow
from agents.scenarios import parse_scenario
from agents.sim import counting
from agents.sim.transport import sim_http_client

from .helpers import run_scenario

SCENARIO = parse_scenario({"name": "t", "goal": "g", "steps": [
    {"tools": [{"tool": "fetch_document", "args": {"tokens": 900, "topic": f"topic {i}"}}
               for i in range(6)]},
    {"final": "All six documents read. " * 40}]})


def client(window):
    http, transport = sim_http_client(SCENARIO, window)
    return ModelClient(ModelProfile(name="sim", context_size=window), http_client=http,
                       base_url="http://sim.taskos.invalid/v1"), transport


def test_prompt_plus_max_tokens_over_the_window_is_refused_with_the_openai_text():
    model, transport = client(2000)
    messages = [{"role": "user", "content": "word " * 1500}]
    prompt = counting.prompt_tokens({"messages": messages})
    with pytest.raises(ContextOverflow) as caught:
        model.complete(messages, None, max_tokens=600)
    text = str(caught.value)
    assert (f"maximum context length is 2000 tokens. However, you requested {prompt + 600} "
            f"tokens ({prompt} in the messages, 600 in the completion)") in text
    # the engine takes the prompt part, not prompt + completion
    assert (caught.value.limit, caught.value.requested) == (2000, prompt)
    assert transport.refused == [(prompt, 600)] and transport.requests == []
    model.complete(messages, None, max_tokens=2000 - prompt)  # exactly at the window: accepted


def test_overflow_parser_takes_the_prompt_part_and_still_reads_older_texts():
    assert parse_overflow("This model's maximum context length is 4,000 tokens. However, you "
                          "requested 4,100 tokens (3,200 in the messages, 900 in the "
                          "completion).") == (4000, 3200)
    assert parse_overflow("maximum context length is 8192 tokens, however your messages "
                          "resulted in 9000 tokens") == (8192, 9000)


def test_the_providers_count_comes_from_its_own_code_and_matches_the_documented_framing():
    body = {"messages": [{"role": "system", "content": "Be brief."},
                         {"role": "assistant", "content": None, "tool_calls": [
                             {"id": "call_0_0", "type": "function",
                              "function": {"name": "read_file", "arguments": '{"path": "a"}'}}]},
                         {"role": "tool", "tool_call_id": "call_0_0", "content": "hello"}],
            "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]}
    enc = counting._encoding()
    n = lambda s: len(enc.encode(s))  # noqa: E731
    expected = (3 + (3 + n("system") + n("Be brief."))
                + (3 + n("assistant") + 3 + n("call_0_0") + n("read_file") + n('{"path": "a"}'))
                + (3 + n("tool") + n("hello") + n("call_0_0"))
                + 12 + n(json.dumps(body["tools"], ensure_ascii=False, sort_keys=True)))
    assert counting.prompt_tokens(body) == expected
    # the engine aims at the same framing; a difference would be reported, not hidden
    assert TokenCounter().request(body["messages"], body["tools"]) == expected


def test_max_tokens_is_honoured_for_tool_calls_too():
    model, _ = client(100_000)
    reply = model.complete([{"role": "user", "content": "go"}], None, max_tokens=30)
    out = sum(counting.text_tokens(c["name"]) + counting.text_tokens(c["arguments"])
              for c in reply.tool_calls)
    assert reply.finish_reason == "length" and reply.output_tokens <= 30 and out <= 30
    assert len(reply.tool_calls) < 6  # the calls after the limit never arrive
    full = model.complete([{"role": "user", "content": "go"}], None, max_tokens=1000)
    assert full.finish_reason == "tool_calls" and len(full.tool_calls) == 6


def test_a_refused_request_is_a_recorded_call_counted_over_window_and_in_the_peak():
    # The profile claims a larger window than the provider has: the first request is refused.
    out = run_scenario({"name": "r", "goal": "Read.", "steps": [
        {"tool": "fetch_document", "args": {"tokens": 2500, "topic": "storage"}},
        {"tool": "fetch_document", "args": {"tokens": 2500, "topic": "grid"}},
        {"final": "done"}]}, window=16_000, transport_window=5_000)
    refused = [c for c in out.payloads(EventType.MODEL_CALL) if c.get("refused")]
    assert refused and all(c["over_window"] for c in refused)
    report = out.run.report
    assert report["over_window_requests"] >= len(refused)
    assert report["peak_input_tokens"] >= max(c["input_tokens"] for c in refused)
    assert [c for c in report["model_calls"] if c.get("refused")]
    assert out.run.status == "finished", out.run.result.error  # recovered after the refusal
    assert max(out.transport.prompt_tokens) + 0 <= 5_000


def simulator_sleeps(monkeypatch) -> list[float]:
    """The waits the simulated model takes, recorded instead of slept. time.sleep is one
    function for every module and thread: a retry wait left running by an earlier test
    sleeps through it too, and is not the simulator's pacing, so only its calls count."""
    import agents.sim.transport as transport_module
    slept, real_sleep = [], transport_module.time.sleep

    def sleep(seconds: float) -> None:
        if sys._getframe(1).f_code.co_filename == transport_module.__file__:
            slept.append(seconds)
        else:
            real_sleep(seconds)

    monkeypatch.setattr(transport_module.time, "sleep", sleep)
    return slept


def test_the_simulated_model_takes_its_latency_on_answers_and_refuses_at_once(monkeypatch):
    slept = simulator_sleeps(monkeypatch)
    http, transport = sim_http_client(SCENARIO, 2000, latency_s=0.25)
    model = ModelClient(ModelProfile(name="sim", context_size=2000), http_client=http,
                        base_url="http://sim.taskos.invalid/v1")
    messages = [{"role": "user", "content": "word " * 1500}]
    with pytest.raises(ContextOverflow):
        model.complete(messages, None, max_tokens=600)
    assert slept == []  # a refusal comes back at once
    model.complete([{"role": "user", "content": "hello"}], None, max_tokens=50)
    assert slept == [0.25]


def test_a_profile_s_sim_latency_paces_every_call_of_a_run(monkeypatch, tmp_path):
    from agents.config import ContextConfig
    from agents.events import ListSink
    from agents.runner import run_session
    from agents.store.memory import MemoryStore
    slept = simulator_sleeps(monkeypatch)
    run = run_session(SessionSpec.plan(goal="", scenario=SCENARIO, config=ContextConfig(),
                                       profile=ModelProfile(name="sim", context_size=16_000, sim_latency_ms=40)),
                      session_id="paced", store=MemoryStore(), events=ListSink(),
                      workspace=tmp_path)
    calls = run.report["model_calls"]
    assert run.result.status == "finished" and len(calls) >= 2
    assert slept == [0.04] * len(calls)
