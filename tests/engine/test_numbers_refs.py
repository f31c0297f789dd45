"""The audit's number reader skips the refs regex on texts that hold no ref
(agents/compaction/numbers.py): the numbers it finds must be the same as with the regex run."""
from decimal import Decimal

from hypothesis import example, given, settings
from hypothesis import strategies as st

from agents.compaction.numbers import (NUMBER, REFS, known_values, numbers_in, values_in,
                                       without_refs)

PARTS = st.lists(st.sampled_from(["turn 12", "arc:s:4", "Turns 3-5", "TURN 9", "第 7 轮",
                                  "x1,234", "-12.5%", "3,400", "50k", "7M", "a-5", "id9f3",
                                  "returns 8", " ", "\n"]), max_size=30)


@settings(max_examples=300, deadline=None)
@given(PARTS)
def test_numbers_are_those_of_the_regex_after_removing_refs(parts):
    text = " ".join(parts)
    assert without_refs(text) == REFS.sub(" ", text)
    # Numbers and refs are read line by line: neither goes on past a line's end.
    expected = [(m.group(0).strip(), m.group(1)) for line in text.split("\n")
                for m in NUMBER.finditer(REFS.sub(" ", line))]
    assert [(w, raw) for w, raw, _ in numbers_in(text)] == [
        (w, format(Decimal(g1.replace(",", "")).normalize(), "f")) for w, g1 in expected]
    assert values_in(text) == set(known_values(text))


def test_examples():
    assert [w for w, _, _ in numbers_in("sales -12.5% in region2, 3,400 units, 50k rows")] == \
        ["-12.5%", "3,400", "50k"]
    assert numbers_in("see arc:s:12 and Turn 4") == []
    assert without_refs("no reference here: 12 rows") == "no reference here: 12 rows"


NUMERALS = st.text(alphabet="0123456789,.+-−kKM%％万亿千 aZ_x\n", max_size=40)


@settings(max_examples=500, deadline=None)
@given(NUMERALS)
@example("1" + "0" * 27 + "1")  # past Decimal's 28 digits of precision: rounded, as before
def test_the_digit_first_pattern_finds_the_groups_of_number(text):
    """values_in reads numbers with NUMBER_GROUPS (twice as fast on a tool result) and
    converts them by string: the values must be those of NUMBER's groups through Decimal."""
    from agents.compaction.numbers import NUMBER_GROUPS, SCALE
    assert NUMBER_GROUPS.findall(text) == NUMBER.findall(text)
    expected = set()
    for number, suffix in NUMBER.findall(without_refs(text)):
        raw = Decimal(number.replace(",", ""))
        scaled = raw * SCALE.get(suffix.strip().lower(), 1)
        expected.update((format(raw.normalize(), "f"), format(scaled.normalize(), "f")))
    assert values_in(text) == expected


def test_plain_forms_of_numerals():
    from agents.compaction.numbers import plain_form
    assert [plain_form(n) for n in ("007.50", "1,000", "0.0", "100", "3.000", "0.05")] == \
        ["7.5", "1000", "0", "100", "3", "0.05"]
