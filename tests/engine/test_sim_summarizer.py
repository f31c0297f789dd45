"""The simulated model's summaries: its own extraction, in faithful, lossy and hostile modes."""
import json
import re

import pytest

from agents.compaction.summary import (SUMMARY_INSTRUCTIONS, StructuredSummary, parse_model_summary,
                                       render)
from agents.config import ContextConfig
from agents.events import EventType
from agents.sim.summarizer import SummaryPlayer, build_summary

from .helpers import run_scenario


def call(call_id, name, **args):
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}


def batch():
    """A compaction batch labelled the way the engine labels it."""
    return [
        {"role": "system", "content": "Hard constraints (keep verbatim in task_overview):\n"
                                      "- The budget is at most 50k tokens"},
        {"role": "user", "content": "[archive turn 1, ref arc:s1:1]\nAnalyse /data/sales.csv and "
                                    "write a weekly report. 报告必须包含表格。"},
        {"role": "assistant", "content": None, "tool_calls": [
            call("call_0_0", "csv_describe", path="sales.csv"),
            call("call_0_1", "read_file", path="notes-7.txt")]},
        {"role": "tool", "tool_call_id": "call_0_0", "content":
            "[archive turn 2, ref arc:s1:3]\ncolumns: date, region, revenue\n"
            "missing: 3 of 120 (2.5%)\n缺失值比例：2.5%"},
        {"role": "tool", "tool_call_id": "call_0_1", "content":
            "[archive turn 2, ref arc:s1:4]\nError: notes-7.txt does not exist in the workspace"},
        {"role": "assistant", "content": "[archive turn 3, ref arc:s1:5]\nThe data has gaps. "
                                         "Next I will group revenue by region."},
        {"role": "user", "content": "Write the summary JSON now."},
    ]


def figures(text):
    text = re.sub(r"archive turn \d+", "", text)
    return set(re.findall(r"\d+(?:,\d{3})*(?:\.\d+)?", text))


def test_faithful_copies_constraints_calls_findings_and_failures_with_archive_turns():
    out = build_summary(batch())
    summary = parse_model_summary(json.dumps(out, ensure_ascii=False))  # the engine accepts it
    assert summary.task_overview == ["The budget is at most 50k tokens",
                                     "Analyse /data/sales.csv and write a weekly report.",
                                     "报告必须包含表格。"]
    assert summary.important_discoveries == [
        "csv_describe: missing: 3 of 120 (2.5%) (archive turn 2)",
        "csv_describe: 缺失值比例：2.5% (archive turn 2)"]
    assert summary.current_state == ['called csv_describe({"path": "sales.csv"}) (archive turn 2)']
    assert summary.ruled_out == [{
        "approach": 'calling read_file({"path": "notes-7.txt"})',
        "reason": "Error: notes-7.txt does not exist in the workspace",
        "evidence": "archive turn 2"}]
    assert summary.next_steps == ["The data has gaps.", "Next I will group revenue by region."]
    assert "Write the summary" not in json.dumps(out)  # the request's own instruction
    assert build_summary(batch()) == out  # deterministic


def test_faithful_invents_no_figure():
    given = json.dumps(batch(), ensure_ascii=False)
    out = json.dumps(build_summary(batch()), ensure_ascii=False)
    assert figures(out) <= figures(given)


def test_a_previous_summary_is_read_back_and_only_new_growing_items_are_listed():
    first = parse_model_summary(json.dumps(build_summary(batch()), ensure_ascii=False))
    later = [
        {"role": "system", "content": render(first)},
        {"role": "assistant", "content": None,
         "tool_calls": [call("call_1_0", "csv_group", by="region")]},
        {"role": "tool", "tool_call_id": "call_1_0", "content":
            "[archive turn 5, ref arc:s1:9]\ntotal revenue: 1,234,567\nregion A sales -12%"},
        {"role": "user", "content": "[archive turn 6, ref arc:s1:10]\n数据截止到上月底。"},
    ]
    answer = build_summary(later)
    assert answer["important_discoveries"] == [
        "csv_group: total revenue: 1,234,567 (archive turn 5)",
        "csv_group: region A sales -12% (archive turn 5)"]
    assert answer["ruled_out"] == []  # already in the previous summary
    assert answer["task_overview"] == first.task_overview  # the goal as of now, whole
    assert answer["context_to_preserve"] == ["User said: 数据截止到上月底。 (archive turn 6)"]


def test_lossy_drops_a_deterministic_share_constraints_included():
    player = SummaryPlayer("lossy")
    messages = [{"role": "system", "content": "Hard constraints (keep verbatim in task_overview):\n"
                 + "\n".join(f"- Rule {i} must hold for item {i}." for i in range(30))}]
    out = player.answer(messages)
    assert 5 < len(out["task_overview"]) < 30  # about a third lost, rules among them
    assert SummaryPlayer("lossy").answer(messages) == out


def test_hostile_drops_constraints_and_invents_figures_absent_from_the_request():
    player = SummaryPlayer("hostile")
    out = player.answer(batch())
    text = json.dumps(out, ensure_ascii=False)
    assert out["task_overview"] == [] and "50k" not in text and "表格" not in text
    assert len(player.invented) == 2
    source = json.dumps(batch(), ensure_ascii=False)
    digits = re.sub(r"\D", "", source)
    for figure in player.invented:
        assert figure in text and figure.replace(",", "") not in digits


def test_unknown_mode_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="faithful, lossy, hostile"):
        SummaryPlayer("creative")


def test_empty_batch_gives_an_answer_the_engine_rejects_and_falls_back_on():
    out = build_summary([{"role": "user", "content": "Write the summary JSON now."}])
    assert StructuredSummary.from_dict(out).is_empty()
    assert SUMMARY_INSTRUCTIONS.splitlines()[0] == "[taskos:summary-request]"


def test_engine_compactions_with_the_faithful_sim_keep_findings_and_flag_nothing():
    steps = [{"tool": "fetch_document", "args": {"tokens": 1600, "topic": f"grid storage #{i}"}}
             for i in range(6)]
    scenario = {"name": "docs", "goal": "Read six documents.",
                "steps": [{"user": "The report must include a table."}] + steps + [{"final": "ok"}]}
    # At 4 000 the newest 1 600-token round leaves a summary no room: none is asked for.
    out = run_scenario(scenario, window=5000, config=ContextConfig(clear_tool_results=False))
    compactions = [c for c in out.payloads(EventType.COMPACTION) if not c["fallback"]]
    assert compactions
    assert all(c["audit"]["unsupported_numbers"] == [] for c in compactions)
    last = compactions[-1]["summary_after"]
    assert "fetch_document:" in last and "(archive turn" in last


def document_batch(results: list[str]) -> list[dict]:
    """One fetch call and its result per text, labelled as the engine labels them."""
    out = []
    for i, text in enumerate(results):
        out.append({"role": "assistant", "content": None,
                    "tool_calls": [call(f"call_{i}_0", "fetch_document", topic=f"doc {i}")]})
        out.append({"role": "tool", "tool_call_id": f"call_{i}_0",
                    "content": f"[archive turn {i + 2}, ref arc:s1:{i}]\n{text}"})
    return out


def test_findings_follow_what_the_results_hold_not_how_many_there_are():
    from agents.counting.tokens import count_text
    from agents.tools.documents import synthetic_document

    def discoveries(results):
        return build_summary(document_batch(results))["important_discoveries"]

    one = discoveries([synthetic_document(400, "grid storage #1")])
    assert len(one) == 3 and all("Fact" in d for d in one)  # findings, not the title or id
    # The same document read ten times holds the same three findings.
    assert discoveries([synthetic_document(400, "grid storage #1")] * 10) == one
    # Titles, labels and ids carry no figure: no finding, however long the results.
    assert discoveries(["# grid storage #7: briefing document\nDocument id a7319809."] * 5) == []
    # Twelve different documents hold twelve times as many findings.
    many = discoveries([synthetic_document(400, f"grid storage #{i}") for i in range(12)])
    assert len(many) == 36
    assert count_text("\n".join(one)) < 300 < count_text("\n".join(many))


def test_findings_already_in_the_previous_summary_are_not_listed_again():
    first = parse_model_summary(json.dumps(build_summary(document_batch(
        ["total revenue: 1,234,567\nregion A sales -12%"])), ensure_ascii=False))
    # Read again at a later turn: the findings it had are not new, whatever turn cites them.
    again = [{"role": "system", "content": render(first)}] + document_batch(
        ["no figures here", "total revenue: 1,234,567\nregion A sales -12%\nregion B sales +3%"])
    assert build_summary(again)["important_discoveries"] == [
        "fetch_document: region B sales +3% (archive turn 3)"]


def test_a_budget_stated_in_the_request_keeps_a_section_to_its_newest_items_within_it():
    from agents.compaction.summary import budget_lines, section_budgets
    from agents.counting.tokens import count_text
    from agents.tools.documents import synthetic_document

    results = [synthetic_document(400, f"grid storage #{i}") for i in range(12)]
    unbounded = build_summary(document_batch(results))["important_discoveries"]
    # The engine's own statement of the budgets, in the closing instruction a model reads.
    closing = {"role": "user", "content": "\n".join(
        ["Write the summary JSON now.", *budget_lines(2_000)])}
    budget = section_budgets(2_000)["important_discoveries"]
    bounded = build_summary(document_batch(results) + [closing])["important_discoveries"]
    assert count_text("\n".join(f"- {d}" for d in unbounded)) > budget  # the limit binds
    assert bounded and bounded == unbounded[-len(bounded):]  # the newest findings stay
    assert count_text("\n".join(f"- {d}" for d in bounded)) <= budget
