"""The person's words block (issue 13): the person's messages stay in every request."""

from agents.config import ContextConfig
from agents.context.working import WorkingContext
from agents.counting.tokens import TokenCounter
from agents.events import ZONES, EventType
from agents.words.person import PersonMessage, PersonWords, condense

from .helpers import run_scenario

COUNTER = TokenCounter()
# No pattern in agents/words/anchors.py reads this as a constraint: only the block keeps it.
UNPATTERNED = "Stay away from the legacy folder entirely, it belongs to another team."
# A message of two sentences: the snapshot lists each sentence, but only the block (or the
# history) has the message whole (one of a single sentence the snapshot's list holds).
SAID = "Thanks for the update. " + UNPATTERNED


def docs(n, tokens=1600, **extra):
    steps = [{"tool": "fetch_document", "args": {"tokens": tokens, "topic": f"topic {i}"}}
             for i in range(n)]
    return {"name": "t", "goal": "Read documents.", "steps": steps + [{"final": "done"}], **extra}


def text_of(messages):
    return "\n".join(str(m.get("content")) for m in messages)


def test_condensing_keeps_constraint_and_pinned_sentences_and_says_where_the_rest_is():
    msg = PersonMessage(3, "arc:s:7", "Thanks for the draft. It reads well overall. Never email "
                        "the customer. The legacy folder is fragile. 预算不超过5万。")
    text = condense(msg, hard=("the legacy folder is fragile",))
    assert "Never email the customer." in text and "预算不超过5万。" in text
    assert "The legacy folder is fragile." in text  # pinned: kept though no pattern binds
    assert "Thanks for the draft" not in text
    assert "2 of 5 sentences" in text and 'read_ref(ref="arc:s:7")' in text
    whole = PersonMessage(1, "arc:s:1", "Do not delete any files.")
    assert condense(whole, ()) == whole.text  # nothing to leave out: verbatim


def test_the_block_holds_only_messages_not_whole_in_the_history_and_condenses_oldest_first():
    words = PersonWords()
    words.add(0, "arc:1", "Read all the documents. " * 30 + "Never email the customer.", "goal")
    words.add(2, "arc:2", "Also compare the regions. " * 30 + "Always answer in German.", "user")
    words.add(5, "arc:3", "Thanks, carry on.", "user")
    in_history = {"arc:3": "Thanks, carry on."}
    roomy = words.render(in_history, 10_000, [], COUNTER.text)
    assert "Read all the documents." in roomy and "Thanks, carry on" not in roomy
    assert roomy == words.render(dict(in_history), 10_000, [], COUNTER.text)  # stable
    tight = words.render(in_history, 300, [], COUNTER.text)
    assert "Never email the customer." in tight and "Always answer in German." in tight
    # Past the share, nothing is left out first: a sentence said thirty times is given
    # once (it is one sentence of the person's), in both messages.
    goal_line = next(line for line in tight.splitlines() if line.startswith("[turn 0"))
    assert goal_line.count("Read all the documents.") == 1 and "left out" not in goal_line
    assert tight.count("Also compare the regions.") == 1
    assert "[turn 0 · goal · arc:1]" in tight and "left out" not in tight
    assert COUNTER.text(tight) <= 300 and words.wanted is None  # no model asked for it
    floor = words.render(in_history, 0, [], COUNTER.text)
    assert "Never email the customer." in floor and "Always answer in German." in floor
    assert words.render({"arc:1": words.messages[0].text, "arc:2": words.messages[1].text,
                         "arc:3": "Thanks, carry on."}, 0, [], COUNTER.text) == ""


def test_a_message_cut_in_the_history_is_whole_in_the_block():
    ctx = WorkingContext(counter=COUNTER, config=ContextConfig(), window=128_000,
                         system_prompt="sys")
    long = "Compare every region carefully. " * 400 + UNPATTERNED
    ctx.add({"role": "user", "content": long}, 0, "arc:t:1", cap=200)
    ctx.add_person(0, "arc:t:1", long, "goal")
    request = ctx.build()
    assert request.zones_of[:2] == ["system", "words"] and request.zones["words"] > 0
    assert UNPATTERNED in text_of(request.messages)


def test_an_unpatterned_constraint_survives_a_hostile_summarizer_in_every_later_request():
    scenario = docs(12, summarizer="hostile")
    scenario["steps"].insert(1, {"user": SAID})
    out = run_scenario(scenario, window=6000)
    assert out.run.report["compactions"] >= 2
    stated = next(e.turn for e in out.sink.of_type(EventType.USER_MESSAGE)
                  if e.payload["text"] == SAID)
    calls = [e for e in out.sink.of_type(EventType.MODEL_CALL)
             if e.turn > stated and e.payload["kind"] == "agent"]
    assert calls
    for call in calls:
        assert UNPATTERNED in text_of(call.payload["messages"])
    last = out.transport.requests[-1]["messages"]
    assert any(m["content"].startswith("<person-words>") and SAID in m["content"]
               for m in last if m["role"] == "system")


def test_words_is_a_zone_in_layout_order_and_stays_the_same_between_compactions():
    scenario = docs(12)
    scenario["steps"].insert(1, {"user": SAID})
    out = run_scenario(scenario, window=6000)
    assert ZONES.index("snapshot") < ZONES.index("words") < ZONES.index("summary")
    budgets = [p for p in out.payloads(EventType.BUDGET)]
    assert all("words" in p["zones"] and "words" in p["budgets"] for p in budgets)
    assert any(p["zones"]["words"] > 0 for p in budgets)  # the message, once folded away
    compaction_turns = {e.turn for e in out.sink.of_type(EventType.COMPACTION)}
    blocks = [(e.turn, next((m["content"] for m in e.payload["messages"]
                             if m.get("zone") == "words"), None))
              for e in out.sink.of_type(EventType.MODEL_CALL) if e.payload["kind"] == "agent"]
    for (turn_a, a), (turn_b, b) in zip(blocks, blocks[1:]):
        if a != b:  # the block changes only where a compaction ran
            assert turn_b in compaction_turns


def test_the_goal_is_not_repeated_in_the_block_while_the_snapshot_holds_it_verbatim():
    words = PersonWords()
    words.add(0, "arc:1", "Read documents. Never email the customer.", "goal")
    words.add(3, "arc:2", UNPATTERNED, "user")
    snapshot = "<task-snapshot>\nGoal: Read documents. Never email the customer.\n</task-snapshot>"
    block = words.render({}, 10_000, [], COUNTER.text, snapshot=snapshot)
    assert UNPATTERNED in block and "[turn 0 · goal" not in block
    assert "Never email the customer." in words.render({}, 10_000, [], COUNTER.text)
    # In a run: once compaction folded the goal away, it is in the snapshot, not twice.
    scenario = docs(12)
    scenario["steps"].insert(1, {"user": SAID})
    out = run_scenario(scenario, window=6000)
    assert out.run.report["compactions"] >= 1
    blocks = [m["content"] for call in out.sink.of_type(EventType.MODEL_CALL)
              for m in call.payload["messages"] if m.get("zone") == "words"]
    assert blocks and all(SAID in b and "Read documents." not in b for b in blocks)


def test_the_block_and_the_history_zone_follow_every_change_of_their_inputs():
    """The words block and the history zone are kept between asks (every measure of a
    request asks): any change of what they are made of shows at the next ask."""
    ctx = WorkingContext(counter=COUNTER, config=ContextConfig(), window=128_000,
                         system_prompt="sys")
    text = "Thanks. " * 40 + UNPATTERNED

    def fresh() -> str:  # the block rendered from scratch, from the inputs as they are now
        history = {m.ref: m.text for m in ctx.history if m.ref and m.role == "user"}
        budget = 0 if ctx.words_floor else ctx.budget().words_share
        return PersonWords.render(ctx.person, history, budget, ctx.hard_constraints,
                                  ctx.count, snapshot=ctx.snapshot_text)

    def check() -> None:
        shown = ctx.words_msg()
        assert (shown.data["content"] if shown else "") == fresh()
        assert ctx.zones()["history"] == sum(m.tokens for m in ctx.history)

    msg = ctx.add({"role": "user", "content": text}, 1, "arc:1")
    ctx.add_person(1, "arc:1", text, "user")
    ctx.add({"role": "assistant", "content": "noted"}, 1)
    check()
    assert ctx.words_msg() is None  # whole in the history
    ctx.history[0] = ctx.shortened(msg, 20)  # cut in place: same length, same last message
    check()
    assert UNPATTERNED in ctx.words_msg().data["content"]
    ctx.history[0] = msg
    check()
    ctx.history = ctx.history[1:]  # folded away
    check()
    ctx.words_floor = True  # over the limit: condensed to its constraints
    check()
    ctx.hard_constraints = ["stay away from the legacy folder"]
    check()
    ctx.words_floor = False
    check()
    ctx.live_snapshot = f"goal\n{text}"  # a snapshot that holds it word for word
    ctx.freeze_snapshot()
    check()
    assert ctx.words_msg() is None
    ctx.add_person(2, "arc:2", "Never email the customer.", "user")
    check()
    assert "Never email the customer." in ctx.words_msg().data["content"]
