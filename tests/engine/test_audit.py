"""The E3 audit reads the archive and checks the request actually sent (issue 13 §4)."""
from __future__ import annotations

import dataclasses

from agents.compaction.source_audit import SourceAudit, binding_statements
from agents.events import Event, EventType, ListSink, event_from
from agents.loop.agent_loop import AgentLoop
from agents.loop.spec import SessionSpec
from agents.store.memory import MemoryStore

from .helpers import run_scenario

SID = "a1"


class Harness:
    """A SourceAudit fed events by hand, as the loop feeds it."""

    def __init__(self) -> None:
        self.store, self.sink = MemoryStore(), ListSink()
        self.audit = SourceAudit(self.store, SID, self._emit)

    def _emit(self, event: Event) -> None:
        self.sink.emit(event)

    def feed(self, kind: str, payload: dict, turn: int = 0) -> None:
        event = event_from(kind, payload, turn=turn)
        self.sink.emit(event)
        self.audit.observe(event)

    def person(self, text: str, archived: str | None = None, turn: int = 0) -> None:
        ref = self.store.archive(SID, turn, "user", text if archived is None else archived)
        self.feed(EventType.USER_MESSAGE, {"text": text, "source": "user", "ref": ref}, turn)

    def tool(self, text: str, turn: int = 0) -> None:
        ref = self.store.archive(SID, turn, "tool", text)
        self.feed(EventType.TOOL_RESULT, {"name": "t", "ref": ref}, turn)

    def compaction(self, summary: str, turn: int = 1) -> None:
        self.feed(EventType.COMPACTION, {"trigger": "budget", "summary_after": summary}, turn)

    def request(self, *contents: str, summary: str = "", turn: int = 1) -> dict:
        messages = [{"role": "system", "zone": "snapshot", "content": c} for c in contents]
        if summary:
            messages.append({"role": "system", "zone": "summary", "content": summary})
        self.feed(EventType.MODEL_CALL, {"call": 1, "kind": "agent", "messages": messages}, turn)
        audits = self.sink.of_type(EventType.AUDIT)
        return audits[-1].payload if audits else {}


def test_binding_statements_are_found_in_english_and_chinese_without_the_anchor_rules():
    text = ("Hard constraints: the report must include a table. Do not delete any files. "
            "Never email the customer. The weather was nice. 另外，数据必须截止到2026年10月31日。"
            "不要联系客户。只能使用公开数据。今天天气很好。")
    assert binding_statements(text) == [
        "the report must include a table", "Do not delete any files",
        "Never email the customer", "数据必须截止到2026年10月31日", "不要联系客户", "只能使用公开数据"]


def test_a_statement_missing_from_the_next_request_fails_the_audit():
    h = Harness()
    h.person("Do not delete any files. Please be quick.")
    h.compaction("summary")
    audit = h.request("You are an agent.", "Goal: tidy the workspace.")
    assert audit["ok"] is False and audit["missing_statements"] == ["Do not delete any files"]
    assert h.audit.failures == 1


def test_the_audit_reads_the_archive_not_the_event_or_the_anchor_book():
    h = Harness()  # what the store kept is the source of truth, whatever the event said
    h.person("hello", archived="Never email the customer.")
    h.compaction("summary")
    assert h.request("hello")["missing_statements"] == ["Never email the customer"]
    h.compaction("summary")
    assert h.request("- never  EMAIL the customer.")["ok"] is True  # case and spacing aside


def test_only_an_explicit_replacement_retires_a_statement():
    h = Harness()
    h.person("The budget is at most 50k tokens.")
    h.person("The marketing budget is at most 20k EUR.")  # no "instead": both stay in force
    h.compaction("summary")
    audit = h.request("The marketing budget is at most 20k EUR.")
    assert audit["missing_statements"] == ["The budget is at most 50k tokens"]
    h.person("Change of plan: the budget is at most 80k tokens now.")
    h.compaction("summary")
    audit = h.request("the budget is at most 80k tokens now")
    assert audit["ok"] is True, audit


def test_an_admin_edit_retires_what_the_person_said():
    h = Harness()
    h.person("Only use data up to 2025-12-31.")
    h.feed(EventType.ANCHOR_CHANGED, {"source": "admin", "action": "changed",
                                      "old": "Only use data up to 2025-12-31", "new": "x"})
    h.compaction("summary")
    assert h.request("nothing")["ok"] is True


def test_a_figure_only_an_earlier_summary_holds_stays_flagged_until_it_is_gone():
    h = Harness()
    h.tool("Revenue 1,234 units in Q3; margin 12%.")
    h.compaction("Revenue was 1,234 units; margin 12%.")
    assert h.request("x", summary="Revenue was 1,234 units; margin 12%.")["ok"] is True
    h.compaction("Revenue was 1,234 units; Zorvath sold 7,777,777.")
    first = h.request("x", summary="Revenue was 1,234 units; Zorvath sold 7,777,777.")
    assert first["unsupported_figures"] == ["7,777,777"]
    # The next summary repeats it: an earlier summary is no support.
    h.compaction("Zorvath sold 7,777,777 in total.")
    assert h.request("x", summary="Zorvath sold 7,777,777 in total.")["unsupported_figures"] == [
        "7,777,777"]
    h.compaction("Revenue was 1,234 units.")
    assert h.request("x", summary="Revenue was 1,234 units.")["ok"] is True
    assert h.audit.failures == 2 and h.audit.flagged == ["7,777,777"]


def test_a_cleared_result_s_archive_ref_in_the_summary_is_no_made_up_name():
    h = Harness()
    h.tool("Revenue 1,234 units in Q3.")
    own = f'- fetch_document: [cleared: fetch_document → whole: read_ref(ref="arc:{SID}:1")]'
    h.compaction(own)
    assert h.request("x", summary=own)["ok"] is True
    other = '- fetch_document: [cleared: fetch_document → whole: read_ref(ref="arc:b2:1")]'
    h.compaction(other)
    assert h.request("x", summary=other)["unsupported_names"] == ["arc:b2:1"]


def test_no_audit_without_a_compaction_and_refused_requests_are_not_audited():
    h = Harness()
    h.person("Never email the customer.")
    assert h.request("Never email the customer.") == {}  # the person's words are there
    h.compaction("s")
    h.feed(EventType.MODEL_CALL, {"kind": "agent", "refused": True, "messages": []})
    assert h.sink.of_type(EventType.AUDIT) == []
    assert h.request("Never email the customer.")["ok"] is True


def test_the_audit_state_survives_a_resume():
    h = Harness()
    h.person("Never email the customer.")
    h.tool("42 rows")
    h.compaction("42 rows and 9,999 more")
    again = SourceAudit(h.store, SID, h._emit)
    again.from_state(h.audit.to_state())
    event = event_from(EventType.MODEL_CALL, {"kind": "agent", "messages": [
        {"zone": "summary", "content": "42 rows and 9,999 more"}]})
    h.sink.emit(event)
    again.observe(event)
    audit = h.sink.of_type(EventType.AUDIT)[-1].payload
    assert audit["missing_statements"] == ["Never email the customer"]
    assert audit["unsupported_figures"] == ["9,999"]


HOSTILE = {"name": "hostile-audit", "summarizer": "hostile",
           "goal": "Collect sources on grid storage. The report must include a table.",
           "steps": [{"tool": "fetch_document", "args": {"tokens": 1400, "topic": f"grid {i}"}}
                     for i in range(8)] + [{"final": "done"}]}


def test_every_figure_the_hostile_summarizer_invents_is_flagged_and_counted():
    # At 10 000 the summary's discoveries section has room for the invented lines (the
    # simulator writes them first, the oldest, which a tighter section leaves out).
    out = run_scenario(HOSTILE, window=10_000)
    report = out.run.report
    invented = out.transport.summaries.invented
    assert invented, "the hostile summarizer must have made something up"
    flagged = {f for a in out.payloads(EventType.AUDIT) for f in a["unsupported_figures"]}
    shown = " ".join(c["content"] or "" for call in out.payloads(EventType.MODEL_CALL)
                     if call["kind"] == "agent" for c in call["messages"]
                     if c["zone"] == "summary")
    reached = [f for f in invented if f in shown]
    assert reached and set(reached) <= flagged
    assert report["audit_failures"] >= 1 and report["unsupported_figures"] == len(flagged)


def test_a_faithful_run_passes_every_audit():
    out = run_scenario({**HOSTILE, "summarizer": "faithful"}, window=8000)
    audits = out.payloads(EventType.AUDIT)
    assert audits and all(a["ok"] for a in audits), [a for a in audits if not a["ok"]]
    assert out.run.report["audit_failures"] == 0 and out.run.report["unsupported_figures"] == 0


class LosingLoop(AgentLoop):
    """An engine with a bug: once it has compacted, its requests lose one sentence."""

    LOST = "Never email the customer."

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        prepare = self.keeper.prepare

        def losing_prepare(hints: bool = True):
            request, limit = prepare(hints)
            if self.audit.pending is not None:
                request = dataclasses.replace(request, messages=[
                    {**m, "content": m["content"].replace(self.LOST.rstrip("."), "")}
                    if isinstance(m.get("content"), str) else m for m in request.messages])
            return request, limit
        self.keeper.prepare = losing_prepare


def test_a_request_that_lost_the_persons_constraint_is_a_failed_audit(tmp_path):
    from agents.config import ContextConfig, ModelProfile
    from agents.runner import run_session
    from agents.scenarios import parse_scenario
    from agents.sim.transport import sim_http_client

    scenario = parse_scenario({**HOSTILE, "summarizer": "faithful",
                               "goal": "Collect sources. " + LosingLoop.LOST})
    client, _ = sim_http_client(scenario, 8000)
    run = run_session(SessionSpec.plan(goal=scenario.goal, scenario=scenario,
                                       profile=ModelProfile(name="sim", context_size=8000),
                                       config=ContextConfig()),
                      session_id="l1", store=MemoryStore(), events=ListSink(), workspace=tmp_path,
                      http_client=client, make_loop=LosingLoop)
    assert run.report["audit_failures"] >= 1
