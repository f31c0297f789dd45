"""The structured summary (feature C6), its validation, shrinking, the C7 marker and the E3
audit."""
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.compaction.self_check import audit_compaction
from agents.compaction.summary import (FIELDS, SUMMARY_INSTRUCTIONS, TRUNCATION_MARKER,
                                       StructuredSummary, SummaryError, merge, parse_model_summary,
                                       parse_rendered, render, shrink_to)


def full() -> StructuredSummary:
    return StructuredSummary(
        task_overview=["Goal: weekly sales report from /data/sales.csv", "The budget is at most 50k tokens"],
        current_state=["called csv_describe(path=sales.csv) (archive turn 2)"],
        important_discoveries=["missing: 3 of 120 (2.5%) (archive turn 2)", "缺失值比例：2.5%"],
        next_steps=["group revenue by region"],
        context_to_preserve=["user prefers\n short answers"],
        ruled_out=[{"approach": "read_file(path=nope.txt)", "reason": "Error: not found",
                    "evidence": "archive turn 3"},
                   {"approach": "guessing the column names", "reason": "", "evidence": ""}],
        open_questions=["which quarter is Q1 in the fiscal calendar?"])


def words(text: str) -> int:
    return len(text.split())


def test_render_is_a_system_info_block_with_headed_non_empty_sections():
    text = render(full())
    lines = text.splitlines()
    assert lines[0] == "<system-info>" and lines[-1] == "</system-info>"
    assert "## Task overview (goal and constraints)" in lines
    assert "- user prefers short answers" in lines  # one item, one line
    assert "- read_file(path=nope.txt) | reason: Error: not found | evidence: archive turn 3" in lines
    assert "## Next steps" not in render(StructuredSummary(task_overview=["goal"]))
    assert render(StructuredSummary()) == "" and render(None) == ""


def test_rendered_summary_reads_back_and_dicts_round_trip():
    summary = full()
    back = parse_rendered("earlier text\n" + render(summary) + "\nlater text")
    summary.context_to_preserve = ["user prefers short answers"]
    assert back == summary
    assert StructuredSummary.from_dict(summary.to_dict()) == summary
    assert StructuredSummary.from_dict(None) == StructuredSummary()
    assert parse_rendered("no block here") is None


def test_merge_keeps_facts_replaces_the_state_of_play_and_dedupes():
    old = full()
    new = StructuredSummary(
        task_overview=["Goal:  weekly sales report from /data/sales.csv"],
        current_state=["called csv_group(by=region) (archive turn 7)"],
        important_discoveries=["region A sales -12% (archive turn 7)", "缺失值比例：2.5%"],
        next_steps=["write the report"],
        ruled_out=[{"approach": "read_file(path=nope.txt)", "reason": "Error: not found",
                    "evidence": "archive turn 3"}])
    merged = merge(old, new)
    assert merged.task_overview == old.task_overview
    assert merged.important_discoveries == old.important_discoveries + [
        "region A sales -12% (archive turn 7)"]
    assert merged.current_state == new.current_state and merged.next_steps == new.next_steps
    assert merged.ruled_out == old.ruled_out and merged.context_to_preserve == old.context_to_preserve
    assert merged.open_questions == old.open_questions  # the newer summary said nothing about them
    assert merge(None, new) == new and merge(None, new) is not new


def test_merge_drops_a_constraint_that_a_newer_one_overrides():
    old = StructuredSummary(task_overview=["The budget is at most 50k tokens",
                                           "The final report must include a table"])
    new = StructuredSummary(task_overview=["Change of plan: the budget is at most 80k tokens now"])
    assert merge(old, new).task_overview == ["The final report must include a table",
                                             "Change of plan: the budget is at most 80k tokens now"]


def test_merge_keeps_a_constraint_that_a_newer_one_only_shares_a_key_with():
    old = StructuredSummary(task_overview=["The budget is at most 50k tokens"])
    new = StructuredSummary(task_overview=["The marketing budget is at most 20k EUR"])
    assert merge(old, new).task_overview == ["The budget is at most 50k tokens",
                                             "The marketing budget is at most 20k EUR"]


def test_model_json_is_accepted_bare_or_fenced():
    data = full().to_dict()
    assert parse_model_summary(json.dumps(data)) == full()
    fenced = "```json\n" + json.dumps(data, ensure_ascii=False, indent=2) + "\n```"
    assert parse_model_summary(fenced) == full()
    loose = parse_model_summary('{"task_overview": "one goal", "next_steps": [1, "b"], "x": 1}')
    assert loose.task_overview == ["one goal"] and loose.next_steps == ["1", "b"]


@pytest.mark.parametrize("text, message", [
    ("", "empty"),
    ("Here is the summary: it went well.", "not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
    ('{"summary": "text"}', "none of the keys"),
    ('{"task_overview": 5}', '"task_overview" must be a list of strings'),
    ('{"next_steps": [{"a": 1}]}', '"next_steps"[0] must be a string'),
    ('{"ruled_out": "x"}', '"ruled_out" must be a list'),
    ('{"ruled_out": [{"reason": "r"}]}', '"ruled_out"[0] must be an object with a string "approach"'),
    ('{"ruled_out": [{"approach": "a", "reason": 3}]}', '"reason" and "evidence" must be strings'),
    ('{"task_overview": [], "next_steps": [" "]}', "every section is empty"),
])
def test_invalid_model_answers_raise_a_clear_summary_error(text, message):
    with pytest.raises(SummaryError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_model_summary(text)


def test_shrink_drops_oldest_discoveries_and_context_first_and_never_the_overview():
    summary = full()
    summary.important_discoveries = [f"discovery number {i} with several words" for i in range(6)]
    summary.context_to_preserve = ["context a", "context b"]
    cap = words(render(summary)) - 12
    shrunk = shrink_to(summary, cap, words)
    assert words(render(shrunk)) <= cap
    assert shrunk.important_discoveries == summary.important_discoveries[2:]
    assert shrunk.context_to_preserve == summary.context_to_preserve
    assert shrunk.task_overview == summary.task_overview and summary.important_discoveries[0]
    tiny = shrink_to(summary, 1, words)
    assert tiny == StructuredSummary(task_overview=summary.task_overview)
    assert shrink_to(summary, 10_000, words) == summary


items = st.lists(st.text(alphabet="ab 12%", min_size=1, max_size=12).filter(str.strip), max_size=6)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(overview=items, discoveries=items, context=items, state=items, cap=st.integers(0, 120))
def test_shrink_fits_or_leaves_only_the_overview_and_only_drops_oldest(overview, discoveries,
                                                                      context, state, cap):
    summary = StructuredSummary(task_overview=overview, important_discoveries=discoveries,
                                context_to_preserve=context, current_state=state)
    shrunk = shrink_to(summary, cap, words)
    assert shrunk.task_overview == overview
    assert words(render(shrunk)) <= cap or shrunk == StructuredSummary(task_overview=overview)
    for name in FIELDS:  # what is left of each list is its newest part
        kept, before = getattr(shrunk, name), getattr(summary, name)
        assert kept == before[len(before) - len(kept):]
    assert shrink_to(summary, cap, words) == shrunk  # deterministic


def test_instructions_and_marker():
    assert SUMMARY_INSTRUCTIONS.startswith("[taskos:summary-request]\n")
    assert all(f'"{name}"' in SUMMARY_INSTRUCTIONS for name in FIELDS)
    assert "archive turn 12" in SUMMARY_INSTRUCTIONS and "Never invent" in SUMMARY_INSTRUCTIONS
    assert TRUNCATION_MARKER == "Some earlier messages were truncated for limited context."


def audit(**overrides):
    args = dict(new_context_text="<task-snapshot>\nGoal: report\n</task-snapshot>\n"
                "- The budget is at most   50k tokens\n#1 Load data\nsummary …",
                tier1_anchors=["The budget is at most 50k tokens"],
                snapshot_text="<task-snapshot>\nGoal: report\n</task-snapshot>",
                open_tasks=["Load data"],
                new_summary_text="total 1234567 (archive turn 12, ref arc:s1:34), 12 %, 2.5%, "
                                 "50k budget, 3,000 rows, see turns 3-7 and 第 40 轮",
                compacted_texts=["total: 1,234,567.0\nregion A -12%\nmissing 2.5%\n3000 rows"],
                previous_summary_text="budget 50,000")
    return audit_compaction(**{**args, **overrides})


def test_audit_passes_when_everything_survived_and_every_number_is_copied():
    assert audit() == {"ok": True, "missing_anchors": [], "snapshot_present": True,
                       "missing_tasks": [], "unsupported_numbers": []}


def test_audit_reports_missing_anchors_snapshot_and_tasks():
    result = audit(new_context_text="summary only", open_tasks=["Load data", "Write report"])
    assert result["ok"] is False and result["snapshot_present"] is False
    assert result["missing_anchors"] == ["The budget is at most 50k tokens"]
    assert result["missing_tasks"] == ["Load data", "Write report"]


def test_audit_flags_numbers_found_in_neither_the_compacted_messages_nor_the_old_summary():
    result = audit(new_summary_text="total 1,234,567; growth 13%; 999 rows; 999 again; 2.5 %",
                   previous_summary_text="")
    assert result["unsupported_numbers"] == ["13%", "999"] and result["ok"] is False
    # a figure the engine handed over as a hard constraint is not invented
    assert audit(new_summary_text="budget at most 50k", previous_summary_text="",
                 compacted_texts=[])["unsupported_numbers"] == []
