"""The loop end to end: real SDK, simulated model, real tools, in-memory store."""

from agents.compaction.words_check import listed_in_force
from agents.compaction.summary import TRUNCATION_MARKER
from agents.config import ContextConfig
from agents.counting.tokens import TokenCounter
from agents.events import EventType

from .helpers import run_scenario, summary_instruction

COUNTER = TokenCounter()


def docs(n, tokens=1600, **extra):
    steps = [{"tool": "fetch_document", "args": {"tokens": tokens, "topic": f"topic {i}"}}
             for i in range(n)]
    return {"name": "t", "goal": "Read documents.", "steps": steps + [{"final": "done"}], **extra}


def test_retrieval_at_window_4000_never_exceeds_the_window():
    out = run_scenario("retrieval-6x1600")
    report = out.run.report
    assert report["status"] == "finished"
    assert report["over_window_requests"] == 0
    assert report["compactions"] >= 1
    # Clearing old results makes the room: no summary call is needed.
    kinds = {c["kind"] for c in report["model_calls"]}
    assert kinds == {"agent"} and report["clears"] >= 1
    summarized = run_scenario("retrieval-6x1600", config=ContextConfig(clear_tool_results=False))
    assert {c["kind"] for c in summarized.run.report["model_calls"]} == {"agent", "summary"}
    for call in summarized.payloads(EventType.MODEL_CALL):
        assert call["input_tokens"] <= call["limit"]
    for call in out.payloads(EventType.MODEL_CALL):
        assert call["input_tokens"] <= call["limit"]


def test_engine_count_matches_the_request_actually_sent():
    out = run_scenario("retrieval-6x1600")
    calls = out.payloads(EventType.MODEL_CALL)
    assert len(calls) == len(out.transport.requests)
    for call, body in zip(calls, out.transport.requests):
        exact = COUNTER.request(body["messages"], body.get("tools"))
        assert abs(call["engine_tokens"] - exact) <= 0.02 * exact
        assert call["input_tokens"] == exact  # what the provider counted


def test_tool_calls_never_lose_their_results_in_any_request():
    out = run_scenario("retrieval-6x1600")
    for body in out.transport.requests:
        msgs = body["messages"]
        for i, m in enumerate(msgs):
            if m.get("tool_calls"):
                ids = [c["id"] for c in m["tool_calls"]]
                following = [x.get("tool_call_id") for x in msgs[i + 1:i + 1 + len(ids)]]
                assert following == ids
            if m["role"] == "tool":
                before = [x for x in msgs[:i] if x.get("tool_calls")]
                assert before and m["tool_call_id"] in [c["id"] for c in before[-1]["tool_calls"]]


def test_every_raw_message_is_archived_untruncated():
    out = run_scenario(docs(3))
    rows = out.store.archived_rows("t1")
    tool_rows = [r for r in rows if r["role"] == "tool"]
    assert len(tool_rows) == 3
    for result in out.payloads(EventType.TOOL_RESULT):
        assert out.store.read_ref("t1", result["ref"]) is not None


def test_compaction_event_records_trigger_zones_and_audit():
    out = run_scenario("retrieval-6x1600", config=ContextConfig(clear_tool_results=False))
    compactions = [c for c in out.payloads(EventType.COMPACTION) if c["archived_turns"]]
    assert compactions
    first = compactions[0]
    assert first["trigger"] in {"rolling", "budget"}
    assert first["after"]["history"] < first["before"]["history"]
    assert first["summary_after"] and first["summary_after"] != first["summary_before"]
    assert first["audit"]["missing_anchors"] == [] and first["audit"]["snapshot_present"]
    assert first["refs"]


def test_hard_constraint_survives_every_later_request():
    scenario = docs(12)
    scenario["steps"].insert(1, {"user": "The final report must include a table."})
    out = run_scenario(scenario, window=6000)
    assert out.run.report["compactions"] >= 2
    stated = next(e.turn for e in out.sink.of_type(EventType.USER_MESSAGE)
                  if "must include a table" in e.payload["text"])
    for e in out.sink.of_type(EventType.MODEL_CALL):
        if e.turn >= stated:
            text = "\n".join(str(m.get("content")) for m in e.payload["messages"])
            assert "must include a table" in text


def test_later_constraint_replaces_the_earlier_one():
    scenario = docs(8)
    scenario["steps"].insert(0, {"user": "The budget is at most 50k tokens."})
    scenario["steps"].insert(5, {"user": "Change the budget to at most 80k tokens."})
    out = run_scenario(scenario, window=6000)
    changed = [p for p in out.payloads(EventType.ANCHOR_CHANGED) if p["action"] == "changed"]
    assert changed and "50k" in changed[0]["old"] and "80k" in changed[0]["new"]
    added = {p["new"]: p["id"] for p in out.payloads(EventType.ANCHOR_CHANGED)
             if p["action"] == "added"}
    old_id = changed[0]["old_id"]  # the event names both; the old one stays, inactive
    assert old_id == added["The budget is at most 50k tokens"] != changed[0]["id"]
    assert not out.store._anchors["t1"][old_id].active
    last = out.transport.requests[-1]["messages"]
    snapshot = last[1]["content"]
    # In force only the new limit; the old one is shown with the sentence that changed it.
    listed = "\n".join(listed_in_force(snapshot))
    assert "80k" in listed and "50k" not in listed
    assert ("- The budget is at most 50k tokens.\n  later, turn 4: Change the budget to at "
            "most 80k tokens.") in snapshot


def test_a_constraint_on_another_budget_never_replaces_the_first():
    scenario = docs(8)
    scenario["steps"].insert(0, {"user": "The budget is at most 50k tokens."})
    scenario["steps"].insert(5, {"user": "The marketing budget is at most 20k EUR."})
    out = run_scenario(scenario, window=6000)
    assert not [p for p in out.payloads(EventType.ANCHOR_CHANGED) if p["action"] == "changed"]
    snapshot = out.transport.requests[-1]["messages"][1]["content"]
    assert "at most 50k tokens" in snapshot and "at most 20k EUR" in snapshot


def test_hints_are_injected_last_never_into_the_system_prompt():
    out = run_scenario(docs(2))
    hints = out.payloads(EventType.HINT_BLOCK)
    assert any(h["kind"] == "time" for h in hints)
    first = out.transport.requests[0]["messages"]
    assert "<system-hint>" not in first[0]["content"]
    assert "<system-hint>" in first[-1]["content"]


def test_summary_failure_falls_back_to_truncation_and_keeps_constraints(monkeypatch):
    import agents.sim.transport as sim
    monkeypatch.setattr(sim.SummaryPlayer, "answer", lambda self, messages, **_: "not json at all")
    scenario = docs(8)
    scenario["steps"].insert(0, {"user": "The report must include a table."})
    out = run_scenario(scenario, window=5000)
    fallbacks = [c for c in out.payloads(EventType.COMPACTION) if c["fallback"]]
    assert fallbacks
    assert any(e["code"] == "summary_failed" for e in out.payloads(EventType.ERROR))
    last = out.transport.requests[-1]["messages"]
    text = "\n".join(str(m.get("content")) for m in last)
    assert TRUNCATION_MARKER in text and "must include a table" in text
    assert out.run.report["over_window_requests"] == 0


def test_summary_failure_without_fallback_fails_clearly(monkeypatch):
    import agents.sim.transport as sim
    monkeypatch.setattr(sim.SummaryPlayer, "answer", lambda self, messages, **_: "not json at all")
    out = run_scenario(docs(8), window=5000,
                       config=ContextConfig(compression_fallback_to_truncation=False))
    assert out.run.status == "failed"
    assert "compression_fallback_to_truncation is off" in out.run.result.error


def test_overflow_error_from_provider_is_recovered():
    # The profile claims 128k tokens but the provider only takes 7 000.
    out = run_scenario(docs(6), window=128_000, transport_window=7000)
    assert out.run.status == "finished"
    errors = out.payloads(EventType.ERROR)
    assert any(e["code"] == "context_length_exceeded" and not e["fatal"] for e in errors)
    assert any(c["trigger"] == "overflow" for c in out.payloads(EventType.COMPACTION))


def test_cut_answer_is_continued_not_returned_cut():
    final = " ".join(f"Line {i}: revenue grew {i} percent." for i in range(400))
    scenario = {"name": "long-answer", "goal": "Write a long report.",
                "steps": [{"tool": "list_files", "args": {}}, {"final": final}]}
    out = run_scenario(scenario, window=16_000)
    assert out.run.final_answer == final
    assert any(e["code"] == "finish_reason_length" for e in out.payloads(EventType.ERROR))


def test_resume_continues_from_the_saved_turn_and_keeps_the_report():
    import agents.sim.transport as sim
    from agents.store.memory import MemoryStore

    store = MemoryStore()
    scenario = docs(8)
    scenario["steps"].insert(0, {"user": "The report must include a table."})
    scenario["expect"] = {"tier1": ["must include a table"]}
    original = sim.SimTransport.handle_request
    calls = {"n": 0}

    class WorkerKilled(BaseException):
        pass

    def dying(self, request):
        calls["n"] += 1
        if calls["n"] == 6:
            raise WorkerKilled()
        return original(self, request)

    sim.SimTransport.handle_request = dying
    try:
        try:
            run_scenario(scenario, window=6000, store=store)
        except WorkerKilled:
            pass
    finally:
        sim.SimTransport.handle_request = original
    saved = store.load_state("t1")
    assert saved and saved["turn"] >= 2
    out = run_scenario(scenario, window=6000, store=store)
    assert out.run.status == "finished"
    # stated before the crash, counted after it: the report resumed with the loop
    assert out.run.report["anchor_survival"] == 1.0
    # The per-call list is this process's (the state keeps totals, not every call)...
    assert len(out.run.report["model_calls"]) == len(out.transport.requests)
    # ...the totals cover the calls before the crash too.
    assert out.run.report["model_call_count"] > len(out.transport.requests)
    assert out.run.report["total_input_tokens"] > sum(
        c["input_tokens"] for c in out.run.report["model_calls"])
    started = out.payloads(EventType.SESSION_STARTED)[0]
    assert started["resumed"] is True
    fetched = [r for r in store.archived_rows("t1") if r["role"] == "tool"]
    assert len(fetched) <= 8 + 1  # at most the turn in flight is repeated
    agent_requests = [r["messages"] for r in out.transport.requests
                      if not summary_instruction(r)]
    assert any("[resumed]" in str(m.get("content")) for m in agent_requests[0])


def test_an_admin_edit_mid_turn_is_not_overwritten_by_the_engine():
    from agents.store.memory import MemoryStore

    class EditingStore(MemoryStore):
        """A person edits the oldest tool finding while the engine is mid-turn."""

        edited = None

        def save_anchor(self, session_id, anchor):
            saved = super().save_anchor(session_id, anchor)
            tool = [a for a in self.load_anchors(session_id) if a.source == "tool"]
            if self.edited is None and len(tool) > 10:  # the cap is about to retire the oldest
                target = tool[0]
                target.text, target.source = target.text + " (EUR)", "admin"
                super().save_anchor(session_id, target)
                self.edited = target.id
            return saved

    store = EditingStore()
    out = run_scenario(docs(12), window=128_000, store=store)
    assert store.edited is not None
    kept = [a for a in store.load_anchors("t1") if a.id == store.edited]
    assert kept and kept[0].text.endswith("(EUR)")
    admin = [p for p in out.payloads(EventType.ANCHOR_CHANGED) if p["source"] == "admin"]
    assert admin and admin[0]["new"].endswith("(EUR)")
    assert any("(EUR)" in str(m.get("content")) for m in out.transport.requests[-1]["messages"])


def test_an_empty_model_answer_is_asked_again_then_fails_clearly():
    scenario = {"name": "mute", "goal": "Say something.", "steps": [{"final": ""}]}
    out = run_scenario(scenario)
    assert out.run.status == "failed"
    assert "empty answer" in out.run.result.error
    nudges = [e for e in out.payloads(EventType.ERROR) if e["code"] == "bad_response"]
    assert len(nudges) == 3 and [n["fatal"] for n in nudges] == [False, False, True]
    assert any("Your last answer was empty" in str(m.get("content"))
               for m in out.transport.requests[-1]["messages"])
