"""Numbers in text for the compaction audit (feature E3), cheap enough for every compaction.

The audit reads every number of the compacted messages and of the previous summary: tens
of kB, often thousands of numbers, per compaction. Each distinct number is converted once
(an LRU of conversions), the value set of a source text is remembered by content, and a
summary's numbers are read line by line, so a summary that gained a few lines costs those.
"""
from __future__ import annotations

import re
from collections import OrderedDict
from decimal import Decimal
from functools import lru_cache

from agents.counting.tokens import content_key

NUMBER = re.compile(r"(?<![A-Za-z_\d.])[+\-−]?(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
                    r"(\s*[%％]|\s?[kK](?![A-Za-z])|M(?![A-Za-z])|万|亿|千)?")
# NUMBER's groups, found twice as fast: this pattern starts with a digit, so the regex
# engine jumps from digit to digit instead of trying the look-behind at every character,
# and the look-behind is checked once a digit is there. The sign is left out: no group
# holds it, and it never changes which digits match (it is not in the look-behind's
# class). tests/engine/test_numbers_refs.py checks that both find the same groups.
NUMBER_GROUPS = re.compile(
    r"(\d(?<![A-Za-z_\d.]\d)(?:\d{0,2}(?:,\d{3})+(?:\.\d+)?|\d*(?:\.\d+)?))"
    r"(\s*[%％]|\s?[kK](?![A-Za-z])|M(?![A-Za-z])|万|亿|千)?")
# NUMBER_GROUPS on ASCII text, each number and its scaling suffix as one string: ASCII
# digits are [0-9], which the regex engine tests as a range instead of looking up the
# Unicode category, no other script's suffix can be there, and with no groups findall
# makes one string a number instead of a tuple of two (together a fifth of values_in's
# cost on a tool result). The number is what precedes the suffix, which holds no digit.
# A percent sign is left out: it leaves the value as written (UNSCALED), and no digit is
# in "\s*%", so where the next number starts is the same; "12.5%" is then "12.5", which
# is most often its own value, without stripping a suffix first (a third of the numbers
# of a tool result are percentages).
# tests/engine/test_reading_shortcuts.py checks both find the same numbers and suffixes.
ASCII_NUMBER = re.compile(
    r"[0-9](?<![A-Za-z_0-9.][0-9])(?:[0-9]{0,2}(?:,[0-9]{3})+(?:\.[0-9]+)?|[0-9]*(?:\.[0-9]+)?)"
    r"(?:\s?[kK](?![A-Za-z])|M(?![A-Za-z]))?")
_DIGITS = "0123456789"
_ASCII_NOT_DIGITS = "".join(c for c in map(chr, range(128)) if c not in _DIGITS)
SCALE = {"k": 1000, "m": 1_000_000, "万": 10_000, "亿": 100_000_000, "千": 1000}
# Archive references come from the engine, not from the model's memory of the data.
REFS = re.compile(r"arc:[^\s,;)\]]+|\b(?:archive\s+)?turns?\s+\d+(?:\s*(?:[-–—]|to|and|,)\s*\d+)*"
                  r"|第\s*\d+\s*轮", re.I)


def without_refs(text: str) -> str:
    # Every ref has "arc:", "turn" or "第" in it: most texts have none, and the regex
    # costs ~10 ms on 50 kB (it cannot skip ahead to a first character).
    if not text or ("arc:" not in text and "第" not in text and "turn" not in text.lower()):
        return text or ""
    return REFS.sub(" ", text)


@lru_cache(maxsize=1 << 16)
def _values(number: str, suffix: str) -> tuple[str, str]:
    scale = SCALE.get(suffix.strip().lower(), 1)
    # Most numbers: the plain form by string ops, a tenth of Decimal's cost; past 28
    # characters Decimal's normalize rounds (its precision), so it gives the value.
    if scale == 1 and len(number) <= 28:
        plain = plain_form(number)
        return plain, plain
    raw = Decimal(number.replace(",", ""))
    scaled = raw * scale
    return format(raw.normalize(), "f"), format(scaled.normalize(), "f")


def plain_form(number: str) -> str:
    """format(Decimal(number without commas).normalize(), "f") for an unsigned decimal
    numeral ("007.50" is "7.5", "1,000" is "1000")."""
    whole, _, fraction = number.replace(",", "").partition(".")
    whole, fraction = whole.lstrip("0") or "0", fraction.rstrip("0")
    return f"{whole}.{fraction}" if fraction else whole


UNSCALED = ("%", "％")  # suffixes that leave a number's value as written


def numbers_in(text: str) -> list[tuple[str, str, str]]:
    """(as written, value, scaled value) of each number, archive refs excluded: "1,234.0"
    is 1234; "50k" is 50 and 50000; "12%" is 12. Read line by line (no number or ref
    goes on past a line's end): a compaction reads the new summary's numbers three times
    (its audit, the report's figures, the source audit at the next call), and a summary
    keeps most of its lines from one compaction to the next, so only new lines are read."""
    out: list[tuple[str, str, str]] = []
    for line in (text or "").split("\n"):
        if line:
            out.extend(_numbers_of(line))
    return out


@lru_cache(maxsize=8192)
def _numbers_of(line: str) -> tuple[tuple[str, str, str], ...]:
    return tuple((m.group(0).strip(), *_values(m.group(1), m.group(2) or ""))
                 for m in NUMBER.finditer(without_refs(line)))


# values_in per text, by content: the source audit reads each archived row when the next
# compaction comes, and the compaction audit reads the same tool results again when they
# are folded a few compactions later (tens of kB each time). Keyed by a digest, so the
# cache does not keep long texts alive.
VALUES_CACHE_SIZE = 4096
_values_cache: OrderedDict[str | bytes, frozenset[str]] = OrderedDict()


def values_in(text: str) -> frozenset[str]:
    """Every value and scaled value of numbers_in(text), each distinct number once."""
    key = content_key(text or "")
    hit = _values_cache.get(key)
    if hit is not None:
        _values_cache.move_to_end(key)
        return hit
    values: set[str] = set()
    text = without_refs(text or "")
    if text.isascii():  # most texts; the same numbers, read as in the loop below
        for found in set(ASCII_NUMBER.findall(text)):
            if found[-1] not in _DIGITS:  # k, K or M: scaled
                number = found.rstrip(_ASCII_NOT_DIGITS)
                values.update(_values(number, found[len(number):]))
            elif ("," not in found and found[0] != "0" and len(found) <= 28
                    and not (found[-1] == "0" and "." in found)):
                values.add(found)
            else:
                values.update(_values(found, ""))
        return _remembered(key, values)
    for number, suffix in set(NUMBER_GROUPS.findall(text)):
        # Already plain_form(number), within Decimal's 28 digits (no thousands commas, no
        # leading zero, no trailing zero after a decimal point), and no scale: its own
        # value. Most numbers of a tool result are distinct, so they would miss _values'
        # cache; tested inline, as a function call per number cost a third of this loop.
        if ((not suffix or suffix.strip() in UNSCALED) and "," not in number
                and number[0] != "0" and len(number) <= 28
                and not (number[-1] == "0" and "." in number)):
            values.add(number)
        else:
            values.update(_values(number, suffix))
    return _remembered(key, values)


def _remembered(key: str | bytes, values: set[str]) -> frozenset[str]:
    found = _values_cache[key] = frozenset(values)
    if len(_values_cache) > VALUES_CACHE_SIZE:
        _values_cache.popitem(last=False)
    return found


known_values = values_in  # the compaction audit's name; the cache keeps what it read


@lru_cache(maxsize=4)
def summary_values(text: str) -> frozenset[str]:
    """values_in(text) for a summary: read from its numbers, which the audit of the
    compaction that wrote it already listed (numbers_in keeps the last texts' lists)."""
    return frozenset(v for _, raw, scaled in numbers_in(text) for v in (raw, scaled))
