"""Manual compaction (C13), compaction hooks (C14) and oversized tool results (issue 4)."""
import json

from agents.config import ContextConfig
from agents.events import EventType
from agents.store.memory import MemoryStore
from agents.tools.registry import default_registry

from .helpers import run_scenario, summary_instruction


def docs(n):
    steps = [{"tool": "fetch_document", "args": {"tokens": 1200, "topic": f"t{i}"}} for i in range(n)]
    return {"name": "t", "goal": "Read documents.", "steps": steps + [{"final": "done"}]}


class ArmedStore(MemoryStore):
    """A person presses "compact now" with focus instructions before turn 3."""

    def __init__(self):
        super().__init__()
        self.asked = 0

    def take_compaction_request(self, session_id):
        self.asked += 1
        return "keep the unit costs" if self.asked == 4 else None


def test_compact_now_from_the_dashboard_runs_with_its_instructions():
    out = run_scenario(docs(4), window=128_000, store=ArmedStore())
    manual = [c for c in out.payloads(EventType.COMPACTION) if c["trigger"] == "manual"]
    assert len(manual) == 1 and manual[0]["instructions"] == "keep the unit costs"
    assert manual[0]["archived_turns"] and not manual[0]["noop"]
    instructions = [summary_instruction(r) for r in out.transport.requests
                    if summary_instruction(r)]
    assert "keep the unit costs" in instructions[0]


def test_compact_now_with_nothing_old_is_reported_as_a_noop():
    store = MemoryStore()
    store.compaction_requests["t1"] = ""
    out = run_scenario(docs(1), window=128_000, store=store)
    first = out.payloads(EventType.COMPACTION)[0]
    assert first["trigger"] == "manual" and first["noop"] and out.run.report["compactions"] == 0


def test_compress_context_tool_exists_only_when_enabled():
    assert "compress_context" not in default_registry(ContextConfig()).names()
    assert "compress_context" in default_registry(
        ContextConfig(compression_tool_enabled=True)).names()


def test_model_calls_compress_context_and_the_next_turn_compacts():
    scenario = docs(3)
    scenario["steps"].insert(3, {"tool": "compress_context", "args": {"instructions": "keep totals"}})
    out = run_scenario(scenario, window=128_000,
                       config=ContextConfig(compression_tool_enabled=True))
    manual = [c for c in out.payloads(EventType.COMPACTION) if c["trigger"] == "manual"]
    assert manual and manual[0]["instructions"] == "keep totals"


def test_hooks_wrap_compaction_in_onion_order():
    import agents.loop.agent_loop as loop_module

    order = []

    def outer(call, proceed):
        order.append(("outer-before", call.trigger))
        outcome = proceed()
        order.append(("outer-after", bool(outcome)))
        return outcome

    def inner(call, proceed):
        order.append(("inner-before", call.trigger))
        return proceed()

    original = loop_module.SessionSpec.__init__

    def with_hooks(self, *a, **kw):
        original(self, *a, **kw)
        self.compress_hooks = [outer, inner]

    loop_module.SessionSpec.__init__ = with_hooks
    try:
        out = run_scenario("retrieval-6x1600", config=ContextConfig(clear_tool_results=False))
    finally:
        loop_module.SessionSpec.__init__ = original
    assert order[:3] == [("outer-before", order[0][1]), ("inner-before", order[0][1]),
                         ("outer-after", True)]
    assert out.run.report["compactions"] == sum(1 for o in order if o == ("outer-after", True))


def test_results_far_over_their_limits_stay_bounded_and_readable():
    out = run_scenario("oversized-results", window=16_000)
    assert out.run.status == "finished"
    assert out.run.report["over_window_requests"] == 0
    results = out.payloads(EventType.TOOL_RESULT)
    cut = [r for r in results if r["truncated"]]
    assert cut, "the scenario's results are over their limits"
    for r in cut:
        raw = out.store.read_ref("t1", r["ref"])
        assert raw is not None and len(raw) > r["kept_chars"]
    assert out.payloads(EventType.HINT_BLOCK)
    for body in out.transport.requests:
        for m in body["messages"]:
            assert len(json.dumps(m)) < 16_000 * 6


def test_tool_result_limit_is_enforced_in_tokens_in_the_request():
    from agents.counting.tokens import TokenCounter
    counter = TokenCounter()
    scenario = {"name": "big", "goal": "Read.", "steps": [
        {"tool": "fetch_document", "args": {"tokens": 1800, "topic": "grid storage"}},
        {"final": "done"}]}
    out = run_scenario(scenario, window=128_000, config=ContextConfig(tool_result_limit=300))
    tool_messages = [m for m in out.transport.requests[-1]["messages"] if m["role"] == "tool"]
    assert tool_messages and counter.message(tool_messages[0]) <= 300
    result = out.payloads(EventType.TOOL_RESULT)[0]
    assert result["truncated"] and result["ref"] in tool_messages[0]["content"]
