"""The triggers read the history through one pass kept until the history changes
(agents/compaction/clearing.py HistoryView, agents/loop/context_keeper.py): what it says
must be what a recount of the units says, for any history."""
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.compaction.clearing import (CLEARED_MARK, HistoryView, all_cleared, clearable_tokens,
                                        residue)
from agents.context.history import Msg, group_units

# One unit of history: a person's message, an answer, or a call with its results (each
# result kept, cleared or without an archive ref).
RESULT = st.tuples(st.sampled_from(["kept", "cleared", "no-ref"]), st.integers(1, 3000))
UNIT = st.one_of(
    st.tuples(st.just("user"), st.integers(1, 500)),
    st.tuples(st.just("answer"), st.integers(1, 500)),
    st.tuples(st.just("call"), st.lists(RESULT, min_size=1, max_size=4)))


def history_of(spec: list) -> list[Msg]:
    out: list[Msg] = []
    for turn, (kind, body) in enumerate(spec):
        if kind == "user":
            out.append(Msg({"role": "user", "content": "a"}, body, turn, f"arc:s:{turn}"))
        elif kind == "answer":
            out.append(Msg({"role": "assistant", "content": "b"}, body, turn))
        else:
            calls = [{"id": f"c{turn}_{i}", "type": "function",
                      "function": {"name": "fetch_document", "arguments": "{}"}}
                     for i in range(len(body))]
            out.append(Msg({"role": "assistant", "content": None, "tool_calls": calls}, 20,
                           turn))
            for i, (state, tokens) in enumerate(body):
                text = f"{CLEARED_MARK} fetch_document {{}}]" if state == "cleared" else "x"
                out.append(Msg({"role": "tool", "tool_call_id": f"c{turn}_{i}",
                                "content": text}, tokens, turn,
                               "" if state == "no-ref" else f"arc:s:{turn}.{i}"))
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(UNIT, max_size=30), st.integers(-2, 40))
def test_the_view_says_what_a_recount_says(spec, keep_from):
    history = history_of(spec)
    units = group_units(history)
    view = HistoryView(tuple(history), units)
    assert view.live_rounds == sum(1 for u in units if u.is_round and not all_cleared(u))
    assert view.residue == residue(units)
    assert view.clearable(keep_from) == clearable_tokens(units, max(0, keep_from))
    # The first unit holding a result a clear may take (keep_from when none does).
    bound = max(0, min(keep_from, len(units)))
    assert view.first_clearable(keep_from) == next(
        (u for u in range(bound) if clearable_tokens([units[u]], 1) > 0), bound)


def test_a_keeper_reads_the_history_again_once_it_changed():
    from agents.loop.context_keeper import ContextKeeper

    class Ctx:
        history = history_of([("call", [("kept", 900)]), ("call", [("cleared", 40)])])

        def units(self):
            return group_units(self.history)

    keeper = ContextKeeper.__new__(ContextKeeper)
    keeper.ctx, keeper._view = Ctx(), None
    first = keeper._history_view()
    assert keeper._history_view() is first  # unchanged: not read again
    assert (first.live_rounds, first.residue) == (1, 60)
    keeper.ctx.history = keeper.ctx.history + history_of([("call", [("kept", 700)])])
    again = keeper._history_view()
    assert again is not first and again.live_rounds == 2 and again.clearable(3) == 1600
    cleared = Msg({"role": "tool", "tool_call_id": "c0_0",
                   "content": f"{CLEARED_MARK} fetch_document {{}}]"}, 30, 0, "arc:s:0.0")
    keeper.ctx.history = [keeper.ctx.history[0], cleared, *keeper.ctx.history[2:]]
    assert keeper._history_view().live_rounds == 1  # a replaced message is seen


@settings(max_examples=300, deadline=None)
@given(st.lists(UNIT, max_size=20), st.lists(UNIT, max_size=6), st.integers(0, 3),
       st.integers(-2, 30))
def test_a_grown_history_reads_as_a_fresh_one(before, added, split, keep_from):
    """A history that only gained messages is read from the last view's units: the same
    figures as reading it whole, whatever the appended messages join (a result joins the
    call before it)."""
    history = history_of(before + added)
    cut = max(0, len(history_of(before)) - split)  # also mid-round: results still coming
    old = HistoryView(tuple(history[:cut]), group_units(history[:cut]))
    grown = old.grown(tuple(history))
    fresh = HistoryView(tuple(history), group_units(history))
    assert grown is not None
    assert [u.messages for u in grown.units] == [u.messages for u in fresh.units]
    assert (grown.live_rounds, grown.residue) == (fresh.live_rounds, fresh.residue)
    assert grown.clearable(keep_from) == fresh.clearable(keep_from)
    assert grown.first_clearable(keep_from) == fresh.first_clearable(keep_from)
    # The older view is unchanged: it may still be someone's.
    again = HistoryView(tuple(history[:cut]), group_units(history[:cut]))
    assert [u.messages for u in old.units] == [u.messages for u in again.units]
    assert old._clearable == again._clearable and old.live_rounds == again.live_rounds


def test_a_view_does_not_read_a_history_that_was_cut_or_changed_as_grown():
    history = history_of([("call", [("kept", 900)]), ("user", 10)])
    view = HistoryView(tuple(history), group_units(history))
    assert view.grown(tuple(history[1:])) is None
    assert view.grown(tuple(history[:-1])) is None


def test_a_keeper_reads_only_the_appended_messages():
    from agents.loop.context_keeper import ContextKeeper

    class Ctx:
        history = history_of([("call", [("kept", 900)]), ("user", 10), ("call", [("kept", 5)])])

        def units(self):
            return group_units(self.history)

    keeper = ContextKeeper.__new__(ContextKeeper)
    keeper.ctx, keeper._view = Ctx(), None
    first = keeper._history_view()
    keeper.ctx.history = keeper.ctx.history + history_of([("call", [("kept", 700)])])
    again = keeper._history_view()
    # The older units are the first view's own objects, not a regrouping of the history.
    assert again.units[0] is first.units[0] and again.units[1] is first.units[1]
    assert again.live_rounds == 3 and again.clearable(4) == 1605
