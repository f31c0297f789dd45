"""The person's words are sent whole while they fit their share of the input limit (C19).

The words zone's fixed budget used to be a cap: past a few hundred tokens at a small window
the older messages were condensed to the sentences a pattern recognised, while the request
had thousands of tokens free. Now the zone is a claim the rolling window plans around and
the block keeps every message verbatim up to `words_share` of the input limit.
"""
import pytest

from agents.config import ConfigError, ContextConfig
from agents.context.budget import plan_budget
from agents.context.working import WorkingContext
from agents.counting.tokens import TokenCounter
from agents.events import EventType
from agents.words.person import INTRO, PersonWords

from .helpers import run_scenario

COUNTER = TokenCounter()
# Corrections in the words of the issue, and a requirement in Spanish that no English or
# Chinese pattern reads: each must reach every later request verbatim.
MESSAGES = [
    "Keep the memo to max 3 pages.",
    "Los importes deben figurar en francos suizos y cada tabla necesita una fuente al pie. "
    "Las cifras de ventas se redondean a miles, y ninguna sección supera las doscientas "
    "palabras salvo el resumen final, que puede llegar a cuatrocientas. " * 3,
    "Scrap the page limit, make it 5 pages.",
    "Actually, amounts in francs.",
]


def docs(n, tokens=1600):
    steps = [{"tool": "fetch_document", "args": {"tokens": tokens, "topic": f"topic {i}"}}
             for i in range(n)]
    return {"name": "t", "goal": "Read documents and write the memo.",
            "steps": steps + [{"final": "done"}]}


def agent_calls(out, after_turn=-1):
    return [e for e in out.sink.of_type(EventType.MODEL_CALL)
            if e.payload["kind"] == "agent" and e.turn > after_turn]


def joined(call):
    return "\n".join(str(m.get("content")) for m in call.payload["messages"]
                     if m.get("role") != "tool")


def test_every_message_reaches_every_later_request_whole_at_a_small_window():
    scenario = docs(14)
    for i, text in enumerate(MESSAGES):
        scenario["steps"].insert(1 + 2 * i, {"user": text})
    # Clearing off: summaries fold the messages out of the recent turns.
    out = run_scenario(scenario, window=8000, config=ContextConfig(clear_tool_results=False))
    assert sum(p["kind"] == "summary" for p in out.payloads(EventType.COMPACTION)) >= 2
    budget = plan_budget(8000, ContextConfig())
    # More than the zone's claim, less than the share: the old cap condensed this.
    total = sum(COUNTER.text(t) for t in MESSAGES)
    assert budget.words < total < budget.words_share
    last_said = max(e.turn for e in out.sink.of_type(EventType.USER_MESSAGE))
    calls = agent_calls(out, last_said)
    assert len(calls) >= 5
    for call in calls:
        text = joined(call)
        for message in MESSAGES:
            assert message in text
        assert "left out" not in text
    words = [m["content"] for call in calls for m in call.payload["messages"]
             if m.get("zone") == "words"]
    assert words and all(INTRO in w for w in words)
    assert "Later messages override earlier ones" in INTRO


# Sixty different sentences of background, none the same as another but for a figure (a
# sentence said again, or said again with another figure, is given once: figure_groups).
BACKGROUND = " ".join(f"Some background on the {chr(97 + i % 26)}{chr(97 + i // 26)}x market."
                      for i in range(80)) + " "


def test_the_share_is_a_setting_and_past_it_the_older_messages_are_condensed():
    budget = plan_budget(128_000, ContextConfig())
    assert budget.words_share == int(0.25 * budget.input_limit)
    assert budget.budgets()["words"] == budget.words_share  # not shown over budget below it
    assert plan_budget(128_000, ContextConfig(words_share=0.1)).words_share \
        == int(0.1 * budget.input_limit)
    for bad in (0, 0.6, -1):
        with pytest.raises(ConfigError, match="words_share"):
            ContextConfig(words_share=bad)
    words = PersonWords()
    words.add(0, "arc:1", "Read all the documents. " * 60 + "Never email the customer.", "goal")
    words.add(2, "arc:2", "Thanks, carry on.", "user")
    whole = words.render({}, 10_000, [], COUNTER.text)
    assert whole.count("Read all the documents.") == 60
    condensed = words.render({}, 200, [], COUNTER.text)
    # Past the share: the sentence it repeats sixty times is given once, nothing left out.
    assert condensed.count("Read all the documents.") == 1 and "left out" not in condensed
    assert "Never email the customer." in condensed and "Thanks, carry on." in condensed
    # Sixty different sentences do not fit that way: the older message is condensed.
    varied = PersonWords()
    varied.add(0, "arc:1", BACKGROUND + "Never email the customer.", "goal")
    varied.add(2, "arc:2", "Thanks, carry on.", "user")
    cut = varied.render({}, 200, [], COUNTER.text, strict=True)
    assert "left out" in cut and "Never email the customer." in cut


def test_the_context_sends_whole_what_fits_the_share_and_condenses_only_past_it():
    long = "Compare the regions one by one and explain each difference. " * 60
    for share, whole in ((0.25, True), (0.02, False)):
        ctx = WorkingContext(counter=COUNTER, config=ContextConfig(words_share=share),
                             window=16_000, system_prompt="sys")
        ctx.add_person(0, "arc:1", long + "Never email the customer.", "user")
        assert ctx.budget().words < COUNTER.text(long)  # over the zone's claim either way
        block = ctx.words_msg().data["content"]
        assert (long in block) is whole
        assert "Never email the customer." in block


def test_words_past_their_share_are_said_once_in_the_drawer_with_what_was_condensed():
    scenario = docs(8)
    scenario["steps"].insert(1, {"user": BACKGROUND + "Never email the customer."})
    out = run_scenario(scenario, window=8000,
                       config=ContextConfig(clear_tool_results=False, words_share=0.02))
    said = [p for p in out.payloads(EventType.ERROR) if p["code"] == "words_over_share"]
    assert len(said) == 1 and not said[0]["fatal"]
    assert "are condensed by the model (call " in said[0]["message"]
    assert "turn 1" in said[0]["message"] and said[0]["action"]
    roomy = run_scenario(scenario, window=8000, config=ContextConfig(clear_tool_results=False))
    assert not [p for p in roomy.payloads(EventType.ERROR) if p["code"] == "words_over_share"]
