"""The simulated model's summaries: extractive, from exactly the messages it is given."""
import json

from agents.events import EventType
from agents.sim.summarizer import build_summary
from agents.summary import (SUMMARY_INSTRUCTIONS, StructuredSummary, audit_compaction, merge,
                            parse_model_summary, render)

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
            "2024-01-03,East,1200,300\nmissing: 3 of 120 (2.5%)\n缺失值比例：2.5%"},
        {"role": "tool", "tool_call_id": "call_0_1", "content":
            "[archive turn 2, ref arc:s1:4]\nError: notes-7.txt does not exist in the workspace"},
        {"role": "assistant", "content": "[archive turn 3, ref arc:s1:5]\nThe data has gaps. "
                                         "Next I will group revenue by region."},
        {"role": "user", "content": "Write the summary JSON now."},
    ]


def test_summary_is_copied_from_the_batch_with_archive_turns_and_validates():
    out = build_summary(batch())
    summary = parse_model_summary(json.dumps(out, ensure_ascii=False))
    assert summary.task_overview[:2] == ["The budget is at most 50k tokens", "报告必须包含表格"]
    assert summary.task_overview[2].startswith("User request: Analyse /data/sales.csv")
    assert summary.important_discoveries == [
        "csv_describe: missing: 3 of 120 (2.5%) (archive turn 2)",
        "csv_describe: 缺失值比例：2.5% (archive turn 2)"]
    assert summary.current_state == ["called csv_describe(path=sales.csv) (archive turn 2)"]
    assert summary.ruled_out == [{
        "approach": "calling read_file(path=notes-7.txt)",
        "reason": "Error: notes-7.txt does not exist in the workspace",
        "evidence": "archive turn 2"}]
    assert summary.open_questions[0].startswith("read_file still fails")
    assert summary.next_steps == ["Next I will group revenue by region."]
    assert "Write the summary" not in json.dumps(out)  # the request's own instruction
    assert build_summary(batch()) == out  # deterministic


def test_no_number_appears_that_the_messages_did_not_contain():
    given = batch()
    out = build_summary(given)
    text = render(StructuredSummary.from_dict(out))
    compacted = "\n".join(str(m.get("content")) + json.dumps(m.get("tool_calls") or [])
                          for m in given)
    assert audit_compaction(new_context_text=text, tier1_anchors=[], snapshot_text="",
                            open_tasks=[], new_summary_text=text, compacted_text=compacted,
                            previous_summary_text="")["unsupported_numbers"] == []
    assert "2.5%" in text and "120" in text
    # what the engine kept out of the batch cannot show up in the summary
    assert "1200" not in text  # a CSV data row, not a finding
    trimmed = [m for m in given if m.get("tool_call_id") != "call_0_0"]
    assert "2.5%" not in json.dumps(build_summary(trimmed), ensure_ascii=False)


def test_a_previous_summary_in_the_messages_is_merged_not_forgotten():
    first = parse_model_summary(json.dumps(build_summary(batch()), ensure_ascii=False))
    later = [
        {"role": "system", "content": render(first)},
        {"role": "assistant", "content": None,
         "tool_calls": [call("call_1_0", "csv_group", by="region")]},
        {"role": "tool", "tool_call_id": "call_1_0", "content":
            "[archive turn 5, ref arc:s1:9]\ntotal revenue: 1,234,567\nregion A sales -12%"},
        {"role": "user", "content": "[archive turn 6, ref arc:s1:10]\nChange of plan: the budget "
                                    "is at most 80k tokens now. 数据截止到上月底。"},
    ]
    answer = parse_model_summary(json.dumps(build_summary(later), ensure_ascii=False))
    # like a model following SUMMARY_INSTRUCTIONS: growing sections list only what is new
    assert answer.important_discoveries == [
        "csv_group: total revenue: 1,234,567 (archive turn 5)",
        "csv_group: region A sales -12% (archive turn 5)"]
    assert answer.ruled_out == [] and answer.open_questions == first.open_questions
    assert answer.current_state == ["called csv_group(by=region) (archive turn 5)"]
    assert "The budget is at most 50k tokens" not in answer.task_overview  # overridden
    assert {"Change of plan: the budget is at most 80k tokens now", "数据截止到上月底",
            "报告必须包含表格"} <= set(answer.task_overview)
    second = merge(first, answer)  # what the engine keeps
    assert second.important_discoveries == first.important_discoveries + answer.important_discoveries
    assert second.ruled_out == first.ruled_out
    assert sorted(second.task_overview) == sorted(answer.task_overview)


def test_chinese_text_survives_verbatim():
    out = build_summary([
        {"role": "user", "content": "[archive turn 1]\n分析销售数据并生成周报。输出必须包含表格。"},
        {"role": "tool", "name": "csv_describe", "content":
            "[archive turn 2]\n结论：华东区域下降幅度最大\n华东区域销售额环比下降12%"},
    ])
    assert "输出必须包含表格" in out["task_overview"]
    assert out["task_overview"][-1] == "User request: 分析销售数据并生成周报。 (archive turn 1)"
    assert out["important_discoveries"] == [
        "csv_describe: 结论：华东区域下降幅度最大 (archive turn 2)",
        "csv_describe: 华东区域销售额环比下降12% (archive turn 2)"]


def test_a_failure_that_was_retried_successfully_is_ruled_out_but_not_open():
    out = build_summary([
        {"role": "assistant", "content": None, "tool_calls": [call("a", "read_file", path="x.txt")]},
        {"role": "tool", "tool_call_id": "a", "content": "[archive turn 4]\nError: x.txt is missing"},
        {"role": "assistant", "content": None, "tool_calls": [call("b", "read_file", path="y.txt")]},
        {"role": "tool", "tool_call_id": "b", "content": "[archive turn 5]\nrows: 40"},
    ])
    assert [r["evidence"] for r in out["ruled_out"]] == ["archive turn 4"]
    assert out["open_questions"] == []


def test_empty_batch_gives_an_answer_the_engine_rejects_and_falls_back_on():
    out = build_summary([{"role": "user", "content": "Write the summary JSON now."}])
    assert StructuredSummary.from_dict(out).is_empty()
    assert SUMMARY_INSTRUCTIONS.splitlines()[0] == "[taskos:summary-request]"


def test_engine_compactions_with_the_sim_keep_findings_and_invent_no_numbers():
    steps = [{"tool": "fetch_document", "args": {"tokens": 1600, "topic": f"grid storage #{i}"}}
             for i in range(6)]
    scenario = {"name": "docs", "goal": "Read six documents.",
                "steps": [{"user": "The report must include a table."}] + steps + [{"final": "ok"}]}
    out = run_scenario(scenario, window=4000)
    compactions = [c for c in out.payloads(EventType.COMPACTION) if not c["fallback"]]
    assert compactions
    assert all(c["audit"]["unsupported_numbers"] == [] for c in compactions)
    last = compactions[-1]["summary_after"]
    assert "fetch_document: Fact" in last and "(archive turn" in last
    assert "must include a table" in last
