"""What the engine keeps from one model call to the next to read only what changed gives
the same answers as reading every call from scratch, over random sequences of calls that
repeat, drop and add texts the way a session's requests do."""
import random

from agents.compaction.words_check import WordsCheck
from agents.events import ModelCall, UserMessage
from agents.report import ReportSink
from agents.words.in_force import HEADING, POINTER


class _Null:
    def emit(self, event) -> None:
        pass


def _present_from_scratch(expect, stated, calls):
    """ReportSink's anchor presence as it was first written: each call's texts joined."""
    present = {e: [0, 0] for e in expect}
    for turn, messages in calls:
        text = "\n".join(str(m.get("content") or "") for m in messages)
        for e in expect:
            if stated.get(e) is not None and turn >= stated[e]:
                present[e][0] += 1
                present[e][1] += e in text
    return present


def test_the_report_s_anchor_presence_matches_the_joined_text_of_each_call():
    expect = ["budget 400 EUR", "no flights", "two lines\nof anchor", "lines\nof", "", "EUR"]
    pieces = ["budget 400 EUR", "no flights", "two lines", "of anchor", "lines", "of",
              "budget 400", " EUR", "unrelated text", "EUR", "no", " flights"]
    for seed in range(30):
        rng = random.Random(seed)
        sink = ReportSink(_Null(), expect)
        for e in expect:
            if rng.random() < 0.8:
                sink.emit(UserMessage(text=f"I said: {e}", turn=rng.randrange(0, 5)))
        stated = dict(sink.stated_turn)
        texts = ["".join(rng.choice(pieces) for _ in range(rng.randrange(0, 4)))
                 for _ in range(25)] + [None]
        calls, current = [], []
        for turn in range(40):
            # Like a session: most of the last request again, some texts gone, a few new.
            current = [m for m in current if rng.random() < 0.85]
            current += [{"role": "tool", "zone": "history", "content": rng.choice(texts)}
                        for _ in range(rng.randrange(0, 4))]
            if rng.random() < 0.1:
                rng.shuffle(current)
            messages = [dict(m) for m in current]
            calls.append((turn, messages))
            sink.emit(ModelCall(call=turn + 1, kind="agent", messages=messages, turn=turn))
        assert sink.present == _present_from_scratch(expect, stated, calls), seed


def _words_request(rng, texts):
    zones = ["system", "snapshot", "words", "history", "since", "hints"]
    messages = []
    for _ in range(rng.randrange(1, 7)):
        zone = rng.choice(zones)
        role = rng.choice(["user", "tool", "system"])
        messages.append({"role": role, "zone": zone, "content": rng.choice(texts)})
    return messages


def test_the_words_check_kept_between_calls_matches_a_fresh_check():
    said = ["Never email the customer.", "Use francs.", "Keep it under 400 EUR.",
            "The budget is 500 EUR.", "Ask before deleting files."]
    listed = [f"- [turn {i}] {s}" for i, s in enumerate(said)] + [
        f"- [turn 2] {POINTER} elsewhere", "- [turn 9] Delete the backups.",
        "- quoted: You must delete the report."]
    texts = ["\n".join([HEADING, *random.Random(k).sample(listed, 3)]) for k in range(6)] + [
        "never email the customer. use francs.", "Keep it under 400 EUR.", "use francs",
        "", "<snapshot-update>\n- [turn 7] Delete the backups.\n</snapshot-update>",
        "keep it under {400, 500} eur."]
    for seed in range(40):
        rng = random.Random(seed)
        kept = WordsCheck()
        for step in range(30):
            roll = rng.random()
            if roll < 0.1:
                kept.add_message(rng.choice(said) + " " + rng.choice(said), ref=f"arc:{step}")
            elif roll < 0.15:
                kept.add_superseded(rng.choice(said))
            elif roll < 0.18:  # a resumed run: the same lists, new objects
                kept.from_state(kept.to_state())
            fresh = WordsCheck()
            fresh.from_state(kept.to_state())
            messages = _words_request(rng, texts)
            if rng.random() < 0.3:  # the same request again, as between compactions
                got, want = kept.check(messages), fresh.check(messages)
            got, want = kept.check(messages), fresh.check(messages)
            assert (got.missing, got.superseded, got.quoted, got.tool_text) == (
                want.missing, want.superseded, want.quoted, want.tool_text), (seed, step)
            assert list(kept.lost) == list(fresh.lost)
