"""The cache-stable layout (feature C17): what is stable comes first, what changes comes last."""
from agents.config import ContextConfig
from agents.events import EventType
from agents.loop.spec import SessionSpec
from agents.scenarios import ScenarioError, parse_scenario

from .helpers import run_scenario, summary_instruction

TAIL_TAGS = ("<snapshot-update>", "<system-hint>")


def docs(n, tokens=1200, users=None):
    steps = []
    for i in range(n):
        if users and i in users:
            steps.append({"user": users[i]})
        steps.append({"tool": "fetch_document", "args": {"tokens": tokens, "topic": f"grid {i}"}})
    return {"name": "t", "goal": "Read documents.", "steps": steps + [{"final": "done"}]}


def agent_requests(out):
    return [r for r in out.transport.requests if not summary_instruction(r)]


def without_tail(messages):
    out = list(messages)
    while out and str(out[-1].get("content") or "").startswith(TAIL_TAGS):
        out.pop()
    return out


def test_between_compactions_each_request_starts_with_the_previous_one_minus_its_tail():
    # Clearing (no compaction here) would change the history: between clears this holds
    # too (tests/engine/test_clearing.py).
    out = run_scenario(docs(8), window=128_000, config=ContextConfig(clear_tool_results=False))
    assert out.run.report["compactions"] == 0
    requests = agent_requests(out)
    assert len(requests) == 9
    for before, after in zip(requests, requests[1:]):
        stable = without_tail(before["messages"])
        assert after["messages"][:len(stable)] == stable
        assert after["tools"] == before["tools"]
    calls = out.payloads(EventType.MODEL_CALL)
    assert all(c["cached_tokens"] > 0 for c in calls[2:])
    report = out.run.report
    assert report["cached_input_tokens"] == sum(c["cached_tokens"] for c in calls)
    assert report["cached_input_tokens"] > report["total_input_tokens"] // 2


def test_new_findings_go_to_the_since_then_block_at_the_end_not_into_the_snapshot():
    out = run_scenario(docs(4), window=128_000)
    requests = agent_requests(out)
    snapshots = {r["messages"][1]["content"] for r in requests}
    assert len(snapshots) == 1 and next(iter(snapshots)).startswith("<task-snapshot>")
    last = requests[-1]["messages"]
    updates = [i for i, m in enumerate(last) if str(m.get("content")).startswith("<snapshot-update>")]
    assert updates and updates[0] > max(i for i, m in enumerate(last) if m["role"] == "tool")
    budgets = out.payloads(EventType.BUDGET)
    assert budgets[-1]["zones"]["since"] > 0 and "since" in budgets[-1]["budgets"]


def test_a_hard_constraint_stated_midway_is_written_into_the_snapshot_at_once():
    users = {2: "Hard constraints: the final report must include a table."}
    out = run_scenario(docs(4, users=users), window=128_000)
    requests = agent_requests(out)
    assert "must include a table" not in requests[1]["messages"][1]["content"]
    assert all("must include a table" in r["messages"][1]["content"] for r in requests[2:])


def test_the_summary_request_repeats_the_agents_prefix_and_puts_the_instruction_last():
    out = run_scenario(docs(12), window=16_000, config=ContextConfig(clear_tool_results=False))
    requests = out.transport.requests
    reused = [i for i, r in enumerate(requests)
              if summary_instruction(r) and requests[i]["messages"][-1]["role"] == "user"
              and requests[i]["messages"][0] == requests[0]["messages"][0]]
    assert reused, "no summary request reused the agent's prefix"
    for i in reused:
        summary, agent = requests[i], requests[i - 1]
        head = summary["messages"][:-1]
        assert agent["messages"][:len(head)] == head
        # The agent's tool_choice too: a change of it voids the cached messages (Anthropic).
        assert summary["tools"] == agent["tools"]
        assert summary["tool_choice"] == agent["tool_choice"] == "auto"
        assert "Messages to fold" in summary["messages"][-1]["content"]
    summaries = [c for c in out.payloads(EventType.MODEL_CALL) if c["kind"] == "summary"]
    assert summaries and all(c["cached_tokens"] >= 1024 for c in summaries)
    compaction = out.payloads(EventType.COMPACTION)[0]
    assert "archive turn" in compaction["summary_after"]


def test_the_rolling_window_does_not_compact_small_history_every_max_rounds():
    out = run_scenario(docs(12, tokens=300), window=128_000, config=ContextConfig(max_rounds=5))
    assert out.run.report["summary_calls"] == 0 and out.run.report["compactions"] == 0


def test_unmanaged_runs_append_only_without_snapshot_or_hints():
    import tempfile
    from pathlib import Path

    from agents.config import ModelProfile
    from agents.events import ListSink
    from agents.runner import run_session
    from agents.sim.transport import sim_http_client
    from agents.store.memory import MemoryStore

    scenario = parse_scenario(docs(6))
    client, transport = sim_http_client(scenario, 10**8)
    with tempfile.TemporaryDirectory() as tmp:
        run = run_session(SessionSpec.plan(goal=scenario.goal, scenario=scenario,
                                           profile=ModelProfile(context_size=10**8),
                                           config=ContextConfig(), unmanaged=True),
                          session_id="u", store=MemoryStore(), events=ListSink(),
                          workspace=Path(tmp), http_client=client)
    assert run.status == "finished"
    bodies = [r["messages"] for r in transport.requests]
    text = "\n".join(str(m.get("content")) for body in bodies for m in body)
    assert "<task-snapshot>" not in text and "<system-hint>" not in text
    for before, after in zip(bodies, bodies[1:]):
        assert after[:len(before)] == before


def test_repeat_steps_expand_and_a_long_scenario_raises_the_turn_cap():
    data = {"name": "r", "goal": "g", "steps": [
        {"repeat": 3, "from": 7, "tool": "fetch_document", "args": {"tokens": 50, "topic": "d{n}"}},
        {"final": "done"}]}
    scenario = parse_scenario(data)
    topics = [s.tool_calls[0]["args"]["topic"] for s in scenario.model_steps[:-1]]
    assert topics == ["d7", "d8", "d9"]
    out = run_scenario(data, window=128_000, config=ContextConfig(max_turns=2))
    assert out.run.status == "finished" and out.run.turns == 4
    try:
        parse_scenario({"name": "r", "goal": "g", "steps": [{"repeat": 0, "tool": "x"}]})
    except ScenarioError as exc:
        assert ("steps[0].repeat: expected a whole number of at least 1 and at most 100000, "
                "got 0") in str(exc)
    else:
        raise AssertionError("repeat 0 was accepted")


def test_report_has_cost_cached_output_and_summary_call_keys():
    out = run_scenario(docs(12), window=16_000)
    report = out.run.report
    for key in ("cached_input_tokens", "output_tokens", "summary_calls", "cost",
                "engine_ms_per_call", "engine_ms_per_turn_median"):
        assert key in report
    assert set(report["cost"]) == {"openai-like", "anthropic-like", "deepseek-like", "profile"}
    assert report["summary_calls"] == sum(1 for c in report["model_calls"] if c["kind"] == "summary")
    assert report["output_tokens"] == sum(c["output_tokens"] for c in out.payloads(EventType.MODEL_CALL))
    assert report["cost"]["openai-like"] > 0


def test_a_request_stays_within_the_sum_of_its_zone_budgets_tail_included():
    # The rolling trigger pays the "since then" tail from the history's allowance, so a
    # request (hints aside) never outgrows system + snapshot + words + summary + history
    # while those zones keep to their budgets (at 128k the fixed part is far below its own).
    # Small rounds and a high round limit: the token count decides, in fine steps.
    out = run_scenario(docs(150, tokens=400), window=128_000,
                       config=ContextConfig(max_rounds=40))
    budgets = out.payloads(EventType.BUDGET)
    assert out.run.report["compactions"] >= 1
    assert any(p["zones"]["since"] > 0 for p in budgets)
    for p in budgets:
        assert all(p["zones"][z] <= p["budgets"][z] for z in ("system", "snapshot", "words",
                                                              "summary"))
        cap = sum(p["budgets"][z] for z in ("system", "snapshot", "words", "summary", "history"))
        assert p["input_tokens"] - p["zones"]["hints"] <= cap, p["zones"]


def test_the_since_then_block_is_counted_exactly_encoding_only_its_new_lines():
    from agents.context.working import WorkingContext
    from agents.counting.tokens import TokenCounter

    class Recording(TokenCounter):
        def encode_count(self, text):
            self.chars += len(text)
            return super().encode_count(text)

    counter = Recording()
    counter.chars = 0
    ctx = WorkingContext(counter=counter, config=ContextConfig(), window=128_000, system_prompt="s")
    frozen = "<task-snapshot>\nGoal: read the grid documents.\n</task-snapshot>"
    ctx.set_snapshot(frozen)
    lines = frozen.splitlines()
    encodes = []
    for turn in range(1, 40):
        lines.insert(-1, f"- finding {turn}: grid {turn} output was {turn * 7.5} GWh (网格 {turn})")
        before = counter.chars
        ctx.set_snapshot("\n".join(lines))
        encodes.append(counter.chars - before)
        data = {"role": "user", "content": "\n".join(
            ["<snapshot-update>", ctx._since_msg.text.splitlines()[1],
             *lines[2:-1], "</snapshot-update>"])}
        assert ctx._since_msg.data == data
        assert ctx._since_msg.tokens == TokenCounter().message(data)  # a fresh, uncached count
    # Each turn encodes its new line only, not the whole block that grew to 39 lines.
    assert max(encodes[3:]) <= len(lines[-2]) + 1, encodes


def test_the_tool_schemas_are_written_out_once_per_session_not_per_call(monkeypatch):
    import json
    import types

    import agents.loop.calls
    dumped = []
    counting = types.SimpleNamespace(dumps=lambda obj, **kw: dumped.append(obj) or json.dumps(obj, **kw))
    monkeypatch.setattr(agents.loop.calls, "json", counting)
    out = run_scenario(docs(8), window=128_000)
    calls = out.payloads(EventType.MODEL_CALL)
    assert len(calls) == 9 and json.loads(calls[0]["request"]["tools"])  # stored in full once
    assert all(c["request"]["tools"] == {"tools_of_call": calls[0]["call"]} for c in calls[1:])
    assert len(dumped) == 1


def test_a_follow_up_the_history_holds_whole_waits_in_the_tail_without_restarting_the_cache():
    # A plain follow-up (no hard constraint) in another language: its sentence is in the
    # request verbatim as the person's message, so the frozen snapshot stays and every
    # later request still starts with the one before it.
    follow_up = "Añade también el margen bruto por región."
    out = run_scenario(docs(6, users={3: follow_up}), window=128_000,
                       config=ContextConfig(clear_tool_results=False))
    assert out.run.report["compactions"] == 0
    requests = agent_requests(out)
    for before, after in zip(requests, requests[1:]):
        stable = without_tail(before["messages"])
        assert after["messages"][:len(stable)] == stable
    assert len({r["messages"][1]["content"] for r in requests}) == 1
    last = requests[-1]["messages"]
    assert any(m["role"] == "user" and m["content"] == follow_up for m in last)
    tail = [m["content"] for m in last if str(m.get("content")).startswith("<snapshot-update>")]
    assert tail and follow_up in tail[0]  # listed as in force, in the tail until a freeze
    assert out.run.report["person_words_kept"] == 1.0


def test_a_follow_up_with_a_hard_constraint_is_frozen_into_the_snapshot_at_once():
    out = run_scenario(docs(6, users={3: "Never delete any file."}), window=128_000,
                       config=ContextConfig(clear_tool_results=False))
    snapshots = [r["messages"][1]["content"] for r in agent_requests(out)]
    assert "Never delete any file." not in snapshots[0]
    assert "Never delete any file." in snapshots[-1] and len(set(snapshots)) == 2
