"""A compaction counts and reads the summary from its lines (issue 8, engine cost per
compaction): a summary keeps most of its lines from one compaction to the next, so only
new lines are encoded or scanned for numbers, and the counts stay exact."""
from __future__ import annotations

import functools

import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.compaction import numbers
from agents.compaction.summary import StructuredSummary, merge, render, render_lines, shrink_to
from agents.counting.tokens import (LINE_ADDITIVE_ENCODINGS, OFFLINE_FALLBACK, TextCache,
                                    TokenCounter)


@functools.lru_cache(maxsize=1)
def available_encodings() -> list[str]:
    names = []
    for name in sorted(LINE_ADDITIVE_ENCODINGS):
        try:
            tiktoken.get_encoding(name)
        except Exception:  # noqa: BLE001 - not cached on this machine (no network)
            continue
        names.append(name)
    return names


def long_summary(items: int = 120) -> StructuredSummary:
    return StructuredSummary(
        task_overview=["Build the Q3 report; it must include a table.",
                       "The budget is at most 50k tokens", "报告一定要用中文写摘要。"],
        current_state=[f"Read /data/part-{i}.csv (archive turn {i})" for i in range(8)],
        important_discoveries=[f"Region {i} revenue 1,{i:03d},204.50 (+{i}.5%) — it's "
                               f"'final'; see arc:s:{i} … 第 {i} 轮" for i in range(items)],
        ruled_out=[{"approach": "sampling", "reason": "too coarse", "evidence": "turn 7"}],
        open_questions=["Does EMEA include Turkey?"],
        next_steps=["Write report.md"], context_to_preserve=["Person prefers EUR."])


PIECES = list("ab Z9,.%:;'-_()[]{}\"/\\#<>|…—中文 \t\r") + ["'s", "'ll", "<|endoftext|>", "12",
                                                              " k", "  ", "\u00a0"]
LINE = st.lists(st.sampled_from(PIECES), min_size=1, max_size=20).map("".join).filter(
    lambda s: not s[0].isspace() and "\n" not in s)


@settings(max_examples=300, deadline=None)
@given(st.lists(LINE, min_size=1, max_size=12))
def test_a_text_costs_the_sum_of_its_lines_on_the_line_additive_encodings(lines):
    text = "\n".join(lines)
    for name in available_encodings():
        encoding = tiktoken.get_encoding(name)
        whole = len(encoding.encode(text, disallowed_special=()))
        parts = sum(len(encoding.encode(line + "\n", disallowed_special=()))
                    for line in lines[:-1]) + len(encoding.encode(lines[-1],
                                                                  disallowed_special=()))
        assert parts == whole, (name, lines)


def test_the_offline_encoding_is_checked():
    assert OFFLINE_FALLBACK in available_encodings()


def encoded_lengths(counter: TokenCounter) -> list[int]:
    seen: list[int] = []
    original = counter.encode_count

    def encode_count(text: str) -> int:
        seen.append(len(text))
        return original(text)

    counter.encode_count = encode_count
    return seen


def test_a_grown_summary_is_counted_from_its_new_lines_only():
    counter = TokenCounter()
    count = TextCache(counter)
    before = long_summary()
    assert count.lines(render_lines(before)) == counter.encode_count(render(before))
    seen = encoded_lengths(counter)
    grown = merge(before, StructuredSummary(important_discoveries=["EMEA margin 12.5%"]))
    cap = counter.encode_count(render(grown)) - 200
    seen.clear()
    shrunk = shrink_to(grown, cap, count, count.lines)
    # Only the new item's line was encoded: never a whole rendering (kilobytes).
    assert seen and max(seen) < 100
    exact = counter.encode_count(render(shrunk))
    assert exact <= cap and count(render(shrunk)) == exact  # kept for set_summary: a lookup


def test_a_server_tokenizer_counts_the_whole_text():
    class ServerLike(TokenCounter):
        def text(self, text: str) -> int:  # a count that is not a sum of lines
            return super().text(text) + 1

    counter = ServerLike()
    assert not counter.line_additive and TokenCounter().line_additive
    lines = render_lines(long_summary(5))
    assert TextCache(counter).lines(lines) == counter.text("\n".join(lines))


def test_numbers_of_a_grown_summary_read_only_its_new_lines(monkeypatch):
    text = render(long_summary())
    numbers.numbers_in(text)
    scanned: list[int] = []

    class Recording:
        def finditer(self, line):
            scanned.append(len(line))
            return original.finditer(line)

    original = numbers.NUMBER
    monkeypatch.setattr(numbers, "NUMBER", Recording())
    grown = text.replace("</system-info>", "- EMEA margin 12.5% (archive turn 40)\n</system-info>")
    assert ("12.5%", "12.5", "12.5") in numbers.numbers_in(grown)
    assert len(scanned) == 1 and scanned[0] < 100  # the new line, not the whole summary


def test_a_texts_values_are_read_once():
    text = "rows 1,204 and 3,400; margin 12.5% (+7k)"
    first = numbers.values_in(text)
    assert numbers.values_in(text) is first  # the second audit of it is a lookup
    assert {"1204", "3400", "12.5", "7", "7000"} <= first


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(PIECES + ["\n", "<|fim_prefix|>", "<|endofprompt|>"]),
                max_size=30).map("".join))
def test_the_counter_counts_special_token_text_as_plain_text(text):
    """The counter encodes with encode_ordinary: the count of encode(text,
    disallowed_special=()), a special token's name counted as the plain text it is."""
    for name in available_encodings():
        counter = TokenCounter(encoding_name=name)
        assert counter.text(text) == len(tiktoken.get_encoding(name).encode(
            text, disallowed_special=()))
