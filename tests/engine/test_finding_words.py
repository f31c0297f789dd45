"""A tool result's line reads like a finding when it holds one of the words findings use
(agents/words/conclusions.py); the check (substring searches, and a regex for the whole
and prefix words) must say what the rule says: a listed substring anywhere, or an ASCII
word that is one of the whole words or starts with one of the prefixes."""

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from agents.words.conclusions import (_FINDING_START, _FINDING_SUBSTRINGS, _FINDING_WHOLE,
                                      _has_finding_word)

PIECES = st.lists(st.sampled_from([
    "sum", "summary", "mean", "meaning", "rows", "arrows", "fell", "rose", "roses", "grew",
    "rate", "rates", "crate", "null", "nullable", "annul", "drop", "dropped", "eavesdrop",
    "total", "subtotal", "count", "增长", "总", "同比", "x", " ", "-", "_", "1", "é", "\n",
    ".", "sum1", "rate_"]), max_size=12)


def rule(low: str) -> bool:
    if any(part in low for part in _FINDING_SUBSTRINGS):
        return True
    return any(w in _FINDING_WHOLE or w.startswith(_FINDING_START)
               for w in re.findall(r"[a-z]+", low))


@settings(max_examples=500, deadline=None)
@given(PIECES.map("".join) | PIECES.map(" ".join) | st.text(max_size=40))
@example("the failure rate fell")
@example("crates arrows annul")
def test_the_search_says_what_the_rule_says(text):
    low = text.lower()
    assert _has_finding_word(low) == rule(low)


def signed_rule(line: str) -> bool:
    """A sign followed by a digit, with no word character or dot right before the sign."""
    return any(ch in "+-−" and line[i + 1:i + 2].isdecimal()
               and not (i and (line[i - 1].isalnum() or line[i - 1] in "_."))
               for i, ch in enumerate(line))


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["+", "-", "−", "1", "a", ".", "_", " ", "é", "٣", "x-2",
                                 "(+5", "v.-3"]), max_size=12).map("".join)
       | st.text(max_size=30))
@example("-6.8% year on year")
@example("2025-Q4")
def test_a_signed_figure_is_found_as_the_rule_says(line):
    from agents.words.conclusions import _SIGNED
    assert (_SIGNED.search(line) is not None) == signed_rule(line)
