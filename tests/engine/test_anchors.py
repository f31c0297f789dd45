"""Anchors (feature C8): extraction rules in English and Chinese, conflicts, tiers, roll-off."""
import pytest

from agents.store.interface import AnchorRecord
from agents.words.anchors import clip_text, extract_anchors
from agents.words.conclusions import extract_conclusions
from agents.words.merge import AnchorChange, merge_anchors, render_anchors, roll_off


def only(text):
    found = extract_anchors(text, turn=4)
    assert len(found) == 1, [a.text for a in found]
    return found[0]


@pytest.mark.parametrize("text, kind", [
    # must / format demands
    ("The final report must include a table.", "format:table"),
    ("报告必须包含表格。", "format:table"),
    ("Return the result as JSON.", "format:json"),
    ("Write it in markdown.", "format:markdown"),
    ("Give me a bullet list please.", "format:list"),
    ("请分点列出要点。", "format:list"),
    ("Answer in English.", "format:language"),
    ("一定要用中文回答。", "format:language"),
    ("You must not cite Wikipedia.", "must:"),
    ("务必使用公开数据。", "must:"),
    ("不得使用外部数据。", "must:"),
    # limits
    ("The budget is at most 50k tokens.", "max:budget"),
    ("Use no more than 5 pages.", "max:page"),
    ("Keep the answer ≤ 80k tokens.", "max:answer"),
    ("Latency must be <= 200 ms.", "max:latency"),
    ("Spend up to 3 % of the budget.", "max:"),
    ("预算不超过5万。", "max:budget"),
    ("篇幅至多10页。", "max:length"),
    ("最多使用3个图表。", "max:"),
    ("总预算 ≤ ¥200万。", "max:budget"),
    ("报告控制在20页以内。", "max:report"),
    ("At least 3 charts.", "min:chart"),
    ("至少5页。", "min:page"),
    ("Accuracy ≥ 95%.", "min:accuracy"),
    # deadlines and data ranges
    ("The report is due by 2026-10-31.", "deadline:report"),
    ("Deadline: October 31, 2026.", "deadline:task"),
    ("截止日期是2026年10月31日。", "deadline:task"),
    ("10月31日之前提交报告。", "deadline:task"),
    ("Use data up to end of last month.", "range:data"),
    ("数据截止到上月底。", "range:data"),
])
def test_hard_constraints_in_english_and_chinese_are_tier_1(text, kind):
    anchor = only(text)
    assert (anchor.tier, anchor.source, anchor.turn, anchor.active) == (1, "user", 4, True)
    assert anchor.key.startswith(kind)
    assert anchor.text == text.rstrip(".。")


@pytest.mark.parametrize("text", [
    "Hello, how are you today?", "Thanks, that looks great!", "Can you help me with something?",
    "It is up to you.", "Sales were sorted by region before the merge.",
    "Tell me about the table of contents.", "Let me know if you have questions.",
    "好的，谢谢。", "我今天有点忙。", "辛苦了！",
])
def test_plain_chit_chat_gives_no_anchor(text):
    assert extract_anchors(text) == []


@pytest.mark.parametrize("text", [
    "I'm in meeting room 3.", "我在3号会议室。", "We spent ¥200万 last year.",
    "The meeting took 10 分钟.", "The launch was on 2026-10-31.", "发布日期是2026年10月31日。",
    "I read 5 pages.",
])
def test_numbers_and_dates_that_constrain_nothing_are_tier_3_details(text):
    anchor = only(text)
    assert anchor.tier == 3 and anchor.key.startswith("detail:")


def test_a_sentence_with_two_constraints_gives_two_anchors_and_keeps_its_lead_in():
    texts = [a.text for a in extract_anchors("预算不超过5万，报告必须包含表格。另外，数据必须截止到2026年10月31日。"
                                             "Use data up to end of last month, and answer in English.")]
    assert texts == ["预算不超过5万", "报告必须包含表格", "另外，数据必须截止到2026年10月31日",
                     "Use data up to end of last month", "and answer in English"]
    # thousands separators are not clause breaks
    assert only("The budget is at most 1,500 dollars.").text == "The budget is at most 1,500 dollars"


def test_anchor_text_is_capped_without_cutting_a_number():
    text = "The report must include " + "very " * 34 + "1,234,567 figures."
    assert "1,234" in text[:199]  # a plain cut at 199 characters would split the number
    anchor = only(text)
    assert len(anchor.text) <= 200 and anchor.text.endswith("very…")
    assert "1," not in anchor.text  # the number is dropped whole, not cut to "1,234"
    assert clip_text("abc 12345", 7) == "abc…"


def test_a_later_limit_replaces_the_earlier_one_with_one_change():
    existing = extract_anchors("The budget is at most 50k tokens.", turn=1)
    changes = merge_anchors(existing, extract_anchors(
        "Change of plan: the budget is at most 80k tokens now.", turn=9))
    assert [c.action for c in changes] == ["changed"]
    assert changes[0].old is existing[0] and "50k" in changes[0].old.text
    assert "80k" in changes[0].new.text and changes[0].new.turn == 9
    assert existing[0].active  # merge only describes; the caller deactivates and saves


def test_explicit_replacements_are_found_in_chinese_and_across_languages():
    zh = extract_anchors("预算不超过5万。")
    assert [c.action for c in merge_anchors(zh, extract_anchors("预算改为不超过8万。"))] == ["changed"]
    en = extract_anchors("The budget is at most 50k tokens.")
    assert [c.action for c in merge_anchors(en, extract_anchors("从现在起预算不超过8万。"))] == ["changed"]
    must = extract_anchors("You must cite sources.")
    flip = merge_anchors(must, extract_anchors("From now on you must not cite sources."))
    assert [c.action for c in flip] == ["changed"]


def test_a_shared_key_alone_never_replaces_a_hard_constraint():
    # Issue 13: both key max:budget; before, the token budget silently vanished.
    tokens = extract_anchors("The budget is at most 50k tokens.", turn=1)
    marketing = extract_anchors("The marketing budget is at most 20k EUR.", turn=3)
    assert tokens[0].key == marketing[0].key
    changes = merge_anchors(tokens, marketing)
    assert [(c.action, c.old) for c in changes] == [("added", None)]
    for restated in ("预算不超过8万。", "You must not cite sources.", "Budget at most 60k."):
        assert all(c.action == "added" for c in merge_anchors(
            extract_anchors("预算不超过5万。 You must cite sources. Budget at most 50k."),
            extract_anchors(restated)))
    both = merge_anchors([], extract_anchors("The budget is at most 50k tokens. "
                                             "The marketing budget is at most 20k EUR."))
    assert len(both) == 2  # within one message too


def test_an_explicit_replacement_takes_the_constraint_it_names_best():
    existing = (extract_anchors("The budget is at most 50k tokens.", turn=1)
                + extract_anchors("The marketing budget is at most 20k EUR.", turn=2))
    changes = merge_anchors(existing, extract_anchors(
        "Change the marketing budget to at most 30k EUR.", turn=5))
    assert [c.action for c in changes] == ["changed"]
    assert "20k EUR" in changes[0].old.text and "30k" in changes[0].new.text


def test_same_statement_again_changes_nothing_and_distinct_demands_are_both_kept():
    existing = extract_anchors("The output must include a table labelled T1.")
    assert merge_anchors(existing, extract_anchors("the output  must include a table labelled T1")) == []
    added = merge_anchors(existing, extract_anchors("The output must include a table labelled T2."))
    assert [c.action for c in added] == ["added"] and added[0].old is None


def test_restated_in_one_message_with_instead_the_last_statement_wins():
    changes = merge_anchors([], extract_anchors("Budget at most 50k. No wait, instead budget at most 60k."))
    assert [(c.action, c.old, c.new.text) for c in changes] == [
        ("added", None, "No wait, instead budget at most 60k")]


def test_a_lower_tier_candidate_never_downgrades_a_hard_constraint():
    hard = AnchorRecord(tier=1, text="budget at most 50k", key="max:budget")
    detail = AnchorRecord(tier=3, text="budget was 70k last year", key="max:budget")
    assert merge_anchors([hard], [detail]) == []
    inactive = AnchorRecord(tier=1, text="budget at most 50k", key="max:budget", active=False)
    assert [c.action for c in merge_anchors([inactive], [detail])] == ["added"]


def test_tier_3_details_roll_off_after_keep_turns_and_hard_constraints_never_do():
    hard = AnchorRecord(tier=1, text="must include a table", key="format:table:", turn=0)
    conclusion = AnchorRecord(tier=2, text="rows: 120", key="fact:rows", turn=1)
    old = AnchorRecord(tier=3, text="I'm in meeting room 3", key="detail:a", turn=1)
    recent = AnchorRecord(tier=3, text="I read 5 pages", key="detail:b", turn=5)
    gone = AnchorRecord(tier=3, text="in room 9", key="detail:c", turn=0, active=False)
    changes = roll_off([hard, conclusion, old, recent, gone], current_turn=7, keep_turns=5)
    assert changes == [AnchorChange("removed", old, None)]
    assert roll_off([hard, conclusion, old, recent], current_turn=6, keep_turns=5) == []


TOOL_RESULT = """Loaded sales.csv
date,region,revenue,units
2024-01-03,East,1200,300
| region | revenue |
| A | 12 |
region A sales -12%
total revenue: 1,234,567
missing: 3 of 120 (2.5%)
结论：华东区域下降幅度最大
Error: column 'price' not found at row 5"""


def test_conclusions_in_tool_results_are_tier_2_capped_and_most_conclusion_like_first():
    found = extract_conclusions(TOOL_RESULT, turn=6, tool_name="csv_describe")
    assert [a.text for a in found] == ["total revenue: 1,234,567", "missing: 3 of 120 (2.5%)",
                                       "结论：华东区域下降幅度最大"]
    assert all((a.tier, a.source, a.turn) == (2, "tool", 6) for a in found)
    assert found[0].key == "fact:csv_describe:total revenue"
    wider = [a.text for a in extract_conclusions(TOOL_RESULT, limit=4)]
    assert wider[0] == "region A sales -12%"


def test_conclusions_from_json_and_chinese_results_and_none_from_data_or_errors():
    found = extract_conclusions('{"rows": 120, "missing_ratio": "2.5%", "ok": true, "name": "x"}')
    assert [a.text for a in found] == ["rows: 120", "missing_ratio: 2.5%"]
    zh = extract_conclusions("缺失值比例：2.5%\n华东区域销售额环比下降12%")
    assert [a.text for a in zh] == ["缺失值比例：2.5%", "华东区域销售额环比下降12%"]
    assert extract_conclusions("2024-01-03,East,1200,300\n| A | 12 | 13 |") == []
    assert extract_conclusions("Error: file missing-3.txt not found") == []
    assert extract_conclusions("The file was read successfully.") == []


def test_a_new_value_of_the_same_conclusion_replaces_it():
    first = extract_conclusions("total revenue: 1,234,567", tool_name="csv")
    changes = merge_anchors(first, extract_conclusions("total revenue: 1,300,000", tool_name="csv"))
    assert [c.action for c in changes] == ["changed"]
    other = merge_anchors(first, extract_conclusions("region 2 sales: 1,300,000", tool_name="csv"))
    assert [c.action for c in other] == ["added"]


def test_render_puts_hard_constraints_first_tagged_and_skips_inactive():
    anchors = [AnchorRecord(tier=3, text="room 3", turn=2),
               AnchorRecord(tier=2, text="rows: 120", turn=1),
               AnchorRecord(tier=1, text="must include a table", turn=3),
               AnchorRecord(tier=1, text="budget at most 50k", turn=0, active=False)]
    assert render_anchors(anchors).splitlines() == [
        "[T1 constraint] must include a table", "[T2 finding] rows: 120", "[T3 detail] room 3"]
    assert render_anchors([]) == ""


# --- issue 13: prohibitions and obligations, linear extraction
def test_prohibitions_and_obligations_are_tier_one_in_english_and_chinese():
    for text in ("Do not delete any files.", "Never email the customer.",
                 "Only use data up to 2025-12-31.", "Always answer in German.",
                 "Please don't touch the production database.", "You should not guess figures.",
                 "Don’t rename the columns.",
                 "不要删除任何文件。", "必须用中文回答。", "不得联系客户。", "只能使用公开数据。",
                 "禁止修改原始数据。", "始终用德语回答。", "请勿发送邮件。"):
        found = extract_anchors(text)
        assert [a.tier for a in found] == [1], text
    keys = {a.key for a in extract_anchors("Do not delete any files. Never email the customer.")}
    assert len(keys) == 2  # two rules on different things


def test_descriptive_sentences_with_rule_words_are_not_constraints():
    for text in ("I only need a short summary of it.", "We never had this problem before.",
                 "The team always meets on Mondays."):
        assert [a for a in extract_anchors(text) if a.tier == 1] == [], text


def test_a_rule_inside_a_longer_sentence_keeps_its_own_clause():
    found = extract_anchors("Thanks for the help, do not delete any files, and keep notes.")
    assert [a.tier for a in found] == [1] and "do not delete any files" in found[0].text


def test_long_runs_without_a_break_are_classified_in_bounded_pieces():
    from agents.words.anchors import MAX_CLAUSE_CHARS, _bounded, _clauses
    run = "word " * 1000
    pieces = _bounded(run)
    assert "".join(pieces) == run and all(len(p) <= MAX_CLAUSE_CHARS for p in pieces)
    assert _bounded("short text") == ["short text"]
    solid = "x" * 1000  # no space at all: cut hard, nothing lost
    assert "".join(_bounded(solid)) == solid and max(map(len, _bounded(solid))) == MAX_CLAUSE_CHARS
    clauses = _clauses("deadline up to at most 5 under 3 " * 600)
    assert all(len(c) <= MAX_CLAUSE_CHARS for c, _found in clauses)


def test_a_pathological_twenty_thousand_character_message_is_extracted():
    # Before issue 13 this input took ~29 s (quadratic date and limit scans); the speed
    # itself is measured in scripts/bench_anchors.py, not here.
    text = ("deadline up to at most 5 under 3 " * 700)[:20_000]
    found = extract_anchors(text)
    assert found and all(a.tier == 1 for a in found)
    assert sum(len(a.text) for a in found) <= len(text)


def test_supersedes_needs_explicit_words():
    from agents.words.anchors import supersedes
    for text in ("Use 80k instead.", "From now on, at most 3 pages.", "Change the budget to 80k.",
                 "预算改为8万。", "从现在起只用英文。", "We no longer need a table."):
        assert supersedes(text), text
    for text in ("The marketing budget is at most 20k EUR.", "No longer than 5 pages.",
                 "The budget is at most 50k tokens."):
        assert not supersedes(text), text


def test_an_explicit_replacement_of_a_narrower_thing_keeps_the_broader_constraint():
    tokens = extract_anchors("The budget is at most 50k tokens.", turn=1)
    narrower = merge_anchors(tokens, extract_anchors(
        "From now on, the marketing budget is at most 30k EUR.", turn=4))
    assert [(c.action, c.old) for c in narrower] == [("added", None)]
    marketing = extract_anchors("The marketing budget is at most 20k EUR.", turn=2)
    same = merge_anchors(marketing, extract_anchors(
        "From now on, the marketing budget is at most 30k EUR.", turn=4))
    assert [c.action for c in same] == ["changed"]
    broader = merge_anchors(tokens, extract_anchors("Change the budget to at most 80k.", turn=5))
    assert [c.action for c in broader] == ["changed"]
