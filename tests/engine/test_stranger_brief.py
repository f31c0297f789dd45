"""A brief written as a stranger writes one (C19): a long Spanish brief of numbered background
notes with its requirements buried in the middle, then a Spanish correction, a Japanese
follow-up and an English bullet list, between document fetches, at windows far smaller
than the brief.

What the person asked for is in every request whatever the window and the summarizer: the
requirements, said once each, and every later message. The 500 notes differ only in their
number: given once per background sentence with their numbers listed (figure_groups), the
whole brief takes some 1 200 tokens instead of 10 900, so from a 4 096-token window on every
sentence is in every request and no condensing answer goes unused. At 2 048 the request
leaves the words about 1 200 tokens (the snapshot shows only the brief's beginning):
the numbers that do not fit are lost, and the report counts every sentence a request
lacked, not only those its audit events list."""
import pytest

from agents.compaction.source_audit import MAX_FLAGGED
from agents.compaction.words_check import WordsCheck, flat, person_sentences
from agents.config import ContextConfig
from agents.events import EventType
from agents.report import is_words_request

from .helpers import run_scenario
from .stranger import LATER, REQUIREMENTS
from .stranger import stranger_brief as brief

NOTES = 500


def stranger_brief(summarizer: str) -> dict:
    return brief(summarizer, notes=NOTES, fetches=8, name="stranger", requirement_first=False)


def lost_sentences(out) -> tuple[WordsCheck, set[str]]:
    """Every sentence of the person's some agent request lacked, by the audit's own check
    run again over every request, its list uncut."""
    check, lost = WordsCheck(), set()
    for event in out.sink.events:
        if event.type == EventType.USER_MESSAGE:
            ref = event.payload.get("ref")
            check.add_message(out.store.read_ref("t1", ref) if ref else event.payload["text"],
                              ref or "")
        elif event.type == EventType.MODEL_CALL and event.payload["kind"] == "agent":
            lost |= set(check.check(event.payload["messages"]).missing)
    return check, lost


@pytest.mark.parametrize("window,summarizer", [(2048, "faithful"), (4096, "hostile"),
                                               (4096, "lossy"), (8000, "lossy"),
                                               (8000, "faithful")])
def test_what_the_person_asked_for_is_in_every_request(window, summarizer):
    out = run_scenario(stranger_brief(summarizer), window=window,
                       config=ContextConfig(tools=["fetch_document"]))
    assert out.run.status == "finished"
    calls = out.payloads(EventType.MODEL_CALL)
    assert not any(c["over_window"] for c in calls)
    assert max(c["input_tokens"] for c in calls) <= window
    check, lost = lost_sentences(out)
    asked = [flat(s) for s in ["Prepara un informe de ventas.", *REQUIREMENTS]] + [
        s for text in LATER for s in person_sentences(text)]
    held = [s for s in check.sentences if any(a in s for a in asked)]
    assert len(held) == len(asked) == 1 + len(REQUIREMENTS) + 5
    assert [s for s in held if s in lost] == []
    report = out.run.report
    kept = round(1 - len(lost) / len(check.sentences), 4)
    assert report["person_words_kept"] == kept
    condensing = [c for c in calls if c["kind"] == "summary" and is_words_request(c["messages"])]
    assert report["condensing_calls"] == len(condensing)
    # Every condensing answer asked for reaches a request (at 2 048 none did while the
    # snapshot also carried the brief's first 1 200 characters: the answers did not fit).
    assert report["unused_condensing"] == 0
    if window >= 4096:
        assert lost == set() and kept == 1.0
    else:
        # Too small for every number: what did not fit is counted whole.
        assert condensing and MAX_FLAGGED < len(lost) < len(check.sentences) // 4
