"""The person's words past their share: condensed by the model, checked by the engine (C19).

The older messages go through one model request (several, in parts, when one cannot hold
them with its answer) that writes the requirements in force,
each line citing its message; the engine keeps a line only when the cited message supports
it, and keeps verbatim every sentence no line quotes, covers or names as superseded by a
later message that is itself kept. The measure is the same in every script.
"""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.compaction.words_check import WordsCheck
from agents.config import ContextConfig
from agents.context.working import WorkingContext
from agents.counting.tokens import TokenCounter
from agents.events import EventType
from agents.loop.calls import CallRunner
from agents.protocol import CONDENSED_LATER_LINE, WORDS_MARKER
from agents.provider.client import ModelError
from agents.sim import words_answer
from agents.words import condensing, condensing_parts
from agents.words.condensing import Entry, covers, supported

from . import test_person_words_properties as properties
from .helpers import run_scenario

COUNTER = TokenCounter()

# (sentence, a line that covers it, the same line with another figure, a line the
# sentence's message does not support)
LANGUAGES = {
    "en": ("The report must be at most 3 pages.", "Report: at most 3 pages.",
           "Report: at most 5 pages.", "The budget is unlimited."),
    "zh": ("预算不超过5万元。", "预算不超过5万元", "预算不超过8万元", "可以删除所有文件"),
    "es": ("El informe debe tener como máximo 4 páginas.", "informe: como máximo 4 páginas",
           "informe: como máximo 9 páginas", "El presupuesto es ilimitado."),
    "ja": ("報告書は3ページ以内にすること。", "報告書は3ページ以内", "報告書は7ページ以内",
           "予算は無制限です"),
}


@pytest.mark.parametrize("lang", sorted(LANGUAGES))
def test_the_measure_is_the_same_in_every_script(lang):
    sentence, line, other_figure, invented = LANGUAGES[lang]
    assert covers(line, sentence)
    assert not covers(other_figure, sentence)  # a figure the sentence states is required
    assert not covers(invented, sentence)
    assert supported(line, sentence)
    assert not supported(other_figure, sentence)  # a figure the message never stated
    assert not supported(invented, sentence)


def test_a_sentence_without_content_units_is_kept_only_when_quoted():
    assert covers("The person wrote 😀😀😀 here", "😀😀😀")
    assert not covers("The person sent emoji", "😀😀😀")


OLDER = [Entry(1, 0, "arc:1", "Use charts in every section. The report must be at most 3 "
               "pages. Cite each source by its title."),
         Entry(2, 1, "arc:2", "预算不超过5万元。请用表格。")]
LATER = [Entry(3, 2, "arc:3", "Actually, make the report 5 pages instead."),
         Entry(4, 3, "arc:4", "Thanks, carry on.")]


def test_a_faithful_answer_keeps_every_sentence_through_its_lines():
    answer = words_answer.answer(condensing.request(OLDER, LATER), "faithful")
    result = condensing.check(answer, OLDER, LATER)
    assert result.refused == [] and result.uncovered == {}
    assert "[m2] 预算不超过5万元。" in [line.render() for line in result.lines]


def test_what_a_lossy_answer_dropped_stays_verbatim():
    answer = "[m1] Use charts in every section.\n[m1] Report: at most 3 pages.\n[m2] 预算不超过5万元"
    result = condensing.check(answer, OLDER, LATER)
    assert result.uncovered == {1: ["Cite each source by its title."], 2: ["请用表格。"]}
    rendered = "\n".join(condensing.render(result, OLDER))
    assert "Cite each source by its title." in rendered and "请用表格。" in rendered


def test_a_requirement_the_person_never_wrote_is_refused_and_not_used():
    answer = ("[m1] Use charts in every section. The report must be at most 3 pages. Cite "
              "each source by its title.\n[m2] The budget is unlimited.\n[m2] 预算不超过5万元。"
              "请用表格。\nSure, here are the requirements:")
    result = condensing.check(answer, OLDER, LATER)
    assert "[m2] The budget is unlimited." in result.refused
    assert "Sure, here are the requirements:" in result.refused  # cites nothing
    assert result.uncovered == {}
    assert "unlimited" not in "\n".join(condensing.render(result, OLDER))


def test_a_line_citing_the_wrong_message_does_not_cover_the_sentence():
    answer = "[m2] Use charts in every section. The report must be at most 3 pages."
    result = condensing.check(answer, OLDER, LATER)
    assert result.lines == [] and result.refused  # m2 says nothing of charts
    assert result.uncovered[1] == ["Use charts in every section.",
                                   "The report must be at most 3 pages.",
                                   "Cite each source by its title."]


def test_superseded_by_a_later_kept_message_is_accepted():
    answer = ("[m1] Use charts in every section.\n[m1] Cite each source by its title.\n"
              "[m1 superseded by m3] The report must be at most 3 pages.\n"
              "[m2] 预算不超过5万元。请用表格。")
    result = condensing.check(answer, OLDER, LATER)
    assert result.uncovered == {}
    assert "[m1 superseded by m3] The report must be at most 3 pages." in \
        [line.render() for line in result.lines]


@pytest.mark.parametrize("claim", [
    "[m1 superseded by m4] The report must be at most 3 pages.",  # m4 is about nothing of it
    "[m1 superseded by m2] The report must be at most 3 pages.",  # m2 is not kept whole
    "[m2 superseded by m1] 预算不超过5万元。",  # an earlier message replaces nothing
    "[m1 superseded by m9] The report must be at most 3 pages.",  # no such message
])
def test_a_superseded_claim_that_does_not_hold_leaves_the_sentence_verbatim(claim):
    answer = "[m1] Use charts in every section.\n[m1] Cite each source by its title.\n" + claim
    result = condensing.check(answer, OLDER, LATER)
    assert "The report must be at most 3 pages." in result.uncovered.get(1, []) \
        or "预算不超过5万元。" in result.uncovered.get(2, [])
    assert claim not in [line.render() for line in result.lines]


def long_messages():
    def prose(tag, n):
        return " ".join(f"Note {tag}{i}: the client likes the {tag} chart style number {i} "
                        f"for region R{i}." for i in range(n))
    return [prose("a", 30), prose("b", 30), prose("c", 30), "Thanks, carry on.",
            "Use the blue palette for every chart."]


def context(texts, window=8000):
    ctx = WorkingContext(counter=COUNTER, config=ContextConfig(), window=window,
                         system_prompt="You are an agent.")
    check = WordsCheck()
    for turn, text in enumerate(texts):
        ctx.add_person(turn, f"arc:{turn}", text, "user")
        check.add_message(text, f"arc:{turn}")
    return ctx, check


@pytest.mark.parametrize("mode", ["faithful", "lossy", "hostile"])
def test_the_block_past_the_share_keeps_every_sentence_with_every_summarizer(mode):
    ctx, check = context(long_messages())
    request = ctx.build().described()
    assert check.check(request).missing  # condensed by rule until the model answered
    older, later = ctx.person.wanted
    # The newest stay verbatim within half the share; the older go to the model.
    assert [e.position for e in older] == [1, 2] and [e.position for e in later] == [3, 4, 5]
    answer = words_answer.answer(condensing.request(older, later), mode)
    ctx.person.store_condensed(condensing.check(answer, older, later))
    request = ctx.build().described()
    words = next(m["content"] for m in request if m["zone"] == "words")
    assert check.check(request).missing == []
    assert "[messages m1–m2:" in words and "m1 = arc:0 (turn 0); m2 = arc:1 (turn 1)" in words
    assert "[m5 · turn 4 · message · arc:4] Use the blue palette for every chart." in words
    assert words_answer.INVENTED not in words
    if mode != "faithful":
        assert "no line above covers these, verbatim]" in words
    assert ctx.person.wanted is None  # answered: not asked again


def test_the_result_is_cached_until_the_older_messages_change_and_survives_a_resume():
    ctx, _ = context(long_messages())
    ctx.words_msg()
    older, later = ctx.person.wanted
    answer = words_answer.answer(condensing.request(older, later), "faithful")
    ctx.person.store_condensed(condensing.check(answer, older, later))
    first = ctx.words_msg().text
    assert ctx.person.wanted is None
    state = ctx.to_state()
    again, _ = context(long_messages())
    again.restore(state)
    assert again.words_msg().text == first and again.person.wanted is None
    ctx.add_person(5, "arc:5", "Note d: " + "the weekly figures go in an annex. " * 40, "user")
    ctx.words_msg()
    assert ctx.person.wanted is not None  # a new older set: asked again


def scenario(summarizer):
    steps = [{"tool": "fetch_document", "args": {"tokens": 500, "topic": f"t{i}"}}
             for i in range(10)]
    for i, text in enumerate(long_messages()):
        steps.insert(1 + i, {"user": text})
    return {"name": "words", "goal": "Write the report.", "summarizer": summarizer,
            "steps": steps + [{"final": "ok"}]}


def words_requests(out):
    return [p for p in out.payloads(EventType.MODEL_CALL)
            if WORDS_MARKER in str((p.get("messages") or [{}])[0].get("content"))]


@pytest.mark.parametrize("summarizer", ["faithful", "lossy", "hostile"])
def test_a_run_past_the_share_asks_the_model_once_and_keeps_every_sentence(summarizer):
    out = run_scenario(scenario(summarizer), window=8000,
                       config=ContextConfig(clear_tool_results=False))
    report = out.run.report
    assert out.run.status == "finished", out.run.result.error
    asked = words_requests(out)
    assert len(asked) == 1 and asked[0]["kind"] == "summary"  # shown as a call, asked once
    agent = [p for p in out.payloads(EventType.MODEL_CALL) if p["kind"] == "agent"
             and p["call"] > asked[0]["call"]]
    blocks = [m["content"] for p in agent for m in p["messages"] if m.get("zone") == "words"]
    assert blocks and all("[messages m" in b for b in blocks)
    assert all(words_answer.INVENTED not in b for b in blocks)
    told = [p["message"] for p in out.payloads(EventType.ERROR)
            if p.get("code") == "words_over_share"]
    assert any(f"condensed by the model (call {asked[0]['call']})" in t for t in told), told
    assert report["person_words_kept"] == 1.0
    assert report["over_window_requests"] == 0


@settings(max_examples=220, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(specs=st.lists(properties.message, min_size=2, max_size=8),
       window=st.sampled_from([2048, 3000, 4096, 6000, 8000]),
       mode=st.sampled_from(["faithful", "lossy", "hostile"]))
def test_past_the_share_every_sentence_is_kept_whatever_the_summarizer(specs, window, mode):
    texts = ["Write the memo."]
    for spec in specs:
        texts += properties.expand(spec)[0]
    ctx, check = context(texts, window)
    ctx.words_msg()
    if ctx.person.wanted is not None:  # past the share: the loop would ask the model
        older, later = ctx.person.wanted
        answer = words_answer.answer(condensing.request(older, later), mode)
        ctx.person.store_condensed(condensing.check(answer, older, later))
        ctx.words_msg()
        assert ctx.person.model_used is not None
    request = ctx.build().described()
    assert check.check(request).missing == []
    words = next((m["content"] for m in request if m["zone"] == "words"), "")
    assert words_answer.INVENTED not in words


def test_the_simulated_answer_shares_no_code_with_the_engine_s_check():
    source = open(words_answer.__file__, encoding="utf-8").read()
    assert "agents.words" not in source and "agents.compaction" not in source


def test_the_words_check_counts_a_sentence_covered_by_a_line_citing_its_message():
    ctx, check = context(long_messages())
    ctx.words_msg()
    older, later = ctx.person.wanted
    lines = [f"[m{e.position}] {s.replace('the client likes', 'client likes')}"
             for e in older for s in condensing.message_sentences(e.text)]
    result = condensing.check("\n".join(lines), older, later)
    assert result.uncovered == {} and result.refused == []
    ctx.person.store_condensed(result)
    request = ctx.build().described()
    assert check.check(request).missing == []  # reworded, yet covered by its own message's line
    wrong = [{**m, "content": m["content"].replace("m1 = arc:0", "m1 = arc:9")}
             if m["zone"] == "words" else m for m in request]
    missing = check.check(wrong).missing  # the lines now cite another message
    assert missing and all(s.startswith("note a") for s in missing)


def test_a_condensing_request_that_fails_is_said_and_the_rule_condenses(monkeypatch):
    asked = []
    real = CallRunner.summary_call

    def failing(self, messages, **kwargs):
        if WORDS_MARKER in str(messages[0].get("content")):
            asked.append(messages)
            raise ModelError("server_error", "the words model is down")
        return real(self, messages, **kwargs)

    monkeypatch.setattr(CallRunner, "summary_call", failing)
    out = run_scenario(scenario("faithful"), window=8000,
                       config=ContextConfig(clear_tool_results=False))
    assert out.run.status == "finished", out.run.result.error
    assert len(asked) == 1  # the failure is kept for this set of older messages
    errors = out.payloads(EventType.ERROR)
    assert any(p["code"] == "server_error" and not p["fatal"] for p in errors)
    told = [p["message"] for p in errors if p.get("code") == "words_over_share"]
    assert any("(their constraint sentences first, then their least repeated ones), what "
               "is left out marked in the block (the condensing request failed: the words model is down)" in t for t in told), told


# A long brief: background the person repeats (a brief pasted from several documents says
# the same things more than once), with the six requirements in its middle.
BACKGROUND = ["The team met on Monday to review the archive of earlier reports.",
              "Several readers asked for clearer headings in the long sections.",
              "Our previous vendor delivered the data in monthly batches.",
              "The regional offices each keep their own spreadsheets of sales figures.",
              "Last year the board discussed the format at two of its meetings.",
              "Most of the figures come from the ledger of the finance department.",
              "A few customers wrote to say the charts were hard to read on phones."]
REQUIREMENTS = ["The report must be at most 5 pages.", "Use the blue palette for every chart.",
                "Cite each source by its title.", "预算不超过5万元。",
                "El informe debe estar en español.", "報告書には表を3つ入れること。"]


def tagged(i: int) -> str:
    """The background sentence `i`, told apart from every other by letters (a sentence said
    again, or again with another figure, is given once without asking the model)."""
    tag = "".join(chr(97 + i // 26 ** k % 26) for k in range(3))
    return BACKGROUND[i % len(BACKGROUND)][:-1] + f", in file {tag}."


def brief(chars, distinct=False):
    """`chars` of background with the requirements in the middle: the same few sentences
    again and again, or (`distinct`) each of them once."""
    line = tagged if distinct else (lambda i: BACKGROUND[i % len(BACKGROUND)])
    said, i = [], 0
    while sum(len(s) + 1 for s in said) < chars // 2:
        said.append(line(i))
        i += 1
    said += REQUIREMENTS
    while sum(len(s) + 1 for s in said) + len(line(i)) < chars:
        said.append(line(i))
        i += 1
    return " ".join(said)


def brief_scenario(chars, summarizer):
    steps = [{"tool": "fetch_document", "args": {"tokens": 150, "topic": f"t{i}"}}
             for i in range(6)]
    steps[1:1] = [{"user": brief(chars)}, steps[1], {"user": "Thanks, carry on."}]
    return {"name": "brief", "tools": ["fetch_document"], "goal": "Write the report.",
            "summarizer": summarizer, "steps": steps + [{"final": "ok"}]}


@pytest.mark.parametrize("window,chars", [(2048, 99_000), (8000, 50_000), (32_000, 99_000)])
@pytest.mark.parametrize("summarizer", ["faithful", "lossy", "hostile"])
def test_a_brief_that_repeats_itself_is_given_once_without_a_condensing_request(window, chars,
                                                                               summarizer):
    # Its few sentences said again and again: past the share it is given with each sentence
    # once, nothing left out, before any model is asked to condense it (figure_groups).
    out = run_scenario(brief_scenario(chars, summarizer), window=window,
                       config=ContextConfig(clear_tool_results=False))
    assert out.run.status == "finished", out.run.result.error
    assert words_requests(out) == []
    agent = [p for p in out.payloads(EventType.MODEL_CALL) if p["kind"] == "agent"]
    blocks = [m["content"] for p in agent for m in p["messages"] if m.get("zone") == "words"
              and BACKGROUND[0] in m["content"]]
    assert blocks
    for block in blocks:  # the middle of the brief is there, each background sentence once
        assert all(condensing.flat(r) in condensing.flat(block) for r in REQUIREMENTS), block
        assert all(block.count(b) == 1 for b in BACKGROUND) and "left out" not in block
        assert len(block) < chars // 10
    report = out.run.report
    assert report["person_words_kept"] == 1.0
    assert report["over_window_requests"] == 0
    assert report["condensing_calls"] == report["unused_condensing"] == 0


LONG = Entry(1, 0, "arc:0", " ".join(f"Background note {i} is about region R{i}." for i in range(120))
             + " The report must be at most 3 pages. " + " ".join(
                 f"Archive note {i} is from year {1900 + i}." for i in range(120)))
CHANGE = Entry(2, 1, "arc:1", " ".join(f"Detail {i} on the archive of region Q{i}."
                                       for i in range(120)) + " Make the report 5 pages.")


def quoting(messages, extra=(), but=None):
    """Every sentence of the request's older messages quoted under its label (but the one
    holding `but`), and `extra`."""
    return "\n".join([*(line for line in words_answer.faithful_lines(messages)
                        if but is None or but not in line), *extra])


def condense_with(ask, older, later=(), window=2048, cache=None, constraints=()):
    return condensing_parts.condense(list(older), list(later), window=window,
                                     limit=window - 256, count=COUNTER.text,
                                     count_request=COUNTER.request, ask=ask,
                                     cache={} if cache is None else cache,
                                     constraints=constraints)


def test_every_part_request_carries_the_hard_constraints():
    asked = []

    def ask(messages, tokens, max_tokens):
        asked.append(messages[1]["content"])
        return quoting(messages), len(asked), ""

    rule = "Never delete any file in the archive folder."
    result = condense_with(ask, [LONG, CHANGE], constraints=[rule])
    assert result.uncovered == {} and len(asked) == result.parts > 2
    # Every request carries them (the engine's promise), the parts that hold none too.
    assert all(f"- {rule}" in content for content in asked)


def test_a_long_message_is_cut_between_its_sentences_under_its_own_label():
    pieces = condensing_parts.pieces(LONG, 300, COUNTER.text)
    assert len(pieces) > 3 and all(p.position == 1 and p.ref == "arc:0" for p in pieces)
    assert all(COUNTER.text(p.text) <= 300 for p in pieces)
    assert [s for p in pieces for s in condensing.message_sentences(p.text)] == \
        condensing.message_sentences(LONG.text)


def test_a_sentence_a_message_in_a_later_part_changed_is_resolved_across_parts():
    requests = []

    def ask(messages, tokens, max_tokens):
        requests.append((messages, tokens, max_tokens))
        text = messages[1]["content"]
        extra = []
        if "at most 3 pages" in text.split(CONDENSED_LATER_LINE)[0]:
            # The later part's lines are given for reference: the change can be named.
            assert "[m2] Make the report 5 pages." in text.split(CONDENSED_LATER_LINE)[1]
            extra = ["[m1 superseded by m2] The report must be at most 3 pages."]
        return quoting(messages, extra, but="at most 3 pages"), len(requests), ""

    result = condense_with(ask, [LONG, CHANGE])
    assert result.parts == len(requests) > 2
    assert all(tokens + most <= 2048 for _, tokens, most in requests)
    assert result.uncovered == {} and result.refused == []
    assert "[m1 superseded by m2] The report must be at most 3 pages." in \
        [line.render() for line in result.lines]


def test_parts_are_cached_and_a_failed_part_is_said():
    asked = []

    def ask(messages, tokens, max_tokens):
        asked.append(messages)
        return quoting(messages), len(asked), ""

    cache = {}
    first = condense_with(ask, [LONG], cache=cache)
    assert first.uncovered == {} and len(asked) == first.parts > 1
    again = condense_with(ask, [LONG, CHANGE], cache=cache)  # only the new parts are asked
    assert again.uncovered == {} and len(asked) < first.parts + again.parts
    failed = condense_with(lambda *_: ("", 0, "the words model is down"), [LONG, CHANGE])
    assert failed.failed.startswith(f"part {failed_part(failed)} of ")
    assert "the words model is down" in failed.failed and failed.lines == []


def failed_part(result):
    return result.failed.split(" ")[1]


def sim_ask(mode, asked):
    """The simulated model's answer to each part's request, recorded with what it cost."""
    def ask(messages, tokens, max_tokens):
        answer = words_answer.answer(messages, mode)
        asked.append((tokens, max_tokens, COUNTER.text(answer)))
        return answer, len(asked), ""
    return ask


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(specs=st.lists(properties.message, min_size=1, max_size=4),
       chars=st.integers(50_000, 99_000), before=st.integers(0, 3),
       window=st.sampled_from([2048, 8000, 32_000]),
       mode=st.sampled_from(["faithful", "lossy", "hostile"]))
def test_a_long_brief_among_other_messages_keeps_every_sentence_whatever_the_summarizer(
        specs, chars, before, window, mode):
    texts = ["Write the memo."]
    for spec in specs:
        texts += properties.expand(spec)[0]
    texts.insert(1 + min(before, len(texts) - 1), brief(chars, distinct=True))
    ctx, check = context(texts, window)
    ctx.words_msg()
    older, later = ctx.person.wanted
    asked = []
    budget = ctx.budget()
    result = condensing_parts.condense(older, later, window=window, limit=budget.input_limit,
                                       count=COUNTER.text, count_request=COUNTER.request,
                                       ask=sim_ask(mode, asked), cache={})
    assert not result.failed and (result.parts > 1 or window == 32_000)
    # Each part's request fits the window with room for the whole of its answer.
    assert all(tokens <= budget.input_limit and tokens + most <= window
               and answered <= most for tokens, most, answered in asked)
    ctx.person.store_condensed(result)
    request = ctx.build().described()
    assert check.check(request).missing == []
    words = next(m["content"] for m in request if m["zone"] == "words")
    assert words_answer.INVENTED not in words
    assert all(condensing.flat(r).rstrip("。.") in condensing.flat(words) for r in REQUIREMENTS)


def test_a_condensed_brief_still_over_the_share_is_said_and_nothing_is_dropped():
    said = " ".join(f"Note {i}: the client prefers layout variant {i} for region R{i}."
                    for i in range(1000))  # every sentence its own: no answer can be short
    steps = [{"tool": "fetch_document", "args": {"tokens": 150, "topic": f"t{i}"}}
             for i in range(6)]
    steps[1:1] = [{"user": said}, steps[1], {"user": "Thanks, carry on."}]
    out = run_scenario({"name": "over", "tools": ["fetch_document"], "goal": "Write it.",
                        "steps": steps + [{"final": "ok"}]}, window=32_000,
                       config=ContextConfig(clear_tool_results=False))
    assert out.run.status == "finished", out.run.result.error
    assert len(words_requests(out)) == 2
    told = [p["message"] for p in out.payloads(EventType.ERROR)
            if p.get("code") == "words_over_share"]
    assert any("(in 2 parts, 2 requests: calls " in t and "over the share (nothing is left "
               "out" in t for t in told), told
    assert out.run.report["person_words_kept"] == 1.0
    assert out.run.report["over_window_requests"] == 0
