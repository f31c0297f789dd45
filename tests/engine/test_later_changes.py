"""A constraint a later message of the person's may have changed is never listed as in
force alone (C19): the snapshot shows it with the later sentence and says the later one
wins, in any language and with or without a signal word; pairs that may contradict each
other are shown, neither dropped. No signal-word list decides."""
import pytest

from agents.compaction.words_check import flat, listed_in_force
from agents.context.snapshot import render_snapshot
from agents.counting.tokens import TokenCounter
from agents.store.interface import AnchorRecord
from agents.words.changes import related
from agents.words.in_force import Message, read_view

COUNT = TokenCounter().text
CORRECTIONS = [  # (earlier constraint, later correction): no shared signal word
    ("The report must be at most 3 pages", "Make it 5 pages."),
    ("At most 300 words", "Change the word limit to 500 words instead."),
    ("预算不超过5万元", "预算调整为不超过8万元。"),
    ("El informe debe tener como máximo 300 palabras", "El informe: 500 palabras."),
    ("Les montants doivent être en euros", "Désormais, les montants en francs suisses."),
    ("Der Bericht darf höchstens 10 Seiten haben", "Der Bericht jetzt 12 Seiten."),
    ("報告書は3ページ以内にすること", "報告書は5ページにしてください。"),
    ("Amounts must be in euros", "Amounts in Swiss francs, please."),
]


def in_force(snapshot: str) -> str:
    """The snapshot's list of what is in force, as the audit reads it (casefolded)."""
    return "\n".join(listed_in_force(snapshot))


def LaterMessage(turn, text):  # noqa: N802 - a message of the person's, as the loop keeps it
    return Message(turn, "user", f"arc:{turn}", text)


def snapshot(anchors, messages):
    return render_snapshot(goal="Write it.", anchors=anchors, tasks=[], notes_text="",
                           budget_tokens=500, count=COUNT, view=read_view(messages),
                           list_tokens=500, person_texts=[m.text for m in messages])


@pytest.mark.parametrize("old,new", CORRECTIONS)
def test_a_correction_in_any_language_takes_the_old_constraint_out_of_force(old, new):
    anchors = [AnchorRecord(tier=1, text=old, turn=1, id=1)]
    text = snapshot(anchors, [LaterMessage(1, old), LaterMessage(4, new)])
    assert flat(old) not in in_force(text) and flat(new) in in_force(text)
    assert f"- {old}\n  later, turn 4: {new}" in text
    assert "the later one wins where they differ" in text
    # Said only earlier, or the same constraint said again: still in force.
    assert flat(old) in in_force(snapshot(anchors, [LaterMessage(1, old)]))
    assert flat(old) in in_force(snapshot(anchors, [LaterMessage(1, old), LaterMessage(3, old)]))


def test_an_unrelated_later_message_leaves_a_constraint_in_force():
    anchors = [AnchorRecord(tier=1, text="The report must be at most 3 pages", turn=1, id=1)]
    later = [LaterMessage(1, "The report must be at most 3 pages"),
             LaterMessage(5, "Amounts must be in euros."),
             LaterMessage(6, "Thanks, carry on."), LaterMessage(7, "请用中文回答。")]
    assert flat("The report must be at most 3 pages") in in_force(snapshot(anchors, later))
    assert not related("The report must be at most 3 pages", "Amounts must be in euros.")


def test_constraints_of_one_message_that_state_different_figures_are_shown_as_a_conflict():
    said = ("The budget is at most 50k tokens. The budget is at most 80k tokens. "
            "Never email the customer.")
    text = snapshot([], [LaterMessage(0, said)])
    assert '- "The budget is at most 50k tokens" / "The budget is at most 80k tokens"' in text
    for sentence in ("The budget is at most 50k tokens.", "The budget is at most 80k tokens.",
                     "Never email the customer."):  # neither side dropped
        assert flat(sentence) in in_force(text)


def test_in_a_run_the_corrected_limit_is_never_listed_in_force_after_the_correction():
    from agents.config import ContextConfig
    from agents.events import EventType

    from .helpers import run_scenario

    steps = [{"tool": "fetch_document", "args": {"tokens": 1600, "topic": f"topic {i}"}}
             for i in range(10)]
    said = ["The memo must be at most 3 pages.", "Amounts must be in euros.",
            "Make it 5 pages.", "Amounts in Swiss francs, please."]
    for i, text in enumerate(said):
        steps.insert(1 + 2 * i, {"user": text})
    out = run_scenario({"name": "t", "goal": "Write the memo.", "steps": steps + [{"final": "ok"}]},
                       window=8000, config=ContextConfig(clear_tool_results=False))
    assert sum(p["kind"] == "summary" for p in out.payloads(EventType.COMPACTION)) >= 2
    corrected = max(e.turn for e in out.sink.of_type(EventType.USER_MESSAGE))
    calls = [e for e in out.sink.of_type(EventType.MODEL_CALL)
             if e.payload["kind"] == "agent" and e.turn >= corrected]
    assert len(calls) >= 4
    for call in calls:
        shown = "\n".join(m["content"] for m in call.payload["messages"]
                          if m.get("zone") == "snapshot")
        listed = in_force(shown)
        assert "at most 3 pages" not in listed and "in euros" not in listed
        assert "later, turn" in shown


def test_a_contradiction_is_told_to_the_agent_once_in_a_hint_and_shown_in_the_snapshot():
    from agents.events import EventType

    from .helpers import run_scenario

    steps = [{"user": "The budget is at most 50k tokens. The budget is at most 80k tokens."},
             *({"tool": "fetch_document", "args": {"tokens": 300, "topic": f"t{i}"}}
               for i in range(3)), {"final": "ok"}]
    out = run_scenario({"name": "t", "goal": "Write.", "steps": steps})
    hints = [p for p in out.payloads(EventType.HINT_BLOCK) if p["kind"] == "contradiction"]
    assert len(hints) == 1
    assert '"The budget is at most 50k tokens"' in hints[0]["text"]
    said = next(e.turn for e in out.sink.of_type(EventType.USER_MESSAGE)
                if "80k" in e.payload["text"])
    first = next(e for e in out.sink.of_type(EventType.MODEL_CALL)
                 if e.payload["kind"] == "agent" and e.turn >= said)
    text = "\n".join(str(m.get("content")) for m in first.payload["messages"])
    assert "[contradiction]" in text and "May contradict each other" in text
