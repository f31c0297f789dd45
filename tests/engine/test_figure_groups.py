"""Sentences said many times with only a figure changed are carried once, and the words
check reads them back exactly (C19; agents/words/figure_groups.py)."""
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.compaction.words_check import WordsCheck, flat, in_a_brace_list
from agents.counting.tokens import count_text
from agents.words.figure_groups import GROUPED_NOTE, MAX_FIGURES, group, grouped
from agents.words.person import PersonMessage, PersonWords, condense

NOTES = [f"(nota {i}) {'Los clientes valoran la rapidez.' if i % 2 else 'El mercado creció.'}"
         for i in range(40)]


def test_sentences_that_differ_in_one_figure_are_given_once_with_their_figures():
    parts = ["Prepara un informe.", *NOTES, "Prepara un informe.", "Usa euros."]
    items = group(parts)
    assert [item.render() for item in items] == [
        "Prepara un informe.",
        "(nota {0,2,4,6,8,10,12,14,16,18,20,22,24,26,28,30,32,34,36,38}) El mercado creció.",
        "(nota {1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31,33,35,37,39}) Los clientes "
        "valoran la rapidez.", "Usa euros."]
    assert items[0].again == [41]  # said again word for word: one sentence
    # Nothing to group: said so, the message stays as written.
    assert grouped(["Usa euros.", "Cita cada fuente."]) is None
    # Any script: only the digits are read.
    assert grouped(["第1章を読んでください。", "第2章を読んでください。"]) == "第{1,2}章を読んでください。"


def test_a_row_of_many_figures_stands_alone_and_a_said_again_row_is_given_once():
    row = " | ".join(str(100 + k) for k in range(MAX_FIGURES + 1))
    other = row.replace("100", "900", 1)  # the same row but for one figure
    items = group([row, other, row])
    # Not a note with one figure changed: each row is given as written.
    assert [item.render() for item in items] == [row, other]
    assert items[0].again == [2]
    # Up to MAX_FIGURES figures, such rows are still one item.
    short = " | ".join(str(100 + k) for k in range(MAX_FIGURES))
    assert grouped([short, short.replace("100", "900", 1)]) == "{100,900}" + short[3:]


def test_the_check_reads_a_brace_list_back_figure_by_figure_and_nothing_more():
    held = flat(f"{GROUPED_NOTE} (nota {{3,5,12}}) Los clientes valoran la rapidez.")
    assert in_a_brace_list(held, flat("(nota 5) Los clientes valoran la rapidez."))
    assert not in_a_brace_list(held, flat("(nota 4) Los clientes valoran la rapidez."))
    assert not in_a_brace_list(held, flat("(nota 5) El mercado creció."))
    assert not in_a_brace_list(held, flat("(nota 5) Los clientes valoran la rapidez. Y más."))
    # In a request: kept only when the block says how to read the braces.
    check = WordsCheck()
    check.add_message(" ".join(NOTES), "arc:1")
    block = grouped(NOTES)
    with_note = [{"role": "system", "zone": "words", "content": f"{GROUPED_NOTE}\n{block}"}]
    without = [{"role": "system", "zone": "words", "content": block}]
    assert check.check(with_note).missing == []
    assert len(check.check(without).missing) == len(NOTES)
    # A figure left out of the list is lost, and counted.
    cut = block.replace("{0,2,", "{2,")
    assert check.check([{**with_note[0], "content": f"{GROUPED_NOTE}\n{cut}"}]).missing == [
        flat(NOTES[0])]


def test_the_block_gives_a_numbered_brief_whole_in_a_share_it_did_not_fit_as_written():
    words = PersonWords()
    brief = "Prepara un informe. " + " ".join(NOTES)
    words.add(0, "arc:1", brief, "goal")
    as_written = count_text(brief)
    block = words.render({}, as_written - 100, [], count_text)
    assert "left out" not in block and GROUPED_NOTE in block
    assert count_text(block) <= as_written - 100 and words.wanted is None  # no model asked
    check = WordsCheck()
    check.add_message(brief, "arc:1")
    assert check.check([{"role": "system", "zone": "words", "content": block}]).missing == []
    # Too small for all of it: the rule's cut keeps as many figures as fit, and says so.
    tight = PersonWords()
    tight.add(0, "arc:1", brief, "goal")
    tight.add(1, "arc:2", "Usa euros.", "user")
    small = tight.render({}, 200, [], count_text, strict=True)
    assert "left out" in small and "Usa euros." in small and count_text(small) <= 200
    lost = check.check([{"role": "system", "zone": "words", "content": small}]).missing
    assert 0 < len(lost) < len(NOTES)


def test_a_sentence_said_again_that_does_not_fit_is_left_out_once_without_error():
    # Its first saying did not fit the room: the second is not tried on its own.
    long = "Los clientes valoran la rapidez de entrega por encima del precio y del servicio."
    text = f"Usa euros. {long} Cita cada fuente. {long}"
    body = condense(PersonMessage(0, "arc:1", text, "goal"), (), 60, count_text)
    assert "Usa euros." in body and long not in body and "left out" in body


_WORDS = st.sampled_from(["nota", "Los clientes", "第", "章", "room", "must be cleaned",
                          "(", ")", "価格", "en", "euros", ":", "-"])
_SENTENCE = st.lists(st.one_of(_WORDS, st.integers(0, 999).map(str)), min_size=1,
                     max_size=6).map(lambda parts: " ".join(parts) + ".")


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(_SENTENCE, min_size=1, max_size=30))
def test_every_sentence_grouped_is_read_back_by_the_audit(said):
    # The writer (figure_groups) and the audit's reader are separate code: whatever the
    # writer groups, the reader must find each sentence in it, word for word.
    held = flat(f"{GROUPED_NOTE} " + " ".join(item.render() for item in group(said)))
    for sentence in said:
        line = flat(sentence)
        assert line in held or in_a_brace_list(held, line), sentence
