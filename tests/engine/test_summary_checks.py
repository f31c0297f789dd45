"""Summaries checked as text: chat-template tokens, an empty answer and invented names.

A small model asked for notes wrote `- <|im_start|>user`, which was kept as the summary's key
data; an empty answer was reported as "expected a JSON object" although the request asked
for headed plain text; and a summary that invented a file name and pinned a real byte count
to it passed the audit, which checked figures only.
"""
from __future__ import annotations

from typing import Callable

import pytest

from agents.compaction.compactor import Compactor
from agents.compaction.fresh_requests import SUMMARIZER_PROMPT, SUMMARY_TAIL
from agents.compaction.source_audit import SourceAudit
from agents.compaction.summary import StructuredSummary, SummaryError, parse_model_summary, render
from agents.config import ContextConfig
from agents.context.working import WorkingContext
from agents.counting.tokens import TokenCounter
from agents.events import Audit, Compaction, ModelCall, ToolResult, UserMessage
from agents.provider.client import ModelReply
from agents.store.memory import MemoryStore

PLAIN_TEXT = (SUMMARIZER_PROMPT, SUMMARY_TAIL)  # the fresh request asks for headed plain text


def test_an_empty_summary_says_what_the_request_asked_for():
    for empty in ("", "  \n"):
        with pytest.raises(SummaryError) as asked_text:
            parse_model_summary(empty, prose_ok=PLAIN_TEXT)
        assert "headed plain text" in str(asked_text.value)
        assert "JSON" not in str(asked_text.value)
    with pytest.raises(SummaryError, match="expected a JSON object"):
        parse_model_summary("")


@pytest.mark.parametrize("answer", [
    "- <|im_start|>user\n- <|im_start|>assistant",
    "<s>[INST] <<SYS>>\n<</SYS>>\n[/INST]</s>",
    "<start_of_turn>user\n<end_of_turn>\n<start_of_turn>model",
    "&lt;|im_start|&gt;user\n&lt;|im_end|&gt;",  # as an escaping template renders it
])
def test_a_summary_of_chat_template_tokens_is_refused_and_says_why(answer):
    for asked in (PLAIN_TEXT, None):
        with pytest.raises(SummaryError, match="chat-template tokens"):
            parse_model_summary(answer, prose_ok=asked)


def test_a_template_token_is_never_kept_as_a_fact():
    summary = parse_model_summary("Key data:\n- <|im_start|>user\n- North revenue 1000.00 in "
                                  "month 1\n<|im_end|>", prose_ok=PLAIN_TEXT)
    assert summary.important_discoveries == ["North revenue 1000.00 in month 1"]


# --- the audit of names

LISTING = "2 files under '.':\n| path | bytes |\n| sales.csv | 1204 |\n| notes.txt | 88 |"


def audited(goal: str, result: str, discoveries: list[str]) -> Audit:
    store, events = MemoryStore(), []
    audit = SourceAudit(store, "s", events.append)
    audit.observe(UserMessage(text=goal, source="goal", ref=store.archive("s", 0, "user", goal)))
    audit.observe(ToolResult(name="list_files", ref=store.archive("s", 1, "tool", result)))
    summary = render(StructuredSummary(task_overview=[goal], important_discoveries=discoveries))
    audit.observe(Compaction(summary_after=summary, trigger="rolling"))
    audit.observe(ModelCall(kind="agent", call=3, messages=[
        {"role": "system", "content": summary, "zone": "summary"},
        {"role": "user", "content": goal, "zone": "history"}]))
    [checked] = [e for e in events if isinstance(e, Audit)]
    return checked


def test_the_audit_flags_a_file_name_no_archived_message_holds_even_with_a_real_figure():
    goal = "List the files and report the size of the CSV file."
    checked = audited(goal, LISTING, ["report_final.xlsx has 1204 bytes (archive turn 1)"])
    assert not checked.ok and checked.unsupported_names == ["report_final.xlsx"]
    assert not checked.unsupported_figures  # 1204 is real: the figures alone passed
    assert audited(goal, LISTING, ["sales.csv has 1204 bytes (archive turn 1)"]).ok


def test_the_audit_flags_names_in_any_script():
    goal = "列出文件并报告 CSV 文件的大小。"
    listing = "2 files under '.':\n| path | bytes |\n| 销售.csv | 1204 |"
    checked = audited(goal, listing, ["「华东区报告」有 1204 字节", "文件 销售2025.csv 有 1204 字节"])
    assert checked.unsupported_names == ["华东区报告", "销售2025.csv"] and not checked.ok
    assert audited(goal, listing, ["「销售.csv」有 1204 字节"]).ok
    # a person or region named inside an English sentence
    checked = audited("Report the revenue of each region.", "North 1204\nSouth 88",
                      ["The revenue of North is 1204, says Maria from the Valley office"])
    assert checked.unsupported_names == ["Maria", "Valley"]


# --- a copy of the request


MATERIAL = "\n".join(f"North revenue {1000 + i}.00 in month {i}, filed by the office" for i in
                     range(1, 17))


def test_a_summary_that_copies_its_material_is_refused_and_one_that_picks_lines_is_not():
    headed = "Key data:\n" + "\n".join(f"- {line}" for line in MATERIAL.splitlines())
    for copy in (headed, MATERIAL):
        with pytest.raises(SummaryError, match="copies the messages it was to sum up"):
            parse_model_summary(copy, prose_ok=PLAIN_TEXT, material=MATERIAL)
    lines = MATERIAL.splitlines()
    picked = f"Key data:\n- {lines[0]}\n- {lines[-1]}\nDone so far:\n- read all sixteen months"
    assert parse_model_summary(picked, prose_ok=PLAIN_TEXT, material=MATERIAL)


def test_the_earlier_notes_kept_are_no_copy():
    earlier = "\n".join(f"- {line}" for line in MATERIAL.splitlines())
    notes = f"Key data:\n{earlier}\n- South revenue 2000.00 in month 1"
    request = f"Notes written earlier:\n{earlier}\n\nMaterial:\nSouth revenue 2000.00 in month 1"
    with pytest.raises(SummaryError, match="copies"):
        parse_model_summary(notes, prose_ok=PLAIN_TEXT, material=request)
    assert parse_model_summary(notes, prose_ok=PLAIN_TEXT, material=request, earlier=earlier)


def rounds(count: int = 8) -> WorkingContext:
    ctx = WorkingContext(counter=TokenCounter(), config=ContextConfig(), window=4096,
                         system_prompt="s")
    for turn in range(count):
        ctx.add({"role": "user", "content": f"Round {turn}: read report {turn}."}, turn,
                f"arc:t:{turn}0")
        ctx.add({"role": "tool", "tool_call_id": f"c{turn}", "content": "\n".join(
            f"report {turn} line {k}: grid load rose by {turn * 10 + k} MW" for k in range(6))},
            turn, f"arc:t:{turn}1")
    return ctx


def fallback_reason(answer: Callable[[list[dict]], str]) -> str:
    ctx = rounds()
    outcome = Compactor(ctx, lambda request, *a, **k: ModelReply(content=answer(request)),
                        fresh=True).compact("budget", constraints=[])
    assert outcome is not None and outcome.fallback
    return outcome.fallback_reason


def test_the_fallback_says_why_a_summary_was_refused():
    assert "chat-template tokens (<|im_start|>user)" in fallback_reason(
        lambda request: "- <|im_start|>user\n- <|im_start|>user")
    reason = fallback_reason(lambda request: "")
    assert "headed plain text" in reason and "JSON" not in reason
    # the fresh request's material sent back as it came
    assert "copies the messages it was to sum up" in fallback_reason(
        lambda request: request[-1]["content"])
