"""Weak-model robustness (issue 11) against a fake OpenAI-compatible server on a socket.

What small models on llama.cpp, vLLM and Ollama servers do — tool calls written as text,
JSON blobs or echoes of the engine's own blocks as "final answers", the same failing
call forever, each server's own overflow text — and what the engine makes of it.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from agents.compaction.summary import parse_model_summary
from agents.config import ContextConfig, ModelProfile
from agents.counting.tokens import TokenCounter
from agents.events import EventType, ListSink
from agents.loop.reply_vetting import echoed, text_tool_calls
from agents.loop.spec import SessionSpec
from agents.provider.client import ModelClient
from agents.provider.overflow import parse_overflow
from agents.runner import run_session
from agents.store.memory import MemoryStore

from .fake_provider import FakeProvider


def run_against(provider: FakeProvider, config: ContextConfig | None = None,
                goal: str = "List the files, then say hello.", tools: list[str] | None = None,
                **profile_kw):
    fields = {"api_key_env": "", "context_size": 16_000, **profile_kw}
    profile = ModelProfile(name="fake", model="fake-model", base_url=provider.base_url, **fields)
    sink = ListSink()
    with tempfile.TemporaryDirectory() as tmp:
        run = run_session(SessionSpec.plan(goal=goal, scenario=None, profile=profile,
                                           config=config or ContextConfig(), tools=tools),
                          session_id="w1", store=MemoryStore(), events=sink, workspace=Path(tmp))
    return run, sink


def finished(sink: ListSink) -> dict:
    [event] = sink.of_type(EventType.SESSION_FINISHED)
    return event.payload


def error_codes(sink: ListSink) -> list[tuple[str, bool]]:
    return [(e.payload["code"], e.payload["fatal"]) for e in sink.of_type(EventType.ERROR)]


def tool_calls(sink: ListSink) -> list[str]:
    return [e.payload["name"] for e in sink.of_type(EventType.TOOL_CALL)]


def test_tool_choice_is_sent_and_no_message_carries_null_content():
    # The fake answers `content: null` with a 500, as llama-cpp-python's server does.
    with FakeProvider(["tool", "ok"], null_content_500=True) as provider:
        run, sink = run_against(provider)
    assert finished(sink)["status"] == "finished", error_codes(sink)
    first, second = (r["body"] for r in provider.requests)
    assert first["tool_choice"] == "auto" and first["tools"]
    assert all(m.get("content") is not None for m in second["messages"])
    assert tool_calls(sink) == ["list_files"]


def test_tool_results_can_be_sent_as_user_messages():
    with FakeProvider(["tool", "ok"]) as provider:
        run_against(provider, tool_results_as_user=True)
    messages = provider.requests[1]["body"]["messages"]
    assert not any(m["role"] == "tool" for m in messages)
    # named by the tool, not by the call's id (a small model copied long ids into paths)
    assert any(m["role"] == "user" and m["content"].startswith("[result of tool call list_files]")
               for m in messages)


def test_profile_sampling_settings_reach_the_request():
    with FakeProvider(["ok"]) as provider:
        run_against(provider, temperature=0.2, top_p=0.9)
    body = provider.requests[0]["body"]
    assert (body["temperature"], body["top_p"]) == (0.2, 0.9)


@pytest.mark.parametrize("behaviour", ["text_tool", "fenced_tool"])
def test_a_tool_call_written_as_text_is_run_as_a_tool_call(behaviour):
    with FakeProvider([behaviour, "ok"]) as provider:
        run, sink = run_against(provider)
    assert tool_calls(sink) == ["list_files"]
    payload = finished(sink)
    assert (payload["status"], payload["final_answer"]) == ("finished", "All done.")
    # The call goes back to the server as a real tool call with its result after it.
    messages = provider.requests[1]["body"]["messages"]
    assistant = next(m for m in messages if m.get("tool_calls"))
    assert assistant["tool_calls"][0]["function"]["name"] == "list_files"
    assert messages[messages.index(assistant) + 1]["role"] == "tool"


@pytest.mark.parametrize("behaviour", ["unknown_json", "echo"])
def test_json_or_an_echo_is_never_the_final_answer_and_is_asked_again_once(behaviour):
    with FakeProvider([behaviour, "ok"]) as provider:
        run, sink = run_against(provider)
    payload = finished(sink)
    assert (payload["status"], payload["final_answer"]) == ("finished", "All done.")
    assert ("unusable_answer", False) in error_codes(sink)
    nudge = provider.requests[1]["body"]["messages"]
    assert any("Your last answer" in (m.get("content") or "") for m in nudge)


@pytest.mark.parametrize("behaviour", ["unknown_json", "echo"])
def test_a_second_unusable_answer_ends_the_session_with_a_clear_status(behaviour):
    with FakeProvider(default=behaviour) as provider:
        run, sink = run_against(provider)
    payload = finished(sink)
    assert payload["status"] == "unusable_answer" and payload["final_answer"] == ""
    assert error_codes(sink)[-1] == ("unusable_answer", True)
    assert len(provider.requests) == 2


def test_the_same_failing_call_gets_the_hint_then_ends_the_session():
    with FakeProvider(default="bad_read") as provider:
        run, sink = run_against(provider, config=ContextConfig(tool_retries_limit=3))
    hints = [e.payload for e in sink.of_type(EventType.HINT_BLOCK)
             if e.payload["kind"] == "tool_error"]
    assert len(hints) == 1 and "The last 3 calls to 'read_file'" in hints[0]["text"]
    assert error_codes(sink)[-1] == ("tool_retry_loop", True)
    assert finished(sink)["status"] == "failed"
    assert len(provider.requests) == 6  # 3 before the hint, 3 more after it


def test_the_same_successful_call_in_a_row_gets_the_hint_then_ends_the_session():
    # SmolLM2 on llama-cpp-python: list_files, list_files, list_files… until turn_limit.
    with FakeProvider(default="tool") as provider:
        run, sink = run_against(provider, config=ContextConfig(tool_retries_limit=3,
                                                               max_turns=40))
    hints = [e.payload for e in sink.of_type(EventType.HINT_BLOCK)
             if e.payload["kind"] == "tool_repeat"]
    assert len(hints) == 1 and "'list_files' with the same arguments 3 times" in hints[0]["text"]
    # The hint reached the model in the request after the third call.
    assert any("3 times in a row" in (m.get("content") or "")
               for m in provider.requests[3]["body"]["messages"])
    assert error_codes(sink)[-1] == ("tool_repeat_loop", True)
    assert finished(sink)["status"] == "failed" and "6 times in a row" in finished(sink)["error"]
    assert len(provider.requests) == 6


def test_a_call_repeated_with_other_calls_between_is_not_a_loop():
    with FakeProvider(["tool", "bad_read", "tool", "bad_read", "tool", "bad_read", "tool",
                       "ok"]) as provider:
        run, sink = run_against(provider, config=ContextConfig(tool_retries_limit=3))
    assert finished(sink)["status"] == "finished"
    assert not [e for e in sink.of_type(EventType.HINT_BLOCK)
                if e.payload["kind"] == "tool_repeat"]


def server_count(factor: float):
    """The server's own prompt count: the engine's cl100k figure × `factor` (another
    tokenizer), as a real server would report it."""
    counter = TokenCounter()
    return lambda body: round(counter.request(body["messages"], body.get("tools")) * factor)


def server_with_overhead(overhead: int, ratio: float, tools_overhead: int = 0):
    """A llama.cpp-like count: the server's own framing (a fixed overhead per request),
    its tokenizer (`ratio` × cl100k on the messages), and the tools rendered in its own
    words (`tools_overhead`) — dropped when tool_choice is "none", as
    llama-cpp-python's chatml-function-calling does."""
    counter = TokenCounter()

    def count(body):
        tools_offered = body.get("tools") and body.get("tool_choice") != "none"
        return round(overhead + ratio * counter.request(body["messages"])
                     + (tools_overhead if tools_offered else 0))
    return count


@pytest.mark.parametrize("style", ["llamacpp", "vllm", "ollama"])
def test_each_servers_overflow_text_is_recognised_and_the_session_recovers(style):
    # The profile says 4096 but the server runs with 2048 and its tokenizer counts 10 %
    # more: a long goal the engine thinks fits is refused, in that server's words.
    # Three hundred different sentences (one said again is given once, and would fit).
    goal = "Say hello. " + " ".join(
        f"The quick brown fox {chr(97 + i % 26)}{chr(97 + i // 26)} jumps over the lazy dog."
        for i in range(300))
    with FakeProvider(["ok"], window=2048, prompt_tokens=server_count(1.1),
                      overflow_style=style) as provider:
        run, sink = run_against(provider, goal=goal, tools=["list_files"], context_size=4096)
    assert provider.overflows >= 1
    codes = [c for c, _ in error_codes(sink)]
    # The goal alone is past the person's words' share of this window: said, not fatal.
    assert "words_over_share" in codes
    assert [c for c in codes if c != "words_over_share"] == \
        ["context_length_exceeded"] * provider.overflows
    payload = finished(sink)
    assert (payload["status"], payload["final_answer"]) == ("finished", "All done.")


@pytest.mark.parametrize("text, expected", [
    ("request (4166 tokens) exceeds the available context size (4096 tokens), try "
     "increasing it", (4096, 4166)),
    ("This model's maximum context length is 4096 tokens. However, your request has 4166 "
     "input tokens. Please reduce the length of the input messages.", (4096, 4166)),
    ("'max_tokens' or 'max_completion_tokens' is too large: 512. This model's maximum "
     "context length is 4096 tokens and your request has 3700 input tokens (512 > 4096 - "
     "3700).", (4096, 3700)),
    ("This model's maximum context length is 4096 tokens. However, you requested 4166 tokens "
     "(3654 in the messages, 512 in the completion).", (4096, 3654)),
    ("Requested tokens (4166) exceed context window of 4096", (4096, 4166)),
    ("Input length 6491 exceeds context length 1500", (1500, 6491)),
    ("the input length exceeds the context length", (0, 0)),
    ("model 'x' not found", None),
])
def test_overflow_texts_of_each_server_are_read(text, expected):
    assert parse_overflow(text) == expected


def test_the_client_turns_null_content_into_an_empty_string():
    with FakeProvider(["ok"], null_content_500=True) as provider:
        client = ModelClient(ModelProfile(name="f", model="m", base_url=provider.base_url,
                                          api_key_env=""))
        reply = client.complete([{"role": "user", "content": "hi"},
                                 {"role": "assistant", "content": None}], None, 50)
    assert reply.content == "All done."


def test_text_tool_calls_in_each_form():
    assert text_tool_calls('<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>'
                           '<tool_call>{"name": "b", "arguments": "{}"}</tool_call>') == (
        [("a", {"x": 1}), ("b", "{}")], "")
    assert text_tool_calls('Sure.\n<tool_call>\n{"name": "a", "arguments": {}}') == (
        [("a", {})], "Sure.")
    assert text_tool_calls('{"type": "function", "function": {"name": "a", "arguments": '
                           '"{}"}}')[0] == [("a", "{}")]
    assert text_tool_calls('[{"name": "a", "parameters": {}}, {"tool": "b", "args": {}}]')[0] \
        == [("a", {}), ("b", {})]
    # Data that merely has a "name" is not a call; nor is prose.
    assert text_tool_calls('{"name": "Ada", "age": 3}')[0] == []
    assert text_tool_calls("The total is 42.")[0] == []


def test_an_answer_with_its_own_words_is_not_an_echo():
    snapshot = "<task-snapshot>\nGoal: count the rows\nHard constraints (never drop):\n- " \
               "budget at most 50k\n</task-snapshot>"
    hint = "<system-hint>\n[time] Current time: 2026-12-01 03:00 UTC.\n</system-hint>"
    assert echoed("Goal: count the rows\n- budget at most 50k", [snapshot, hint])
    assert echoed("[time] Current time: 2026-12-01 03:00 UTC.", [snapshot, hint])
    assert not echoed("Goal: count the rows\nThere are 1,204 rows in data/sales.csv.",
                      [snapshot, hint])
    assert not echoed("There are 1,204 rows.", [snapshot, hint])


def test_summary_json_followed_or_preceded_by_text_is_parsed():
    text = ('Here is the summary:\n{"task_overview": ["count rows"], "current_state": '
            '["read data/a.csv"]}\nI hope this helps! {"extra": 1}')
    summary = parse_model_summary(text)
    assert summary.task_overview == ["count rows"]
    assert summary.current_state == ["read data/a.csv"]


# --- counting per model (issue 11): calibrated from usage, or the server's tokenizer
def model_calls(sink: ListSink) -> list[dict]:
    return [e.payload for e in sink.of_type(EventType.MODEL_CALL)]


def test_counting_is_calibrated_from_usage_to_within_two_percent_after_three_calls():
    # The server's tokenizer counts 12 % more than cl100k, every call.
    with FakeProvider(["tool", "tool", "tool", "tool", "ok"],
                      prompt_tokens=server_count(1.12)) as provider:
        run, sink = run_against(provider, tools=["list_files"])
    calls = model_calls(sink)
    assert len(calls) == 5
    errors = [abs(c["estimated_tokens"] - c["input_tokens"]) / c["input_tokens"] for c in calls]
    assert errors[0] > 0.10  # before any usage: the plain cl100k estimate
    assert all(e <= 0.02 for e in errors[3:]), errors
    assert [c["count_source"] for c in calls][:2] == ["estimate", "calibrated"]
    budgets = [e.payload for e in sink.of_type(EventType.BUDGET)]
    assert budgets[0]["count_source"] == "estimate" and budgets[-1]["count_source"] == "calibrated"
    # fit() works against the window divided by the ratio plus a margin.
    assert budgets[-1]["correction"] > 1.12
    assert abs(run.report["token_ratio"] - 1.12) < 0.01 and run.report["token_ratio_calls"] == 5


def test_a_fixed_overhead_plus_a_ratio_is_learnt_to_within_two_percent_after_three_calls():
    # 180 tokens of server framing, a 1.15 tokenizer and 400 tokens of tools in the
    # server's words: the single ratio this replaces was 10-55 % off on such a server.
    with FakeProvider(["tool", "bad_read"] * 3 + ["ok"],
                      prompt_tokens=server_with_overhead(180, 1.15, 400)) as provider:
        run, sink = run_against(provider, tools=["list_files", "read_file"])
    calls = model_calls(sink)
    assert len(calls) == 7
    errors = [abs(c["estimated_tokens"] - c["input_tokens"]) / c["input_tokens"] for c in calls]
    assert errors[0] > 0.10
    assert all(e <= 0.02 for e in errors[3:]), errors
    assert abs(run.report["token_ratio"] - 1.15) < 0.02
    [(kind, overhead)] = run.report["token_overheads"].items()
    assert kind.startswith("auto:2/")
    # The engine's own count includes the tools as JSON: the learnt overhead is what the
    # server adds beyond ratio × that, so only the estimate is checked, not a constant.
    assert calls[-1]["count_kind"] == kind
    # The budget divisor puts a request of window/correction engine tokens at the window
    # less the margin, as the server counts it.
    budgets = [e.payload for e in sink.of_type(EventType.BUDGET)]
    engine_limit = 16_000 / budgets[-1]["correction"]
    server_figure = 180 + 400 + 1.15 * (engine_limit - TokenCounter().tools(
        provider.requests[-1]["body"]["tools"]))
    assert 0.96 * 16_000 <= server_figure <= 16_000


def test_each_kind_of_request_learns_its_own_overhead():
    from agents.counting.calibration import TokenCalibration
    calibration = TokenCalibration()
    counter = lambda e, kind: round((300 if kind == "auto:3/900" else -500) + 1.1 * e)
    for engine in (2000, 2300, 2700):
        calibration.observe(engine, counter(engine, "auto:3/900"), "auto:3/900")
    calibration.observe(2900, counter(2900, "none:3/900"), "none:3/900")
    # One call of the second kind: its overhead is known from the shared slope.
    for kind in ("auto:3/900", "none:3/900"):
        assert abs(calibration.estimate(3100, kind) - counter(3100, kind)) <= 2
    # A kind never seen falls back to the same tool_choice with other tools.
    assert abs(calibration.estimate(3100, "auto:4/1300") - counter(3100, "auto:3/900")) <= 2
    # A state saved before kinds existed still loads.
    calibration.from_state({"pairs": [[1000, 1100]], "calls": 1})
    assert calibration.estimate(2000) == 2200


def test_a_profile_that_learnt_its_ratio_starts_calibrated():
    with FakeProvider(["ok"], prompt_tokens=server_count(1.12)) as provider:
        run, sink = run_against(provider, tools=["list_files"], token_ratio=1.12,
                                token_ratio_calls=7)
    [call] = model_calls(sink)
    assert call["count_source"] == "calibrated"
    assert abs(call["estimated_tokens"] - call["input_tokens"]) / call["input_tokens"] <= 0.02
    assert run.report["token_ratio_calls"] == 8


def test_the_servers_tokenizer_is_used_when_it_offers_one():
    counter = TokenCounter()
    # A tokenizer that splits finer than cl100k: 1.2 tokens per cl100k token.
    with FakeProvider(["tool", "ok"], tokenizer=lambda text: round(counter.text(text) * 1.2),
                      prompt_tokens=server_count(1.2)) as provider:
        run, sink = run_against(provider, tools=["list_files"], server_tokenizer=True)
    assert provider.tokenize_calls > 0
    calls = model_calls(sink)
    # The framing around the texts is fitted: exact only where the report confirmed it.
    assert {c["count_source"] for c in calls} <= {"exact", "calibrated"}
    assert all((c["count_source"] == "exact") == (c["estimated_tokens"] == c["input_tokens"])
               for c in calls)
    # Exact text counts leave only the framing to calibrate: even the first call is close.
    assert abs(calls[0]["estimated_tokens"] - calls[0]["input_tokens"]) \
        / calls[0]["input_tokens"] < 0.05


def test_with_the_servers_tokenizer_the_framing_per_message_and_kind_is_learnt():
    counter = TokenCounter()
    tokenize = lambda text: round(counter.text(text) * 1.2)

    def server(body):  # its tokenizer on the text and the calls, 5 per message (chatml),
        text = 0       # 3 per rendered call, 300 for the tools in its own words
        for m in body["messages"]:
            text += tokenize(m.get("content") or "") + 5
            for call in m.get("tool_calls") or ():
                text += 3 + tokenize(call["function"]["name"] + call["function"]["arguments"])
        return text + (300 if body.get("tools") else 0)
    with FakeProvider(["tool", "bad_read"] * 3 + ["ok"], tokenizer=tokenize,
                      prompt_tokens=server) as provider:
        run, sink = run_against(provider, tools=["list_files", "read_file"],
                                server_tokenizer=True)
    calls = model_calls(sink)
    errors = [abs(c["estimated_tokens"] - c["input_tokens"]) / c["input_tokens"] for c in calls]
    assert all((c["count_source"] == "exact") == (e == 0) for c, e in zip(calls, errors))
    assert all(e <= 0.02 for e in errors[3:]), errors


def test_without_a_tokenize_endpoint_the_profile_falls_back_to_calibration():
    with FakeProvider(["ok"], prompt_tokens=server_count(1.1)) as provider:
        run, sink = run_against(provider, tools=["list_files"], server_tokenizer=True)
    assert model_calls(sink)[0]["count_source"] == "estimate"
    assert run.report["count_source"] == "calibrated"
