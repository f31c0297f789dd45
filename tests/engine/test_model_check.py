"""The model check (agents/model_check.py) against fake local servers: what each server
configuration really does, and a verdict with the fix in plain words."""
from __future__ import annotations

import socket

import pytest

from agents.config import ModelProfile
from agents.model_check import (FAIL, PASS, WARN, CheckFailed, CheckResult, check_model,
                                format_result)
from tests.engine.check_server import CheckServer
from tests.engine.fake_provider import FakeProvider


def local_profile(base_url: str, **overrides) -> ModelProfile:
    """The `local` profile manage.py localmodel registers, pointed at `base_url`."""
    settings = dict(name="local", model="smollm2-135m-instruct", base_url=base_url,
                    local=True, api_key_env="", context_size=4096, server_tokenizer=True,
                    tool_results_as_user=True, single_system_message=True)
    settings.update(overrides)
    return ModelProfile(**settings)


def verdicts(result: CheckResult) -> dict[str, str]:
    return {c.name: c.verdict for c in result.capabilities}


def test_a_good_server_passes_every_capability_and_counts_exactly():
    with CheckServer(n_ctx=4096) as server:
        result = check_model(local_profile(server.base_url))
    assert verdicts(result) == {"reachable": PASS, "window": PASS, "tools": PASS,
                                "tool_choice": PASS, "counting": PASS, "speed": PASS}
    assert result.ok and result.server == "llama-cpp-python"
    assert result.get("window").figures["served"] == 4096
    counting = result.get("counting")
    assert counting.figures["source"] == "exact"
    assert counting.figures["errors"] and set(counting.figures["errors"]) == {0}
    assert result.get("speed").figures["generated_tokens"] > 0
    # What the fix line would say is said by nobody: nothing to fix.
    assert all(not c.fix for c in result.capabilities)


def test_a_template_that_drops_tools_fails_with_the_fix():
    with CheckServer(template="own") as server:
        result = check_model(local_profile(server.base_url))
    tools = result.get("tools")
    assert tools.verdict == FAIL and result.tools_failed and not result.ok
    assert tools.figures["with_tools"] == tools.figures["without_tools"]
    assert "drops tools" in tools.found
    assert "--chat_format chatml-function-calling" in tools.fix
    # Its counts are not the chatml-function-calling rendering's: never called exact.
    counting = result.get("counting")
    assert counting.figures["source"] != "exact" and "Exact counting is off" in counting.found
    # Measured on requests without tools, as sessions on this profile send them.
    assert "sessions on this profile run with tools off" in counting.found
    assert len(counting.figures["errors"]) == sum(
        not r["tools"] for r in counting.figures["requests"]) < len(counting.figures["requests"])
    printed = format_result(result)
    assert "[FAIL] Tools rendered" in printed and "fix: Start llama-cpp-python" in printed


def test_llama_server_says_its_window_and_renders_the_request_for_the_tools_check():
    with CheckServer(kind="llama.cpp", template="own", n_ctx=2048) as server:
        result = check_model(local_profile(server.base_url))
    assert result.server == "llama.cpp"
    window = result.get("window")
    assert window.verdict == FAIL and window.figures["how"] == "n_ctx from /props"
    tools = result.get("tools")
    assert tools.verdict == FAIL and "/apply-template" in tools.figures["how"]
    assert "--jinja" in tools.fix
    # The server's tokenizer counts each text, the framing is fitted: never called exact.
    counting = result.get("counting")
    assert counting.figures["source"] == "calibrated"
    assert {r["source"] for r in counting.figures["requests"]} <= {"calibrated", "estimate"}


def test_a_window_smaller_than_the_profiles_fails_naming_both():
    with CheckServer(n_ctx=2048) as server:
        result = check_model(local_profile(server.base_url, context_size=4096))
        assert server.refused  # the probe just over the profile's window was refused
    window = result.get("window")
    assert window.verdict == FAIL
    assert window.figures["served"] == 2048 and window.figures["profile"] == 4096
    assert "2048" in window.fix and "--n_ctx 4096" in window.fix
    assert verdicts(result)["tools"] == PASS


def test_the_window_probe_passes_the_window_when_the_tokenizer_adds_its_own_tokens():
    # llama-cpp-python's tokenizer adds a start token the chat prompt does not hold: a probe
    # sized from the average of a short sample fell inside an equal window and was read
    # whole (minutes on a CPU) instead of refused.
    with CheckServer(n_ctx=4096, tokenizer_start=16) as server:
        result = check_model(local_profile(server.base_url, context_size=4096))
        assert server.refused and min(server.refused) > 4096
    window = result.get("window")
    assert window.verdict == PASS and window.figures["served"] == 4096


def test_a_larger_window_passes_and_a_remote_profile_is_not_probed():
    with CheckServer(n_ctx=8192) as server:
        result = check_model(local_profile(server.base_url, context_size=4096))
        assert result.get("window").verdict == PASS
        assert result.get("window").figures["served"] > 4096
        probed = len(server.requests)
        # Not local (listed hosts): no request as long as the window is sent.
        remote = check_model(local_profile(server.base_url, local=False))
        assert len(server.requests) - probed == probed - 1
    assert remote.get("window").verdict != FAIL and "served" not in remote.get("window").figures


def test_tool_choice_none_ignored_fails_unless_summaries_go_without_tools():
    with CheckServer(ignores_none=True) as server:
        result = check_model(local_profile(server.base_url))
        relaxed = check_model(local_profile(server.base_url, tool_free_summaries=True))
    choice = result.get("tool_choice")
    assert choice.verdict == FAIL and choice.figures["called"] == ["get_time"]
    assert "Tool-free summaries" in choice.fix
    assert relaxed.get("tool_choice").verdict == WARN
    assert verdicts(result)["tools"] == PASS


def test_an_unreachable_server_is_said_plainly():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed once the block ends: nothing listens there
    with pytest.raises(CheckFailed, match="does not answer.*Start it, or correct"):
        check_model(local_profile(f"http://127.0.0.1:{port}/v1"))


def test_a_server_that_answers_garbage_is_said_plainly():
    with CheckServer(garbage=True) as server:
        with pytest.raises(CheckFailed, match="not an OpenAI-compatible API.*nginx"):
            check_model(local_profile(server.base_url))


def test_a_server_that_does_not_answer_in_time_is_said_plainly():
    with FakeProvider(default="hang") as provider:
        with pytest.raises(CheckFailed,
                           match=r"did not (answer|finish) the plain request within 0\.5 s"):
            check_model(local_profile(provider.base_url, server_tokenizer=False), timeout=0.5)


def test_the_simulated_model_and_a_refused_url_are_not_checked():
    with pytest.raises(CheckFailed, match="simulated model"):
        check_model(ModelProfile(name="sim"))
    refused = local_profile("http://169.254.169.254/v1")
    with pytest.raises(CheckFailed, match="may not be asked.*link-local"):
        check_model(refused)


def test_a_result_reads_back_from_its_plain_form():
    with CheckServer(template="own") as server:
        result = check_model(local_profile(server.base_url))
    again = CheckResult.from_dict(result.to_dict())
    assert again == result and again.to_dict()["ok"] is False


def test_ollama_with_a_model_without_tools_and_a_window_it_cuts_to():
    with CheckServer(kind="ollama", template="own", n_ctx=2048) as server:
        result = check_model(local_profile(server.base_url, server_tokenizer=False))
    assert result.server == "ollama"
    tools = result.get("tools")
    assert tools.verdict == FAIL and "does not support tools" in tools.found
    assert "tools-capable model" in tools.fix
    assert result.get("tool_choice").verdict == "skip"
    window = result.get("window")  # cut without a word: the reported count says it
    assert window.verdict == FAIL and window.figures["served"] == 2048
    assert "cut a request" in window.found


def test_ollama_says_its_num_ctx_to_a_remote_check():
    with CheckServer(kind="ollama", n_ctx=2048, show_num_ctx=True) as server:
        result = check_model(local_profile(server.base_url, local=False,
                                           server_tokenizer=False))
    window = result.get("window")
    assert window.verdict == FAIL and window.figures["how"] == "num_ctx from /api/show"
    assert "PARAMETER num_ctx 4096" in window.fix
    assert result.get("tools").verdict == PASS


def test_a_server_that_drips_its_answer_is_cut_at_the_call_timeout():
    with FakeProvider(default="drip") as provider:
        with pytest.raises(CheckFailed, match=r"did not finish the plain request within 1 s"):
            check_model(local_profile(provider.base_url, server_tokenizer=False), timeout=1)
