"""The snapshot's list of what is in force is read from the person's own sentences (C19):
a rule in any language is listed (or the list points at the block that holds it), nothing
a later message changed or pasted material said is listed as in force, and two
requirements that give different figures of the same unit, in one message or in two, are
shown and told to the agent once, neither dropped. Bad input (only emoji, only a table, a
message that contradicts itself, a correction of something never said) has a visible
outcome."""
import pytest

from agents.compaction.words_check import WordsCheck, flat, listed_in_force
from agents.config import ContextConfig
from agents.context.snapshot import render_snapshot
from agents.counting.tokens import TokenCounter
from agents.events import EventType
from agents.words.in_force import (HEADING, NO_WORDS_LABEL, POINTER, UNANCHORED_LABEL, Message,
                                   read_view, split_sentences)

from .helpers import run_scenario

COUNT = TokenCounter().text
# Rules no English or Chinese pattern of the anchor extraction reads as a constraint.
RULES = {
    "es": "Los importes deben estar en euros suizos.",
    "fr": "Le rapport ne doit jamais citer de noms de clients.",
    "de": "Verwende keine Daten aus der Zeit vor der Fusion.",
    "ja": "顧客の名前は絶対に書かないでください。",
}
EMAIL = ("From: Anna Weber <anna@example.com>\nTo: team@example.com\nSubject: cleanup\n\n"
         "You must delete the report before Friday.")


def docs(n, tokens=1200):
    return [{"tool": "fetch_document", "args": {"tokens": tokens, "topic": f"t{i}"}}
            for i in range(n)]


def run(said, window=8000, n=8, **extra):
    steps = docs(n)
    for i, text in enumerate(said):
        steps.insert(1 + 2 * i, {"user": text})
    return run_scenario({"name": "t", "goal": "Write the memo.", "steps": steps +
                         [{"final": "ok"}], **extra}, window=window,
                        config=ContextConfig(clear_tool_results=False))


def agent_calls(out, after_text=None):
    turn = 0
    if after_text is not None:
        turn = next(e.turn for e in out.sink.of_type(EventType.USER_MESSAGE)
                    if after_text in e.payload["text"])
    return [e for e in out.sink.of_type(EventType.MODEL_CALL)
            if e.payload["kind"] == "agent" and e.turn >= turn]


def zone(call, *names):
    return "\n".join(str(m["content"]) for m in call.payload["messages"]
                     if m.get("zone") in names)


def person_held(call):
    """The words block and the person's own messages in the recent turns."""
    return flat("\n".join(str(m["content"]) for m in call.payload["messages"]
                          if m.get("zone") == "words"
                          or (m.get("zone") == "history" and m["role"] == "user")))


@pytest.mark.parametrize("window", [8000, 32_000])
@pytest.mark.parametrize("lang", sorted(RULES))
def test_a_rule_in_any_language_is_in_the_list_or_the_list_points_at_where_it_is(lang, window):
    rule = RULES[lang]
    out = run(["The memo must be at most 3 pages.", rule, "Thanks, carry on."], window=window)
    assert out.run.status == "finished", out.run.result.error
    assert sum(p["kind"] == "summary" for p in out.payloads(EventType.COMPACTION)) >= 1
    calls = agent_calls(out, after_text=rule)
    assert len(calls) >= 4
    for call in calls:
        # The snapshot as the model reads it: the frozen one and its "since then" lines (a
        # new message's sentences wait there while the history holds the message whole).
        snapshot = zone(call, "snapshot", "since")
        listed = listed_in_force(snapshot)
        said_at = next(e.turn for e in out.sink.of_type(EventType.USER_MESSAGE)
                       if e.payload["text"] == rule)
        pointed = any(line.startswith("- [turn") and POINTER in line and str(said_at) in
                      line.split("]")[0] for line in snapshot.splitlines())
        assert flat(rule) in listed or (pointed and flat(rule) in person_held(call)), snapshot
    report = out.run.report
    assert report["person_words_kept"] == 1.0
    assert (report["superseded_listed"], report["quoted_promoted"],
            report["tool_text_in_constraints"]) == (0, 0, 0)


CORRECTIONS = [  # (rule, a later correction without any signal word)
    ("El informe debe tener como máximo 300 palabras.", "El informe: 500 palabras."),
    ("Le rapport doit faire au plus 10 pages.", "Le rapport : 12 pages."),
    ("Der Bericht darf höchstens 10 Seiten haben.", "Der Bericht jetzt 12 Seiten."),
    ("報告書は3ページ以内にすること。", "報告書は5ページで。"),
    ("Amounts must be in euros.", "Amounts in Swiss francs, please."),
]


@pytest.mark.parametrize("old,new", CORRECTIONS)
def test_a_rule_a_later_message_changed_is_never_listed_as_in_force(old, new):
    out = run([old, new])
    assert out.run.status == "finished", out.run.result.error
    calls = agent_calls(out, after_text=new)
    assert len(calls) >= 4
    for call in calls:
        snapshot = zone(call, "snapshot")
        assert flat(old) not in listed_in_force(snapshot)
        assert f"- {old}\n  later, turn" in snapshot  # shown with what changed it
        held = person_held(call) + flat(snapshot)
        assert flat(old) in held and flat(new) in held  # both verbatim, neither dropped


def test_pasted_e_mail_text_is_never_listed_as_the_person_s():
    said = f"Do not delete any files. Please read:\n{EMAIL}"
    out = run([said])
    assert out.run.status == "finished", out.run.result.error
    calls = agent_calls(out, after_text="Please read")
    assert calls
    for call in calls:
        listed = listed_in_force(zone(call, "snapshot"))
        assert not any("delete the report" in item for item in listed), listed
    assert out.run.report["quoted_promoted"] == 0
    view = read_view([Message(1, "user", "arc:1", said)])
    assert [s.text for s in view.in_force] == ["Do not delete any files.", "Please read:"]


def hints_of(out, kind="contradiction"):
    return [p for p in out.payloads(EventType.HINT_BLOCK) if p["kind"] == kind]


def test_requirements_of_two_messages_that_cannot_both_hold_are_told_once_and_shown():
    first, second = "The memo must be at most 300 words.", "The memo must be at least 800 words."
    out = run([first, "Thanks, carry on.", second])
    assert out.run.status == "finished", out.run.result.error
    hints = hints_of(out)
    assert len(hints) == 1  # told once, in the drawer's hints and to the agent
    assert ('"The memo must be at most 300 words" and "The memo must be at least 800 words"'
            in hints[0]["text"]) and "300 words / 800 words" in hints[0]["text"]
    calls = agent_calls(out, after_text=second)
    told = [c for c in calls if "[contradiction]" in zone(c, "hints")]
    assert len(told) == 1
    for call in calls:
        snapshot = zone(call, "snapshot")
        assert ('- "The memo must be at most 300 words" / "The memo must be at least 800 '
                'words"') in snapshot
        held = person_held(call) + flat(snapshot)
        assert flat(first) in held and flat(second) in held  # neither dropped


def test_a_later_figure_in_another_language_is_a_possible_contradiction_but_a_plain_replacement_is_not():
    unsure = run(["Le rapport fait au plus 10 pages.", "Le rapport fait 20 pages."])
    assert len(hints_of(unsure)) == 1
    replaced = run(["At most 300 words.", "Change the word limit to 500 words instead."])
    assert hints_of(replaced) == []  # it says it replaces: no question to ask
    snapshot = zone(agent_calls(replaced)[-1], "snapshot")
    assert "- At most 300 words.\n  later, turn" in snapshot  # still shown, not in force


def test_a_list_of_numbered_parts_is_no_contradiction():
    said = " ".join(f"Part {i} of the draft reads well." for i in range(12))
    view = read_view([Message(1, "user", "arc:1", said)])
    assert view.conflicts == ()
    pairs = read_view([Message(1, "user", "arc:1", "1. Section 6 must stay under 106 words.\n"
                               "2. Section 6 must stay under 157 words.\n"
                               "3. Section 7 must stay under 107 words.")]).conflicts
    assert [(c.first.text, c.second.text) for c in pairs] == [
        ("1. Section 6 must stay under 106 words.", "2. Section 6 must stay under 157 words.")]


def test_bad_input_has_a_visible_outcome_and_never_stops_the_run():
    table = "| rule | limit |\n|---|---|\n| R1 | at most 10 rows |\n| R2 | at most 20 rows |"
    emoji = "😀😀😀"
    self_contradicting = ("El informe debe tener como máximo 300 palabras. El informe debe "
                          "tener como máximo 900 palabras.")
    never_said = "Change the budget to 80k tokens instead."
    out = run([emoji, table, self_contradicting, never_said], window=32_000)
    assert out.run.status == "finished", out.run.result.error
    last = agent_calls(out)[-1]
    snapshot = zone(last, "snapshot")
    assert f"· {NO_WORDS_LABEL}] {emoji}" in snapshot
    assert "] | R1 | at most 10 rows |" in snapshot and "] | R2 | at most 20 rows |" in snapshot
    assert "|---|---|" not in snapshot  # a table's rule line says nothing; it stays in the words
    assert f"· {UNANCHORED_LABEL}] {never_said}" in snapshot
    assert ('- "El informe debe tener como máximo 300 palabras" / "El informe debe tener como '
            'máximo 900 palabras"') in snapshot
    assert len(hints_of(out)) == 1
    report = out.run.report
    assert report["person_words_kept"] == 1.0
    assert (report["superseded_listed"], report["quoted_promoted"],
            report["tool_text_in_constraints"]) == (0, 0, 0)


def test_a_list_too_long_for_the_snapshot_points_at_the_block_and_nothing_is_missing():
    numbered = "\n".join(f"{i}. Section {i} must cite source S{i}." for i in range(1, 41))
    messages = [Message(0, "goal", "arc:0", "Write the memo."),
                Message(1, "user", "arc:1", numbered),
                Message(2, "user", "arc:2", "Los importes en francos suizos.")]
    view = read_view(messages)
    snapshot = render_snapshot(goal="Write the memo.", anchors=[], tasks=[], notes_text="",
                               budget_tokens=200, count=COUNT, view=view, list_tokens=60,
                               person_texts=[m.text for m in messages])
    assert HEADING in snapshot
    assert f"- [turn 1] {POINTER} verbatim in the person's words block" in snapshot
    assert "- [turn 2] Los importes en francos suizos." in snapshot  # the newest still fits
    assert COUNT(snapshot) < 200
    # The block holds what the list points at: together nothing in force is missing.
    check = WordsCheck()
    for m in messages:
        check.add_message(m.text)
    request = [{"role": "system", "zone": "snapshot", "content": snapshot},
               {"role": "system", "zone": "words", "content": numbered}]
    assert check.check(request).missing == []


def test_sentences_keep_their_list_number_and_skip_lines_of_only_punctuation():
    assert split_sentences("1. First rule.\n2. Second one. Third.\n|---|---|\n- item\n😀") == [
        "1. First rule.", "2. Second one.", "Third.", "- item", "😀"]
    assert split_sentences("Use 1.5 pages. Then stop.") == ["Use 1.5 pages.", "Then stop."]


def test_many_possible_contradictions_are_counted_past_the_list_s_budget():
    said = " ".join(f"Chapter {k} has at most {10 + k} pages. Chapter {k} has at most {50 + k} "
                    "pages." for k in range(1, 9))
    messages = [Message(0, "goal", "arc:0", "Write the book."), Message(1, "user", "arc:1", said)]
    view = read_view(messages)
    assert len(view.conflicts) == 8
    roomy, tight = (render_snapshot(goal="Write the book.", anchors=[], tasks=[], notes_text="",
                                    budget_tokens=0, count=COUNT, view=view, list_tokens=tokens,
                                    person_texts=[said]) for tokens in (2000, 30))
    assert roomy.count('- "Chapter') == 8 and "more pairs" not in roomy
    assert tight.count('- "Chapter') == 1  # the first is named whatever the budget
    assert "- and 7 more pairs of the person's sentences" in tight
    assert COUNT(tight) < COUNT(roomy) // 2


def test_a_long_numbered_list_yields_only_its_real_contradiction():
    lines = [f"{i}. Section {i} must stay under {100 + i} words, as of 2026." for i in range(1, 1201)]
    lines.insert(700, "Section 7 must stay under 400 words, as of 2026.")
    view = read_view([Message(1, "user", "arc:1", "\n".join(lines))])
    assert [(c.first.text, c.second.text) for c in view.conflicts] == [
        ("7. Section 7 must stay under 107 words, as of 2026.",
         "Section 7 must stay under 400 words, as of 2026.")]


def test_a_rule_corrected_twice_is_shown_with_the_newest_correction():
    view = read_view([Message(1, "user", "arc:1", "El informe debe tener como máximo 3 páginas."),
                      Message(3, "user", "arc:3", "El informe: 5 páginas. Gracias."),
                      Message(5, "user", "arc:5", "Todo bien. El informe: 8 páginas.")])
    assert [(c.earlier.text, c.later.text) for c in view.changed] == [
        ("El informe debe tener como máximo 3 páginas.", "El informe: 8 páginas."),
        ("El informe: 5 páginas.", "El informe: 8 páginas.")]
    assert [s.text for s in view.in_force] == ["Gracias.", "Todo bien.", "El informe: 8 páginas."]


def test_a_contradiction_told_once_is_not_told_again_after_a_resume():
    from agents.context.hints import HintInjector

    first, second = "The memo must be at most 300 words.", "The memo must be at least 800 words."
    out = run([first, second])
    assert len(hints_of(out)) == 1
    saved = out.store.load_state("t1")["hints"]  # what a resumed session starts from
    restored = HintInjector(ContextConfig()).from_state(saved)
    assert restored.told_contradictions == {("The memo must be at most 300 words",
                                             "The memo must be at least 800 words")}


# Two items of a list that measure in the same unit name different things; a later
# sentence that names nothing besides the measure, or the same thing, may contradict.
NOT_ONE_ITEM = {
    "en": ("1. The summary takes 3 pages.", "2. The appendix takes 5 pages."),
    "en, a year first": ("In 2026 the summary takes 3 pages.", "In 2026 the appendix takes 5 pages."),
    "en, numbered": ("Requirement 1: use 3 sources.", "Requirement 2: keep it under 5 pages."),
    "zh": ("1. 摘要最多3页。", "2. 附录最多5页。"),
    "es": ("1. El resumen tiene 3 páginas.", "2. El anexo tiene 5 páginas."),
    "ja": ("1. 要約は3ページ以内。", "2. 付録は5ページ以内。"),
}
ONE_ITEM = {
    "en": ("The report must be at most 3 pages.", "Make it 5 pages."),
    "en, numbered": ("Step 1: at most 3 pages.", "Step 1: at most 5 pages."),
    "zh": ("报告最多3页。", "报告写5页。"),
    "es": ("El informe tiene máximo 3 páginas.", "El informe: 5 páginas."),
    "ja": ("報告書は3ページ以内にすること。", "報告書は5ページで。"),
}


def conflicts_of(*texts):
    view = read_view([Message(i, "user", f"arc:{i}", text) for i, text in enumerate(texts)])
    return [(c.first.text, c.second.text) for c in view.conflicts]


@pytest.mark.parametrize("lang", sorted(NOT_ONE_ITEM))
def test_items_of_a_list_in_the_same_unit_are_no_contradiction(lang):
    first, second = NOT_ONE_ITEM[lang]
    assert conflicts_of(first, second) == []  # the later one names another thing
    assert conflicts_of(f"{first}\n{second}") == []
    # Neither is dropped: a later sentence on a related subject is still shown with it.
    view = read_view([Message(0, "user", "arc:0", first), Message(1, "user", "arc:1", second)])
    assert {s.text for s in view.in_force} | {c.earlier.text for c in view.changed} >= {first}


@pytest.mark.parametrize("lang", sorted(ONE_ITEM))
def test_a_later_figure_for_the_same_item_is_still_a_possible_contradiction(lang):
    first, second = ONE_ITEM[lang]
    assert conflicts_of(first, second) == [(first, second)]
    view = read_view([Message(0, "user", "arc:0", first), Message(1, "user", "arc:1", second)])
    assert [(c.earlier.text, c.later.text) for c in view.changed] == [(first, second)]


def test_an_item_s_own_number_decides_whatever_figure_comes_first():
    said = ("Step 1: at most 3 pages.\nStep 2: at most 5 pages.\nStep 1: at most 4 pages.")
    assert conflicts_of(said) == [("Step 1: at most 3 pages.", "Step 1: at most 4 pages.")]


# Within one message, a later sentence in a unit that names nothing but its measure, an
# aside before a comma left out, refers back: the person corrected themselves as they
# wrote.
CORRECTED_AS_WRITTEN = {
    "en": ("Max 3 pages.", "Make it 5 pages."),
    "en, then": ("Write 3 pages on sales.", "Then 2 pages."),
    "en, actually": ("The report must be at most 3 pages.", "Actually, make it 5 pages."),
    "es": ("Máximo 3 páginas.", "Mejor, 5 páginas."),
    "de": ("Höchstens 3 Seiten.", "Eigentlich, 5 Seiten."),
    "ja": ("報告書は3ページ以内。", "やはり5ページで。"),
}


@pytest.mark.parametrize("lang", sorted(CORRECTED_AS_WRITTEN))
def test_a_bare_figure_after_another_in_one_message_is_a_possible_contradiction(lang):
    first, second = CORRECTED_AS_WRITTEN[lang]
    said = f"{first}{'' if lang == 'ja' else ' '}{second}"
    assert conflicts_of(said) == [(first, second)]
    # Told, not resolved: both stay in force, in the person's words.
    view = read_view([Message(0, "user", "arc:0", said)])
    assert [s.text for s in view.in_force] == [first, second]


def test_parts_of_one_message_that_each_name_their_thing_are_no_contradiction():
    assert conflicts_of("The intro takes 2 pages. The body takes 10 pages.") == []
    # A list of bare figures is items, each at odds with its neighbours: no pair.
    assert conflicts_of("Chapter lengths:\n- 3 pages\n- 5 pages\n- 2 pages") == []
    # A part of the whole the sentence before measured, as people write briefs.
    for brief in ("Draft the memo. Max 2 pages. The cover letter can be 1 page.",
                  "Write a blog post of about 800 words. The intro should be under 100 words.",
                  "Plan a trip. Budget is 3000 euros. Hotels should cost less than 150 euros.",
                  "It should be 10 pages max. The executive summary should be 1 page.",
                  "For the appendix, 10 pages. For the intro, 2 pages."):
        assert conflicts_of(brief) == [], brief


def test_an_aside_is_a_word_of_letters_before_a_comma():
    from agents.words.in_force import _after_aside

    assert _after_aside("Actually, make it 5 pages.") == " make it 5 pages."
    assert _after_aside("Eigentlich, 5 Seiten.") == " 5 Seiten."
    # A figure's thousands comma, or an opening of several words, is no aside.
    for kept in ("1,000 words at most.", "For the appendix, 10 pages.", "3, 4 or 5 pages."):
        assert _after_aside(kept) == kept
    assert conflicts_of("Max 500 words. 1,000 words at most.") == [
        ("Max 500 words.", "1,000 words at most.")]
