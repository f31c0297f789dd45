"""Summaries from small models (issue 11): headed plain text and HTML-escaped JSON are
read; prose without sections is refused and the compaction falls back visibly."""
import json

import pytest

from agents.compaction.compactor import Compactor
from agents.compaction.summary import SummaryError, parse_model_summary
from agents.compaction.summary_text import heading_field, sections_from_text
from agents.provider.client import ModelReply

from .test_summary_output_limits import context_with_rounds

MARKDOWN = """Here is the summary of the conversation so far.

## Task Overview
- Never write or delete any file.
- The final report must stay under 120 words.

**Current state:** read sales.csv rows 1-40 (archive turn 3)

### Key findings
1. North revenue 1204.50
2. South revenue 880

Next steps: read rows 41-80
"""


def test_markdown_sections_are_read_as_the_c6_sections():
    forms: list[str] = []
    summary = parse_model_summary(MARKDOWN, forms)
    assert forms == ["text"]
    assert summary.task_overview == ["Never write or delete any file.",
                                     "The final report must stay under 120 words."]
    assert summary.current_state == ["read sales.csv rows 1-40 (archive turn 3)"]
    assert summary.important_discoveries == ["North revenue 1204.50", "South revenue 880"]
    assert summary.next_steps == ["read rows 41-80"]


def test_html_escaped_json_is_read_as_json():
    escaped = ('{&quot;task_overview&quot;: [&quot;Keep the report under 120 words&quot;], '
               '&quot;current_state&quot;: [&quot;read rows 1&amp;2&quot;]}')
    forms: list[str] = []
    summary = parse_model_summary(escaped, forms)
    assert forms == ["json"]
    assert summary.task_overview == ["Keep the report under 120 words"]
    assert summary.current_state == ["read rows 1&2"]


@pytest.mark.parametrize("line, expected", [
    ("## Task overview", ("task_overview", "")),
    ("**Next steps:** call read_file", ("next_steps", "call read_file")),
    ("3. **Open questions**", ("open_questions", "")),
    ("important_discoveries:", ("important_discoveries", "")),
    ("The file has three columns: region, month and revenue.", None),
    ("- a plain bullet", None),
])
def test_headings_are_recognised_by_their_words(line, expected):
    assert heading_field(line) == expected


def test_prose_without_sections_is_refused_with_what_it_was():
    prose = ("The user wants a sales report. I read the file and the totals look fine. "
             "I will continue tomorrow.")
    with pytest.raises(SummaryError, match="names none of the C6 sections"):
        parse_model_summary(prose)
    assert sections_from_text(prose) == {}


def test_a_headed_summary_is_accepted_and_prose_falls_back_visibly():
    ctx = context_with_rounds()
    outcome = Compactor(ctx, lambda *a, **k: ModelReply(content=MARKDOWN)).compact(
        "budget", constraints=[])
    assert not outcome.fallback, outcome.fallback_reason
    assert "text" in outcome.summary_forms and "North revenue 1204.50" in ctx.summary_text

    ctx = context_with_rounds()
    outcome = Compactor(ctx, lambda *a, **k: ModelReply(
        content="I summarised everything, all good.")).compact("budget", constraints=[])
    assert outcome.fallback and outcome.summary_forms == []
    assert "names none of the C6 sections" in outcome.fallback_reason


def test_json_still_wins_over_headings():
    forms: list[str] = []
    text = "## Notes\n" + json.dumps({"task_overview": ["count rows"]})
    assert parse_model_summary(text, forms).task_overview == ["count rows"] and forms == ["json"]
