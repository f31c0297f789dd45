"""A stored call notes the key order of each message whose keys are not in the canonical
order (agents/loop/calls.py), so the inspector rebuilds the body byte for byte; whether an
order is canonical is kept by the order, since every call asks it of every message."""
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.loop.calls import MESSAGE_KEY_ORDER, canonical_keys, noted_key_order

KEYS = st.lists(st.sampled_from([*MESSAGE_KEY_ORDER, "zone", "cache_control"]), unique=True,
                max_size=6)


@settings(max_examples=300, deadline=None)
@given(KEYS)
def test_an_order_is_noted_exactly_when_it_is_not_canonical(keys):
    message = {key: "x" for key in keys}
    noted = noted_key_order(message)
    assert noted == (None if keys == canonical_keys(message) else keys)
    assert noted_key_order(dict(message)) == noted  # asked again: the kept answer


def test_examples():
    assert noted_key_order({"role": "user", "content": "hi"}) is None
    assert noted_key_order({"content": "hi", "role": "user"}) == ["content", "role"]
    assert noted_key_order({"role": "assistant", "content": None, "extra": 1}) is None
