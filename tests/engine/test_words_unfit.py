"""No condensing request whose answer could never be used (C19).

A checked condensing keeps every figure of every sentence of the older messages
(condensing.least_answer_tokens), so the block it makes has a least size known before the
model is asked. When even the most room a request can leave
the block (the window less the parts no compaction shrinks) is smaller, no request is
made: the messages go straight to the last resort, which fills the room the request
leaves, and the drawer says why.
"""
import pytest

from agents.config import ContextConfig
from agents.counting.tokens import TokenCounter
from agents.events import EventType
from agents.sim import words_answer
from agents.words import condensing
from agents.words.condensing import Entry, figures, message_sentences, units

from .helpers import run_scenario
from .stranger import stranger_brief

COUNTER = TokenCounter()


@pytest.mark.parametrize("summarizer", ["faithful", "lossy", "hostile"])
def test_no_condensing_request_when_no_answer_could_fit_the_room(summarizer):
    scenario = stranger_brief(summarizer, notes=700, fetches=10, name="s",
                              requirement_first=True)
    out = run_scenario(scenario, window=2048, config=ContextConfig(tools=["fetch_document"]))
    report = out.run.report
    assert report["status"] == "finished"
    # Each of the five part requests made here before was answered and never used.
    assert report["condensing_calls"] == 0 and report["unused_condensing"] == 0
    assert report["person_words_kept"] >= 0.4775  # the last resort fills the room as before
    said = [e["message"] for e in out.payloads(EventType.ERROR)
            if e["code"] == "words_over_share"]
    assert said and "no condensing was asked of the model" in said[0]
    assert "cut to the room the request leaves" in said[0]


def numbered(notes: int) -> str:
    return " ".join(f"(nota {i}) Los clientes valoran la rapidez de entrega número {i % 7}."
                    for i in range(notes)) + " El informe debe tener como máximo 4 páginas."


def tightest_line(text: str) -> str:
    """One line that covers every sentence of `text` with little more than the check
    allows: every figure once, and the words of every sentence once."""
    said = message_sentences(text)
    words = dict.fromkeys(u for s in said for u in sorted(units(s)) if not u.isdigit())
    found = sorted({f for s in said for f in figures(s)}, key=int)
    return f"[m1] {' '.join(words)} {','.join(found)}"


@pytest.mark.parametrize("answer", ["faithful", "lossy", "hostile", "tightest"])
@pytest.mark.parametrize("notes", [3, 40, 300])
def test_the_least_size_is_below_every_checked_block(answer, notes):
    text = numbered(notes)
    older = [Entry(1, 0, "arc:0", text)]
    content = (tightest_line(text) if answer == "tightest"
               else words_answer.answer(condensing.request(older, []), answer))
    result = condensing.check(content, older, [])
    if answer in ("faithful", "tightest"):
        assert result.uncovered == {} and result.lines
    block = "\n".join(condensing.render(result, older))
    header = "\n".join(condensing.render(condensing.Condensed(key=()), older)) + "\n"
    assert COUNTER.text(block) - COUNTER.text(header) \
        >= condensing.least_answer_tokens(older, COUNTER.text) > 0
