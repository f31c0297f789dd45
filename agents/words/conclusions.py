"""Tier-2 anchors (feature C8): the conclusions a tool result states, kept while they are news.

A line scores as a finding by its shape ("key: value" with a number, a percentage, words
like total or 下降); the best few of a result become tier-2 anchors keyed by what they
measure, so a later value of the same measure replaces the earlier one.
"""
from __future__ import annotations

import json
import re

from agents.store.interface import AnchorRecord
from agents.words.anchors import clip_text, sentences
from agents.words.patterns import NUM, QUANTITY_RE

CONCLUSIONS_PER_RESULT = 3
_WORDS = re.compile(r"[a-z0-9][a-z0-9'_-]*|[\u4e00-\u9fff]+", re.I)
_LIST_MARK = re.compile(r"^\s*(?:[-*•]|\d+[.)、])\s+")
_CONCLUSION = re.compile(r"^\s*(?:结论|总结|发现|要点|(?:key\s+)?(?:conclusion|finding|result|summary)s?)"
                         r"\s*[:：]\s*", re.I)
_KEY_VALUE = re.compile(r"^\s*[^:：]{1,60}[:：]\s*\S")
# Words that make a line read like a finding. A regex alternation of these costs ~40 µs a
# line; word lookups in sets cost ~3 µs, and this runs on every tool result.
_FINDING_SUBSTRINGS = ("total", "missing", "average", "median", "overall", "count", "declin",
                       "increase", "growth", "change", "share", "ratio", "合计", "总计", "总",
                       "缺失", "平均", "增长", "下降", "上升", "同比", "环比", "占比", "比例")
_FINDING_WHOLE = frozenset({"sum", "mean", "rows", "fell", "rose", "grew", "rate"})
_FINDING_START = ("null", "drop")
_FINDING_ASCII = tuple(part for part in _FINDING_SUBSTRINGS if part.isascii())
_FINDING_OTHER = tuple(part for part in _FINDING_SUBSTRINGS if not part.isascii())
_WORD_LETTERS = tuple(sorted(_FINDING_WHOLE)) + _FINDING_START
# A whole word or a prefix word, as a run of ASCII letters. Every branch starts with a
# literal character and checks "no letter before it" only once that character is there
# (the look-behind spans it): the regex engine then skips to the characters that can
# start a branch instead of trying a look-behind at every position.
_BOUNDED_WORD = re.compile("|".join(
    [f"{w[0]}(?<![a-z]{w[0]}){w[1:]}(?![a-z])" for w in sorted(_FINDING_WHOLE)]
    + [f"{w[0]}(?<![a-z]{w[0]}){w[1:]}" for w in _FINDING_START]))


def _has_finding_word(low: str) -> bool:
    """True when the lower-cased line holds a word that findings use: one of
    _FINDING_SUBSTRINGS anywhere, or a run of ASCII letters in _FINDING_WHOLE or starting
    with one of _FINDING_START."""
    # Substring searches, which skip ahead: one regex with every word tried its ~25
    # branches at most characters of the line (4 µs a line, on every line scored; these
    # cost half). The bounded words are looked for by the regex only in a line that holds
    # one of them somewhere, and the Chinese ones only in a line that is not ASCII.
    for part in _FINDING_ASCII:
        if part in low:
            return True
    if not low.isascii():
        for part in _FINDING_OTHER:
            if part in low:
                return True
    for word in _WORD_LETTERS:
        if word in low:
            return _BOUNDED_WORD.search(low) is not None
    return False


# A sign before a digit, not after a word or a dot; the look-behind spans the sign so the
# search skips to the signs (see _FINDING_WORD).
_SIGNED = re.compile(r"[+\-−](?<![\w.][+\-−])\d")
# An error line: one of these words first, or 错误 / 失败 anywhere. Matched at the start
# and looked for as substrings: one regex with all three searched every position for the
# Chinese words (~1.4 µs a line, on every line of every tool result).
_ERROR_START = re.compile(r"\s*(?:error|exception|traceback|warning)\b", re.I)
_TABLE_ROW = re.compile(r"\|.*\||\d,[^\s\d]*,\S*,")  # markdown table or CSV line: data
_SMALL_ID = re.compile(r"\d{1,2}")
# QUANTITY_RE's matches from their digit, to count them and to label a finding: the same
# ends, so as many. It checks QUANTITY_RE's look-behind at the digit (see
# numbers.NUMBER_GROUPS), so the search skips from digit to digit instead of trying the
# look-behind at every character (half the cost). A currency sign that QUANTITY_RE takes
# first changes no count: its look-behind then checks the character before the sign, and
# the sign passes the look-behind at the digit. tests/engine/test_reading_shortcuts.py
# checks that both find as many, ending where QUANTITY_RE's do.
_QUANTITY_AT_DIGIT = re.compile(
    r"\d(?<![A-Za-z_\d.]\d)(?:\d{0,2}(?:,\d{3})+(?:\.\d+)?|\d*(?:\.\d+)?)"
    + QUANTITY_RE.pattern.partition(f"(?P<num>{NUM})")[2])
_CURRENCY = "¥$€£"  # QUANTITY_RE's currency signs
_NOT_BEFORE_QUANTITY = re.compile(r"[A-Za-z_\d.]")  # QUANTITY_RE's look-behind
# _WORDS on lower-cased ASCII text, where re.I adds nothing and the CJK branch never
# matches: without re.I the class is a range test (_label runs on every result's findings).
_ASCII_LOW_WORDS = re.compile(r"[a-z0-9][a-z0-9'_-]*")


def _is_error(line: str) -> bool:
    return _ERROR_START.match(line) is not None or "错误" in line or "失败" in line


def _is_table_row(line: str) -> bool:
    # Each branch of _TABLE_ROW needs a "|" or a ",": most lines have neither.
    return ("|" in line or "," in line) and _TABLE_ROW.search(line) is not None


def _result_lines(text: str) -> list[str]:
    """Candidate lines of a tool result; a JSON object becomes "key: value" lines."""
    stripped = text.strip()
    try:
        data = json.loads(stripped) if stripped.startswith("{") else None
    except ValueError:
        data = None
    if isinstance(data, dict):
        pairs = [(f"{k}.{sub}" if sub else k, v) for k, val in data.items()
                 for sub, v in (val.items() if isinstance(val, dict) else [("", val)])]
        return [f"{k}: {v}" for k, v in pairs
                if isinstance(v, (str, int, float)) and not isinstance(v, bool)]
    lines = [part for line in stripped.splitlines()
             for part in (sentences(line) if len(line) > 300 else [line])]
    return [_LIST_MARK.sub("", ln).strip() for ln in lines if ln.strip()]


def _finding_score(line: str) -> int:
    """How much a line reads like a finding; below 3 it is not one."""
    quantities = len(_QUANTITY_AT_DIGIT.findall(line))
    score = 5 if _CONCLUSION.match(line) else 0
    if (len(line) > 400 or _is_error(line) or _is_table_row(line)
            or quantities >= 6 or not (quantities or score)):
        return 0
    score += 3 * bool(quantities and _KEY_VALUE.match(line))
    score += 2 * ("%" in line or "％" in line) + 2 * _has_finding_word(line.lower())
    return score + bool(_SIGNED.search(line))


def _label(line: str) -> str:
    """What a finding measures: its words without the measured figures. Small bare integers
    stay, as they usually name things ("region 1", "topic 0")."""
    body = _CONCLUSION.sub("", line)
    def keep_ids(m: re.Match) -> str:
        start = m.start()
        if (start and body[start - 1] in _CURRENCY
                and not (start > 1 and _NOT_BEFORE_QUANTITY.match(body, start - 2))):
            # QUANTITY_RE's match starts at the sign; left in the body, it is no word.
            start -= 1
        figure = body[start:m.start("unit") if m.group("unit") else m.end()].strip()
        signed = start > 0 and body[start - 1] in "+-−"
        bare = _SMALL_ID.fullmatch(figure) and not signed
        return f" {figure if bare else ''} {m.group('unit') or ''} "
    low = _QUANTITY_AT_DIGIT.sub(keep_ids, body).lower()
    return " ".join((_ASCII_LOW_WORDS if low.isascii() else _WORDS).findall(low))[:60]


def extract_conclusions(text: str, *, source: str = "tool", turn: int = 0, tool_name: str = "",
                        limit: int = CONCLUSIONS_PER_RESULT) -> list[AnchorRecord]:
    """The most conclusion-like lines of a tool result as tier-2 anchors, in result order."""
    scored = [(score, i, line) for i, line in enumerate(_result_lines(text or ""))
              if (score := _finding_score(line)) >= 3]
    best = sorted(sorted(scored, key=lambda s: (-s[0], s[1]))[:limit], key=lambda s: s[1])
    prefix = f"fact:{tool_name}:" if tool_name else "fact:"
    return [AnchorRecord(tier=2, text=clip_text(line), key=prefix + _label(line),
                         source=source, turn=turn) for _, _, line in best]
