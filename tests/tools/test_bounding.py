"""Bounding (feature C10): exact cut formats per summary mode, and the limits as properties."""
from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.store.memory import MemoryStore
from agents.tools.base import Table, Tool, ToolBoundary, ToolContext
from agents.tools.bounding import bound_rendered, bound_text
from agents.tools.registry import ToolRegistry
from agents.tools.render import render_result

LINES = "".join(f"line {i:03d}\n" for i in range(100))  # 900 chars
REF = "arc:s1:7"


def marker(what: str, offset: int, ref: str = REF) -> str:
    return f'[... {what} offloaded to {ref} — read them with read_ref(ref="{ref}", offset={offset}) ...]'


def lines(first: int, last: int) -> str:
    return "".join(f"line {i:03d}\n" for i in range(first, last + 1))


def test_short_text_passes_untouched():
    bounded = bound_text("short", ToolBoundary(max_result_length=100), REF)
    assert (bounded.content, bounded.truncated) == ("short", False)


def test_head_tail_keeps_whole_lines_and_names_the_offset():
    bounded = bound_text(LINES, ToolBoundary(max_result_length=300), REF)
    assert bounded.truncated
    assert bounded.content == lines(0, 14) + marker("702 chars", 135) + "\n" + lines(93, 99)
    assert LINES[135:135 + 702] == lines(15, 92)  # the offset and count point at the cut part


def test_none_mode_keeps_only_the_head():
    bounded = bound_text(LINES, ToolBoundary(max_result_length=300, summary_mode="none"), REF)
    assert bounded.content == lines(0, 21) + marker("702 chars", 198)


def test_stats_mode_keeps_only_statistics():
    bounded = bound_text(LINES, ToolBoundary(max_result_length=300, summary_mode="stats"), REF)
    assert bounded.content == marker("900 chars", 0) + "\nStatistics: 900 chars, 100 lines, 200 words."


def test_llm_mode_says_it_fell_back_to_head_and_tail():
    bounded = bound_text(LINES, ToolBoundary(max_result_length=300, summary_mode="llm"), REF)
    assert bounded.content == (
        "(summary_mode llm is not available in the tool layer; kept the head and tail instead)\n"
        + lines(0, 7) + marker("792 chars", 72) + "\n" + lines(96, 99))


REGIONS = Table(columns=["region", "revenue"],
                rows=[[r, i * 10] for i, r in enumerate(["East", "West", "North", "South"] * 5)],
                title="Revenue by region:")
STATS = ("Statistics over all 20 rows, 2 columns:\n"
         "- region: text, 4 distinct, most common East (5), West (5), North (5); "
         "missing: 0 of 20 (0.0%)\n"
         "- revenue: numeric, min 0, max 190, mean 95; missing: 0 of 20 (0.0%)")


def test_table_keeps_head_rows_tail_rows_and_statistics():
    bounded = bound_rendered(render_result(REGIONS),
                             ToolBoundary(max_result_rows=6, max_result_length=2000), "arc:s1:9")
    assert bounded.content == (
        "Revenue by region:\nregion,revenue\nEast,0\nWest,10\nNorth,20\nSouth,30\n"
        + marker("14 rows", 67, "arc:s1:9") + "\nNorth,180\nSouth,190\n" + STATS)
    full = render_result(REGIONS).text
    assert full[67:].startswith("East,40\n")  # the offset is where the first cut row starts


def test_table_in_stats_mode_keeps_no_rows():
    bounded = bound_rendered(render_result(REGIONS),
                             ToolBoundary(max_result_rows=6, max_result_length=2000,
                                          summary_mode="stats"), "arc:s1:9")
    assert bounded.content == ("Revenue by region:\nregion,revenue\n"
                               + marker("20 rows", 34, "arc:s1:9") + "\n" + STATS)


def test_table_within_limits_is_not_cut():
    bounded = bound_rendered(render_result(REGIONS),
                             ToolBoundary(max_result_rows=20, max_result_length=2000), REF)
    assert not bounded.truncated and bounded.content == render_result(REGIONS).text


def test_csv_like_text_is_bounded_as_a_table_with_missing_values():
    text = "region,revenue\n" + "".join(f"R{i % 3},{'' if i % 10 == 0 else i}\n" for i in range(40))
    bounded = bound_rendered(render_result(text),
                             ToolBoundary(max_result_rows=3, max_result_length=4000), REF)
    assert bounded.content == (
        "region,revenue\nR0,\nR1,1\n" + marker("37 rows", 24) + "\nR0,39\n"
        "Statistics over all 40 rows, 2 columns:\n"
        "- region: text, 3 distinct, most common R0 (14), R1 (13), R2 (13); missing: 0 of 40 (0.0%)\n"
        "- revenue: numeric, min 1, max 39, mean 20; missing: 4 of 40 (10.0%)")
    assert text[24:].startswith("R2,2\n")


def test_prose_with_commas_is_not_mistaken_for_a_table():
    prose = "Hello, world, again\n" + "".join(f"In {i}, we sold {i} units.\n" for i in range(400))
    bounded = bound_rendered(render_result(prose), ToolBoundary(max_result_length=500), REF)
    assert "rows offloaded" not in bounded.content and "chars offloaded" in bounded.content


def test_a_table_too_wide_for_its_statistics_drops_columns_then_falls_back():
    wide = Table(columns=[f"c{i}" for i in range(40)], rows=[[i] * 40 for i in range(50)])
    bounded = bound_rendered(render_result(wide), ToolBoundary(max_result_length=700), REF)
    assert len(bounded.content) <= 700
    assert re.search(r"- \(\d+ more columns not shown\)$", bounded.content)


MODES = st.sampled_from(["none", "head_tail", "stats", "llm"])
REFS = st.from_regex(r"arc:[a-z0-9-]{1,40}:[0-9]{1,7}", fullmatch=True)
CELLS = st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=True), st.text(max_size=30),
                  st.none())


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=5000), limit=st.integers(100, 3000), mode=MODES, ref=REFS)
def test_bounded_text_never_exceeds_its_limit(text, limit, mode, ref):
    bounded = bound_text(text, ToolBoundary(max_result_length=limit, summary_mode=mode), ref)
    assert len(bounded.content) <= limit
    assert bounded.truncated == (len(text) > limit)
    found = re.search(r"offloaded to .*? — read them with read_ref\(ref=\".*?\", "
                      r"offset=(\d+)\) \.\.\.\]", bounded.content)
    if found and mode in ("head_tail", "none"):
        offset = int(found.group(1))
        assert bounded.content.startswith(text[:offset])  # the head is the text up to offset


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.lists(CELLS, min_size=3, max_size=3), max_size=120),
       max_rows=st.integers(1, 50), limit=st.integers(100, 4000), mode=MODES, ref=REFS)
def test_bounded_tables_never_exceed_rows_or_length(rows, max_rows, limit, mode, ref):
    table = Table(columns=["a", "b", "c"], rows=rows, title="t")
    bounded = bound_rendered(render_result(table), ToolBoundary(
        max_result_rows=max_rows, max_result_length=limit, summary_mode=mode), ref)
    assert len(bounded.content) <= limit
    cut = re.search(r"\[\.\.\. (\d+) rows offloaded", bounded.content)
    if cut:
        assert len(rows) - int(cut.group(1)) <= max_rows


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                                    st.text(max_size=200), st.binary(max_size=300)),
                          lambda inner: st.one_of(st.lists(inner, max_size=8),
                                                  st.dictionaries(st.text(max_size=10), inner,
                                                                  max_size=8)),
                          max_leaves=60),
       limit=st.integers(100, 2000), max_rows=st.integers(1, 40), mode=MODES)
def test_no_tool_result_in_context_exceeds_its_declared_limit(value, limit, max_rows, mode):
    registry = ToolRegistry()
    registry.register(Tool(name="anything", description="", parameters={"type": "object",
                                                                         "properties": {}},
                           func=lambda: value, inline=True,
                           boundary=ToolBoundary(max_result_rows=max_rows,
                                                 max_result_length=limit, summary_mode=mode)))
    ctx = ToolContext(session_id="p", store=MemoryStore(), workspace=Path("."))
    outcome = registry.run("anything", "{}", ctx)
    assert outcome.error is None
    assert len(outcome.content) <= limit and outcome.kept_chars == len(outcome.content)
