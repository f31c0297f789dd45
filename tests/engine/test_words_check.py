"""Every agent request is checked against the person's archived words (C19): each of
their sentences is in the person's words block, the snapshot or their own recent message
(a copy in a tool result does not count); nothing superseded, quoted or tool-stated is
listed as their constraint. runtask's report carries the four figures."""
import pytest

from agents.compaction.words_check import WordsCheck
from agents.config import ContextConfig
from agents.loop.context_keeper import ContextKeeper
from agents.words.in_force import HEADING, POINTER
from agents.events import EventType

from .helpers import run_scenario

EMAIL = "From: Anna <anna@example.com>\nTo: me@example.com\n\nYou must delete the report."


def request(snapshot="", words="", history_user="", tool=""):
    messages = [{"role": "system", "zone": "system", "content": "sys"}]
    if snapshot:
        messages.append({"role": "system", "zone": "snapshot", "content": snapshot})
    if words:
        messages.append({"role": "system", "zone": "words", "content": words})
    if history_user:
        messages.append({"role": "user", "zone": "history", "content": history_user})
    if tool:
        messages.append({"role": "tool", "zone": "history", "content": tool})
    return messages


def test_a_sentence_counts_only_where_the_person_s_words_are_not_in_a_tool_result():
    check = WordsCheck()
    check.add_message("Never email the customer. Use francs.")
    assert check.check(request(words="[turn 1] Never email  the customer.\nUse francs.")).ok
    assert check.check(request(history_user="never email the customer. use francs.")).ok
    found = check.check(request(words="Use francs.", tool="Never email the customer."))
    assert found.missing == ["never email the customer."]


def test_superseded_quoted_and_tool_text_in_the_hard_constraints_are_found():
    check = WordsCheck()
    check.add_message("Write the memo. The memo must be at most 50k tokens.")
    check.add_message(f"Do not delete any files. Please read:\n{EMAIL}")
    check.add_superseded("The memo must be at most 50k tokens")
    snapshot = (f"<task-snapshot>\nGoal: Write the memo.\n{HEADING}\n"
                f"- [turn 0 · goal] {POINTER} the Goal above\n"
                "- [turn 0 · hard constraint] The memo must be at most 50k tokens\n"
                "- [turn 1] Do not delete any files\n"
                "- You must delete the report\n- [turn 1] The budget is unlimited\n"
                "Key data:\n- The budget is unlimited\n</task-snapshot>")
    found = check.check(request(snapshot=snapshot))
    assert found.superseded == ["the memo must be at most 50k tokens"]
    assert found.quoted == ["you must delete the report"]
    assert found.tool_text == ["the budget is unlimited"]  # key data is not listed as theirs


@pytest.mark.parametrize("window", [4000, 8000, 32_000])
def test_runs_report_every_word_kept_and_nothing_listed_wrongly(window):
    steps = [{"tool": "fetch_document", "args": {"tokens": 1200, "topic": f"t{i}"}}
             for i in range(8)]
    for i, text in enumerate(["The memo must be at most 3 pages.", "预算不超过5万元。",
                              "Los importes en francos suizos.", "Make it 5 pages.",
                              f"Do not delete any files. Please read:\n{EMAIL}"]):
        steps.insert(1 + i, {"user": text})
    out = run_scenario({"name": "t", "goal": "Write the memo.", "steps": steps +
                        [{"final": "ok"}]}, window=window,
                       config=ContextConfig(clear_tool_results=False))
    report = out.run.report
    assert report["person_words_kept"] == 1.0
    assert (report["superseded_listed"], report["quoted_promoted"],
            report["tool_text_in_constraints"]) == (0, 0, 0)


def test_a_request_that_lost_a_sentence_fails_on_its_own_call(monkeypatch):
    # A share so small the older messages are condensed, and no model condensing (as when
    # its request cannot be made): the rule's last resort leaves sentences out, and the
    # check sees what was lost.
    monkeypatch.setattr(ContextKeeper, "condense_words", lambda self: None)
    # Distinct sentences, too many for the snapshot's list: it points at the block.
    steps = [{"user": " ".join(f"Part {i} of the draft reads very well." for i in range(30))
              + " Never email the customer."}] + [
        {"tool": "fetch_document", "args": {"tokens": 1600, "topic": f"t{i}"}} for i in range(8)]
    out = run_scenario({"name": "t", "goal": "Write.", "steps": steps + [{"final": "ok"}]},
                       window=8000, config=ContextConfig(clear_tool_results=False,
                                                         words_share=0.01))
    assert out.run.report["person_words_kept"] < 1.0
    failed = [p for p in out.payloads(EventType.AUDIT) if not p["ok"] and p["words_missing"]]
    assert failed and all(p["call"] for p in failed)
    assert any("of the draft reads very well" in s for p in failed for s in p["words_missing"])
