"""Token counts are cached by content (issue 8): a text the engine counted before is not
encoded again, whatever object holds it, and a different text never takes its count."""
from __future__ import annotations

from agents.counting.tokens import DIGEST_FROM_CHARS, TokenCounter, content_key


def test_the_same_text_is_encoded_once():
    counter = TokenCounter()
    text = "Region North fell 12.5% in Q3 2026. " * 40
    first = counter.text(text)
    copy = "".join(list(text))  # equal content, another string object
    assert copy is not text
    assert counter.text(copy) == first == counter.encode_count(text)
    assert counter.encoded == 2  # the first count, and the uncached reference above


def test_long_texts_are_keyed_by_a_digest_and_never_confused():
    counter = TokenCounter()
    long_a = "a" * (DIGEST_FROM_CHARS * 4)
    long_b = "a" * (DIGEST_FROM_CHARS * 4 - 1) + "b"  # same length, one character apart
    assert isinstance(content_key(long_a), bytes) and len(content_key(long_a)) == 16
    assert content_key("short text") == "short text"
    assert counter.text(long_a) == counter.encode_count(long_a)
    assert counter.text(long_b) == counter.encode_count(long_b)
    assert counter.text(long_a) != counter.text(long_b) or long_a == long_b
    assert counter.encoded == 4  # each text once through the cache, once uncached


def test_the_engine_encodes_each_distinct_text_of_a_run_once(monkeypatch):
    import agents.loop.agent_loop
    from tests.engine.helpers import run_scenario
    made = []
    original_make = agents.loop.agent_loop.make_counter

    def make_counter(profile):
        made.append(original_make(profile))
        return made[-1]

    asked: list[str] = []
    original_text = TokenCounter.text

    def text(self, value):
        if made and self is made[0] and value:
            asked.append(value)
        return original_text(self, value)

    monkeypatch.setattr(agents.loop.agent_loop, "make_counter", make_counter)
    monkeypatch.setattr(TokenCounter, "text", text)
    result = run_scenario("retrieval-6x1600", window=4000)
    assert result.run.report["compactions"] >= 2
    # Texts are asked for again and again (zones, fit, the summary request, the audit);
    # each distinct one is encoded once. Without the cache every ask is an encode.
    assert len(asked) > len(set(asked)) + 20
    assert made[0].encoded == len(set(asked))
