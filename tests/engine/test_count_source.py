"""The count source tells the truth at every call, against a fake llama-cpp-python server
(chatml_server): `exact` only for calls the server's tokenizer confirmed; from the call
where exactness is lost (the tokenizer stops answering, the template drops the tools) the
calls, the drawer's budget and the report say what replaced it and why. Escaping is undone
once however counting goes, and a runaway answer stays an output overflow.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from agents.config import ContextConfig, ModelProfile
from agents.counting import server_tokens
from agents.events import EventType, ListSink
from agents.loop.spec import SessionSpec
from agents.runner import run_session
from agents.store.memory import MemoryStore

from .chatml_server import ChatmlServer
from .test_weak_requests import GOAL, part


def session(script: list, *, parts: int = 3, max_turns: int = 10, max_rounds: int = 1,
            **server_kw):
    sink = ListSink()
    with ChatmlServer(script, **server_kw) as server, tempfile.TemporaryDirectory() as tmp:
        for i in range(parts):
            Path(tmp, f"part{i}.txt").write_text(part(i))
        profile = ModelProfile(name="local", model="smollm2-fake", api_key_env="",
                               context_size=4096, base_url=server.base_url,
                               server_tokenizer=True, tool_results_as_user=True,
                               tool_free_summaries=True, single_system_message=True)
        run = run_session(SessionSpec.plan(goal=GOAL, scenario=None, profile=profile,
                                           config=ContextConfig(max_rounds=max_rounds,
                                                                max_turns=max_turns),
                                           tools=["list_files", "read_file"]),
                          session_id="counts", store=MemoryStore(), events=sink,
                          workspace=Path(tmp))
    calls = [e.payload for e in sink.of_type(EventType.MODEL_CALL)]
    return run, server, calls, sink


def errors_of(sink: ListSink, code: str) -> list[dict]:
    return [e.payload for e in sink.of_type(EventType.ERROR) if e.payload["code"] == code]


def test_a_tokenizer_that_stops_answering_ends_exact_counts_from_that_call_with_its_reason(
        monkeypatch):
    # A single-slot server busy with a long answer: its tokenizer stops answering in time
    # after three chat requests. Then the model loops in a tool call's arguments.
    monkeypatch.setattr(server_tokens, "PROBE_TIMEOUT", 0.5)
    script = [("tool", "list_files", {}), ("tool", "read_file", {"path": "part0.txt"}),
              ("tool", "read_file", {"path": "part1.txt"}),
              ("tool", "read_file", {"path": "part2.txt"}), ("runaway", "read_file"), "answer"]
    run, server, calls, sink = session(script, tokenizer_stalls_after=3, stall_s=1.5)
    sources = [c["count_source"] for c in calls]
    lost = sources.index(next(s for s in sources if s != "exact")) + 1  # its call number
    assert lost == 4, sources
    assert all(c["served_tokens"] == c["input_tokens"] for c in calls[:lost - 1])
    assert set(sources[lost - 1:]) <= {"estimate", "calibrated"}, sources
    assert sources[lost - 1] == "estimate" and "calibrated" in sources[lost:]
    [error] = errors_of(sink, "exact_count_lost")
    assert not error["fatal"] and f"from call {lost} on" in error["message"]
    assert "the server's tokenizer stopped answering (ReadTimeout" in error["message"]
    report = run.report["count_source"]
    assert report.startswith(f"exact for calls 1–{lost - 1}, estimate from call {lost}: "
                             "the server's tokenizer stopped answering (ReadTimeout"), report
    budgets = [e.payload for e in sink.of_type(EventType.BUDGET)]
    assert "count_reason" not in budgets[0] and budgets[0]["count_source"] == "exact"
    assert "stopped answering" in budgets[-1]["count_reason"]
    assert budgets[-1]["count_source"] != "exact"
    # The runaway, counted without an exact figure, is still the answer filling the window.
    [runaway] = [c for c in calls if c.get("refused")]
    assert runaway["overflow"] == "output" and not runaway["over_window"], runaway
    assert server.refused == [server.n_ctx + 1]


def test_a_template_that_drops_the_tools_is_a_named_mismatch_and_never_exact():
    # SmolLM2 under its own GGUF template: the server counted 322 where the rendering with
    # tools counted 2 306; the pair was dropped as a misreport and later estimates stayed
    # seven times too high, labelled exact.
    run, server, calls, sink = session([("tool", "list_files", {})] * 4, max_turns=3,
                                       drops_tools=True)
    first = calls[0]
    assert first["count_mismatch"].startswith("the server's template does not render tools: "
                                              f"it reported {first['input_tokens']} prompt")
    assert first["count_source"] == "estimate" and "served_tokens" not in first
    assert all(c["count_source"] != "exact" for c in calls)
    [error] = errors_of(sink, "tools_not_rendered")
    assert "does not render tools" in error["message"] and "--chat_format" in error["action"]
    assert run.report["count_source"].startswith("estimate from call 1: the server's template "
                                                 "does not render tools"), run.report
    # The pair is learnt from, not thrown away: the next request with tools is estimated
    # from what this server counts, not from a rendering with tools.
    agent = [c for c in calls if c["kind"] == "agent"]
    assert len(agent) >= 2
    assert agent[1]["count_source"] == "calibrated"
    assert abs(agent[1]["estimated_tokens"] - agent[1]["input_tokens"]) \
        <= 0.05 * agent[1]["input_tokens"], agent[1]


def test_escaped_arguments_do_not_compound_over_three_round_trips(monkeypatch):
    # The model writes the arguments of its latest call as it read them, escaped
    # (`{&#34;path&#34;: …}`), for the next file; the tokenizer stops answering after the
    # first request, so the rest of the session is not counted exactly: the escaping is
    # still undone once.
    monkeypatch.setattr(server_tokens, "PROBE_TIMEOUT", 0.5)
    script = [("tool", "read_file", {"path": "part0.txt"})] + [("copy", "read_file")] * 3 + [
        "answer"]
    run, server, calls, sink = session(script, parts=4, max_rounds=8, tokenizer_stalls_after=1,
                                       stall_s=1.5)
    assert calls[1]["count_source"] != "exact"  # exactness was lost before the copies
    written = [c["reply"]["tool_calls"][0]["arguments"] for c in calls[1:4]]
    assert written == [f'{{"path": "part{i}.txt"}}' for i in (1, 2, 3)], written
    sent = [call["function"]["arguments"] for request in server.requests
            for m in request["body"]["messages"] for call in m.get("tool_calls") or ()]
    assert sent[-3:] == [f'{{"path": "part{i}.txt"}}' for i in (1, 2, 3)], sent
    assert all("&" not in arguments for arguments in sent), sent
    results = [e.payload for e in sink.of_type(EventType.TOOL_RESULT)]
    assert len(results) == 4 and not any(r.get("error") for r in results), results
