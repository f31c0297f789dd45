"""The shortcuts that read each new tool result cheaply give what the plain definitions give:
marks (a bytes translation on ASCII text against the _MARK regex), figure values (the
inline plain-number test against numbers_in's conversions), and plain() (which skips its
regexes when no entity or template token can be in the text)."""
from __future__ import annotations

import html
import random
import re
import string

from agents.compaction import numbers
from agents.compaction.numbers import numbers_in, values_in
from agents.words.marks import _COMMON, _MARK, TEMPLATE_TOKEN, marks, plain, unescaped

TRICKY_NUMBERS = ["007.50", "1,000", "1,234.0", "50k", "50 K", "3M", "12%", "12 ％", "0", "0.0",
                  "10", "100.10", "2024-Q3", "-19.4%", "+7", "v2.5", "x99", "1.2.3", "5万",
                  "12345678901234567890123456789.5", "0.000", "42", "1e5", "3,4", "99,999,999"]


def _random_texts(seed: int, count: int = 200) -> list[str]:
    rng = random.Random(seed)
    alphabet = string.printable + "é_"
    texts = []
    for _ in range(count):
        parts = [rng.choice(TRICKY_NUMBERS) if rng.random() < 0.3
                 else "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
                 for _ in range(rng.randint(1, 40))]
        texts.append(rng.choice([" ", "", "\n", ", "]).join(parts))
    return texts


def test_ascii_marks_are_the_regex_marks():
    texts = _random_texts(1) + [string.printable * 3, "The THE the and_so ab 12 1 123 A_B9 x"]
    for text in texts:
        if not text.isascii():
            continue
        expected = {m.casefold() for m in _MARK.findall(text)} - _COMMON
        assert marks(text) == expected, text


def test_values_are_every_value_and_scaled_value_of_the_numbers():
    for text in _random_texts(2) + [" ".join(TRICKY_NUMBERS)]:
        numbers._values_cache.clear()
        expected = {v for _, raw, scaled in numbers_in(text) for v in (raw, scaled)}
        assert values_in(text) == expected, text


def test_plain_undoes_entities_and_drops_template_tokens_only_where_they_can_be():
    framed = "<|im_start|>user [INST] Budget &lt;= 5 &amp;amp; done</s> [/INST]"
    assert plain(framed) == TEMPLATE_TOKEN.sub(" ", "<|im_start|>user [INST] Budget <= 5 & "
                                                    "done</s> [/INST]")
    assert plain("[INST] Only bracketed [/INST]") == "  Only bracketed  "  # no "<" in it
    assert unescaped("a &amp;lt; b") == html.unescape(html.unescape("a &amp;lt; b"))
    for text in _random_texts(3):
        assert plain(text) == TEMPLATE_TOKEN.sub(" ", unescaped(text)), text
    plain_text = "Fact 1: unit cost 0.51 USD/kWh (-19.4% year on year)."
    assert plain(plain_text) is plain_text  # nothing to undo: the same text, not a copy


def test_error_and_table_lines_are_the_single_regexes_lines():
    from agents.words.conclusions import _is_error, _is_table_row
    error = re.compile(r"^\s*(?:error|exception|traceback|warning)\b|错误|失败", re.I)
    table = re.compile(r"\|.*\||\d,[^\s\d]*,\S*,")
    lines = ["Error: disk full", "  WARNING low", "errors: 3", "Traceback (most recent call)",
             "the exception was caught", "导出失败", "查询错误 3 行", "a | b | c", "1,ab,c,",
             "1,2,3", "total, 5 rows", "x|y", "exceptıon: dotless i", "\twarning\tx",
             "warning_count: 2", "Fact 2: energy source #6 was 191.2 million EUR (-18.7%)."]
    lines += _random_texts(4, 100)
    for line in lines:
        assert _is_error(line) == bool(error.search(line)), line
        assert _is_table_row(line) == bool(table.search(line)), line


QUANTITY_PIECES = ["$", "¥", "€", "£", "x$", "a¥", ".$", "_€", "12", "1,234", "1,234.5", "3.",
                   ".5", "50k", "5 K", "3M", "7Mb", "12%", "12 ％", "5万", "3 千", " pages", "页",
                   "分钟", "个月", "q2", "Q2", "v1.2", "٣", "٣٤", "١٢٣", "é7", "名3", "-", "+",
                   "−", " ", "\n", ",", "rows", "2024-Q3", "#4", "0.43", "units", "条", "x"]


def _quantity_texts(seed: int, count: int = 400) -> list[str]:
    rng = random.Random(seed)
    texts = ["".join(rng.choice(QUANTITY_PIECES) for _ in range(rng.randint(1, 14)))
             for _ in range(count)]
    return texts + _random_texts(seed, 100) + [
        "总预算 ≤ ¥200万，报告20页以内", "Fact 6: energy source #6 was 191.2 million EUR (-18.7%).",
        "预算：5万元；截至3月底完成，共12条", "Tokyo: 東京の売上は3,400万円、前年比+12.5%",
        "café 12 crème 3,5 naïve 1.234,56 €", "a$5 $5 .$5 _$5 5$ $$5 ¥ 5"]


def test_the_quantities_counted_from_their_digit_are_quantity_re_s():
    from agents.words.conclusions import _QUANTITY_AT_DIGIT
    from agents.words.patterns import QUANTITY_RE
    for text in _quantity_texts(5):
        assert len(_QUANTITY_AT_DIGIT.findall(text)) == len(QUANTITY_RE.findall(text)), text
        ends = [m.end() for m in QUANTITY_RE.finditer(text)]
        assert [m.end() for m in _QUANTITY_AT_DIGIT.finditer(text)] == ends, text


NUMBER_TEXTS = ["55.3 %", "55.3 \t %", "55.3\t%", "55.3\x1c%", "12 k", "12k", "12kg", "12 K.",
                "3M", "3MB", "3 M", "1,234k", "0.50%", "007 %", "1,23", "1,234,567.80", "x1.5",
                "_2", ".5", "5.", "a 5%b", "2024-Q3: +7.5% (n=12)", "10\n%", "1e5k", "99,999 k"]


def test_ascii_numbers_are_number_groups_numbers_and_scaling_suffixes():
    """ASCII_NUMBER leaves out a percent sign (it scales nothing), and only that."""
    from agents.compaction.numbers import ASCII_NUMBER, NUMBER_GROUPS, SCALE, UNSCALED
    texts = _random_texts(6, 300) + _quantity_texts(7) + NUMBER_TEXTS + [" ".join(NUMBER_TEXTS)]
    for text in texts:
        if text.isascii():
            groups = NUMBER_GROUPS.findall(text)
            whole = [number + ("" if suffix.strip() in UNSCALED else suffix)
                     for number, suffix in groups]
            assert ASCII_NUMBER.findall(text) == whole, text
            assert all(SCALE.get(suffix.strip().lower(), 1) == 1
                       for _, suffix in groups if suffix.strip() in UNSCALED)


def test_values_of_texts_in_any_script_are_the_values_of_their_numbers():
    texts = _quantity_texts(8) + NUMBER_TEXTS + [
        "销售额 1,234.5 万元，同比 +12%，共 ３ 项", "売上は3,400万円、前年比12.5％増",
        "prix 1 234,56 € — 12 %",
        "٣٤ ١٢٣.٥ 12", "naïve 50 k café 7M", " ".join(NUMBER_TEXTS) + " 东京"]
    for text in texts:
        numbers._values_cache.clear()
        expected = {v for _, raw, scaled in numbers_in(text) for v in (raw, scaled)}
        assert values_in(text) == expected, text


def _label_by_quantity_re(line: str) -> str:
    """_label as QUANTITY_RE reads the line (its definition before the digit-first copy)."""
    from agents.words.conclusions import _CONCLUSION, _SMALL_ID, _WORDS
    from agents.words.patterns import QUANTITY_RE
    body = _CONCLUSION.sub("", line)

    def keep_ids(m: re.Match) -> str:
        figure = body[m.start():m.start("unit") if m.group("unit") else m.end()].strip()
        signed = m.start() > 0 and body[m.start() - 1] in "+-−"
        bare = _SMALL_ID.fullmatch(figure) and not signed
        return f" {figure if bare else ''} {m.group('unit') or ''} "
    return " ".join(_WORDS.findall(QUANTITY_RE.sub(keep_ids, body).lower()))[:60]


def test_a_finding_s_label_is_the_one_quantity_re_gives():
    from agents.words.conclusions import _label
    lines = _quantity_texts(9, 600) + [
        "Fact 1: energy source #4 throughput in the South region for 2022-Q4 was 1725.6 "
        "units/day (+1.2% year on year; market study).", "Result: region 3 sales $12 (+5 %)",
        "total: $5, ¥3 pages, x$4 rows, -$7 and +$8 or .$9", "Summary: 缺失值比例：2.5%，第3组12条",
        "region 1 ＄5 €12k 3 页 £ 4 ٣ units", "KELVIN 5 K ſum 3 İstanbul 12"]
    for line in lines:
        assert _label(line) == _label_by_quantity_re(line), line


def test_neutralised_skips_only_texts_where_no_marker_can_start():
    from agents.context.markers import _MARKER, ENGINE_TAGS, QUOTED_NOTE, neutralised
    pieces = ["<", ">", "&lt;", "&gt;", "&LT;", "&Gt;", "/", " ", "\n", "&", "&amp;", "x",
              "<b>", *ENGINE_TAGS, *(t.upper() for t in ENGINE_TAGS), "<system>", "info"]
    rng = random.Random(9)
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))) for _ in range(400)]
    texts += _random_texts(10) + ["Fact 1: unit cost 0.51 USD/kWh (-19.4% year on year)."]
    for text in texts:
        expected = _MARKER.sub(
            lambda m: f"‹{m.group(1)}{m.group(2).lower()}{QUOTED_NOTE}›", text)
        assert neutralised(text) == expected, text


def test_merge_anchors_remembered_normal_forms_are_the_plain_ones(monkeypatch):
    from agents.store.interface import AnchorRecord
    from agents.words import merge
    rng = random.Random(11)
    words = ["Total", "total", "  rows", "ROWS\t", "3.5%", "Ünïcode", "ß", "SS", "\n", "up"]
    texts = ["".join(rng.choice(words) for _ in range(rng.randint(1, 6))) for _ in range(300)]
    for text in texts * 2:  # the second time from the memo
        assert merge.normalized(text) == " ".join(text.split()).casefold(), text

    def records(k):
        return [AnchorRecord(tier=rng.choice([2, 3]), text=rng.choice(texts),
                             key=f"fact:{rng.randint(0, 3)}", turn=k) for _ in range(rng.randint(0, 4))]

    cases = [(records(k), records(k)) for k in range(200)]
    remembered = [merge.merge_anchors(old, new) for old, new in cases]
    monkeypatch.setattr(merge, "normalized", lambda text: " ".join(text.split()).casefold())
    plain = [merge.merge_anchors(old, new) for old, new in cases]
    assert [[(c.action, c.old, c.new) for c in changes] for changes in remembered] == \
        [[(c.action, c.old, c.new) for c in changes] for changes in plain]
    assert any(changes for changes in plain) and any(not changes for changes in plain)


def test_content_keys_of_recent_texts_are_their_digests():
    import hashlib

    from agents.counting.tokens import DIGEST_FROM_CHARS, content_key

    def digest(text):
        if len(text) < DIGEST_FROM_CHARS:
            return text
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    rng = random.Random(12)
    base = ["x" * DIGEST_FROM_CHARS, "y" * 5000, "Y" * 5000, "Fact 1: 0.51 USD/kWh\n" * 40, "短" * 300, "z"]
    texts = base + ["".join([t, ""]) + "!" for t in base] + [t[:-1] + "\ud800" for t in base[:2]]
    for _ in range(2000):  # the same objects again and again, in any order
        text = rng.choice(texts)
        assert content_key(text) == digest(text)


def test_an_anchor_is_carried_exactly_when_the_joined_request_holds_it():
    from agents.report import carried
    rng = random.Random(13)
    pieces = ["Budget", " at most", " 50k", "\n", "EUR.", "", "budget at", "most 50k EUR."]
    contents = [None, "", ["a", "b"], {"text": "x"}, *pieces,
                *("".join(rng.choice(pieces) for _ in range(4)) for _ in range(40))]
    expected = ["Budget at most 50k EUR.", "at most", "EUR.\nBudget", "\n", "", "50k\n",
                "['a', 'b']", "x"]
    for _ in range(2000):
        messages = [{"role": "user", "content": rng.choice(contents)}
                    for _ in range(rng.randint(0, 5))]
        joined = "\n".join(str(m.get("content") or "") for m in messages)
        for text in expected + [rng.choice(pieces) + rng.choice(pieces)]:
            assert carried(text, messages) == (text in joined), (text, messages)
