"""The count source tells the truth at every call, against a fake llama-cpp-python server
(chatml_server): `exact` only for calls the server's tokenizer confirmed; from the call
where exactness is lost (the tokenizer stops answering, the template drops the tools) the
calls, the drawer's budget and the report say what replaced it and why. Escaping is undone
once however counting goes, and a runaway answer stays an output overflow. On a server
that streams (streaming_server), a runaway answer is cut at the output reserve and a call
abandoned at its deadline is closed: the server sees its client go.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from agents.config import ContextConfig, ModelProfile
from agents.counting import server_tokens
from agents.counting.calibration import TokenCalibration
from agents.events import EventType, ListSink
from agents.loop.spec import SessionSpec
from agents.provider.client import STREAM_SLACK
from agents.runner import run_session
from agents.store.memory import MemoryStore

from .chatml_server import ChatmlServer
from .streaming_server import StreamingServer
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


# --- a slot held by a runaway answer: streamed, and cut at the output reserve


def streamed_session(script: list, unstreamable_tools: bool = False, **profile_kw):
    sink = ListSink()
    with StreamingServer(script, unstreamable_tools=unstreamable_tools) as server, \
            tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "part0.txt").write_text(part(0))
        profile = ModelProfile(name="local", model="fake", api_key_env="", context_size=8192,
                               base_url=server.base_url, local=True, **profile_kw)
        run = run_session(SessionSpec.plan(goal=GOAL, scenario=None, profile=profile,
                                           config=ContextConfig(max_turns=4),
                                           tools=["list_files", "read_file"]),
                          session_id="streamed", store=MemoryStore(), events=sink,
                          workspace=Path(tmp))
        for request in server.requests:  # the server is done with each one
            assert request["ended"].wait(30)
    return run, server, [e.payload for e in sink.of_type(EventType.MODEL_CALL)], sink


def test_a_runaway_stream_is_cut_at_the_reserve_and_recorded_as_an_output_overflow():
    # A server that does not bound tool-call arguments by max_tokens: without a cut the
    # model writes `data/data/…` until the window is full, holding the server's only slot.
    run, server, calls, sink = streamed_session(
        [("runaway", "read_file"), ("answer", "Read part0.txt: North revenue 1000.00.")])
    runaway = server.requests[0]
    assert runaway["body"]["stream"] and runaway["disconnected"]
    assert runaway["chunks"] < 20_000  # it stopped because the client went, not at its end
    cut = calls[0]
    assert cut["refused"] and cut["overflow"] == "output" and not cut["over_window"], cut
    assert "ran past the output reserve" in cut["error"] and "read_file" in cut["error"]
    written = int(cut["error"].split("had written ")[1].split()[0])
    assert written == runaway["body"]["max_tokens"] + STREAM_SLACK + 1
    assert [e.payload["code"] for e in sink.of_type(EventType.ERROR)][0] == "output_overflow"
    # The next answer streams whole, with the server's usage: counted as usual.
    assert run.status == "finished" and calls[-1]["input_tokens"] > 0
    assert calls[-1]["reply"]["content"] == "Read part0.txt: North revenue 1000.00."


def test_a_call_abandoned_at_its_deadline_is_closed_so_the_server_stops_generating():
    run, server, calls, sink = streamed_session(
        [("slow", ""), ("answer", "Read part0.txt: North revenue 1000.00.")],
        call_timeout=1.0)
    slow = server.requests[0]
    assert slow["step"] == "slow" and slow["disconnected"], slow
    assert "deadline_exceeded" in [e.payload["code"] for e in sink.of_type(EventType.ERROR)]
    assert run.status == "finished"


def test_a_server_that_breaks_off_a_streamed_request_with_tools_is_asked_again_whole():
    # llama-cpp-python whose tokenizer was not asked for: it cannot stream a tool call the
    # model chose, and breaks the stream off; the request goes again whole, and so do the
    # later ones.
    run, server, calls, sink = streamed_session(
        [("tool", "read_file"), ("answer", "Read part0.txt: North revenue 1000.00.")],
        unstreamable_tools=True)
    assert [(r["step"], bool(r["body"].get("stream"))) for r in server.requests[:2]] == [
        ("broken off", True), ("tool", False)]
    assert not any(r["body"].get("stream") for r in server.requests[1:])
    assert calls[0]["reply"]["tool_calls"][0]["name"] == "read_file"
    assert run.status == "finished" and all(c["input_tokens"] > 0 for c in calls)


def test_the_report_says_the_latest_sources_before_exactness_was_lost_and_what_followed():
    # llama.cpp's /tokenize: the framing is fitted, so calls go between exact (the figure
    # matched the report) and calibrated; then the tokenizer stops answering.
    calibration = TokenCalibration(exact=True)
    for call in range(1, 11):
        calibration.label(call, "exact" if call % 3 else "calibrated")
    assert calibration.summary() == "exact"  # never lost: the source as it stands
    assert calibration.lose(11, "the server's tokenizer stopped answering", text_exact=False)
    assert not calibration.lose(12, "another reason", text_exact=False)  # the first one holds
    for call in range(11, 14):
        calibration.label(call, calibration.source)
    assert calibration.summary() == ("…, exact for calls 7–8, calibrated for call 9, exact for "
                                     "call 10, estimate from call 11: the server's tokenizer "
                                     "stopped answering")
    for call in range(14, 400):
        calibration.label(call, "exact" if call % 2 else "calibrated")
    assert len(calibration.spans) == 64
