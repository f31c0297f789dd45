"""What the engine keeps from one model call to the next to read only what changed gives
the same answers as reading every call from scratch, over random sequences of calls that
repeat, drop and add texts the way a session's requests do."""
import random

from agents.compaction.words_check import WordsCheck
from agents.words.in_force import HEADING, POINTER


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


def test_the_snapshot_s_kept_lines_match_a_render_from_scratch():
    from agents.context import snapshot
    from agents.counting.tokens import TextCache, default_counter
    from agents.store.interface import AnchorRecord
    from agents.words.in_force import Message, read_view

    count = TextCache(default_counter())
    said = ["Keep the budget under 400 EUR.", "Never email the customer.",
            "The report is due on Friday.", "Use the 2024 figures only."]
    for seed in range(25):
        rng = random.Random(seed)
        memo = snapshot.SnapshotMemo()  # one session's, kept across its turns
        anchors: list[AnchorRecord] = []
        person: list[Message] = []
        superseded: list[str] = []
        goal = "Write the quarterly report. " + rng.choice(said)
        for turn in range(30):
            roll = rng.random()
            if roll < 0.15:
                person.append(Message(turn, rng.choice(["user", "admin", "pin"]), f"arc:{turn}",
                                      " ".join(rng.sample(said, 2))))
            elif roll < 0.4:
                anchors.append(AnchorRecord(tier=rng.choice([1, 2, 2, 3]), text=rng.choice(
                    said + [f"fact {turn}: 12.{turn} t"]), source=rng.choice(
                    ["user", "tool", "admin"]), turn=turn))
            elif roll < 0.5 and anchors:
                rng.choice(anchors).active = not rng.choice(anchors).active
            elif roll < 0.55:
                superseded.append(rng.choice(said))
            elif roll < 0.6:  # the same anchors, new objects (the book reloaded them)
                anchors = [AnchorRecord(**a.to_dict()) for a in anchors]
            elif roll < 0.65 and person:  # the same texts, another kind (a view of its own)
                i = rng.randrange(len(person))
                person[i] = Message(person[i].turn, rng.choice(["user", "admin", "pin"]),
                                    person[i].ref, person[i].text)
            args = dict(goal=goal, anchors=anchors, tasks=[], notes_text="",
                        budget_tokens=rng.choice([0, 60, 400]), count=count,
                        superseded=list(superseded), view=read_view(person, superseded),
                        list_tokens=rng.choice([20, 200]),
                        person_texts=[m.text for m in person],
                        goal_tokens=rng.choice([0, 5, 200]))
            kept = snapshot.render_snapshot_parts(**args, memo=memo)
            assert kept == snapshot.render_snapshot_parts(**args), (seed, turn)
            for line in kept[1] + ["- [turn 3] Use the 2024 figures only.", "Tasks:"]:
                assert snapshot.plain_item(args["view"], line, memo=memo) == \
                    snapshot.plain_item(args["view"], line), (seed, turn, line)
        assert memo.hits  # the memo answered, so it was what the comparison checked


def test_kept_described_messages_and_saved_states_match_fresh_ones():
    from agents.config import ContextConfig
    from agents.context.history import Msg
    from agents.context.working import WorkingContext, since_lines
    from agents.counting.tokens import default_counter

    counter = default_counter()
    for seed in range(20):
        rng = random.Random(seed)
        ctx = WorkingContext(counter=counter, config=ContextConfig(), window=64000,
                             system_prompt="You help.")
        for turn in range(40):
            roll = rng.random()
            if roll < 0.5:
                ctx.add({"role": rng.choice(["user", "tool", "assistant"]),
                         "content": f"text {rng.randrange(9)}"}, turn,
                        ref=rng.choice(["", f"arc:{turn}", f"arc:{turn // 3}"]))
            elif roll < 0.55:  # the same messages again, as new objects (a resumed run)
                ctx.history = [Msg(**{**m.to_state(), "data": dict(m.data)})
                               for m in ctx.history]
            elif roll < 0.6 and ctx.history:  # a message replaced (a clear, a cut)
                i = rng.randrange(len(ctx.history))
                old = ctx.history[i]
                ctx.history[i] = Msg.build(counter, {**old.data, "content": "[cleared]"},
                                           old.turn, old.ref)
            elif roll < 0.7 and ctx.history:  # the same dict in another message
                old = rng.choice(ctx.history)
                ctx.history.append(Msg(data=old.data, tokens=old.tokens + 1, turn=turn))
            elif roll < 0.75 and ctx.history:  # folded or cut: fewer messages
                ctx.history = ctx.history[rng.randrange(len(ctx.history)):]
            elif roll < 0.8:
                ctx.live_snapshot = "\n".join(f"- line {rng.randrange(6)}" for _ in range(4))
                ctx.freeze_snapshot() if rng.random() < 0.5 else None
            ctx.set_snapshot("\n".join(f"- line {rng.randrange(6)}" for _ in range(5)))
            request = ctx.build([])
            parts = ctx.stable_head() + [("history", m) for m in ctx.history] + (
                [("since", ctx._since_msg)] if ctx._since_msg is not None else [])
            assert request.messages == [m.data for _, m in parts]
            assert (request.zones_of, request.tokens_of, request.refs_of) == (
                [z for z, _ in parts], [m.tokens for _, m in parts], [m.ref for _, m in parts])
            fresh = [{**m, "zone": z, "tokens": t, **({"ref": r} if r else {})}
                     for m, z, t, r in zip(request.messages, request.zones_of,
                                           request.tokens_of, request.refs_of)]
            assert request.described() == fresh, (seed, turn)
            if request.messages and rng.random() < 0.3:  # a request changed after build
                i = rng.randrange(len(request.messages))
                request.messages[i] = {"role": "user", "content": "changed"}
                request.tokens_of[i] += rng.choice([0, 1])
                fresh[i] = {**request.messages[i], "zone": request.zones_of[i],
                            "tokens": request.tokens_of[i],
                            **({"ref": request.refs_of[i]} if request.refs_of[i] else {})}
                assert request.described() == fresh, (seed, turn)
            for msg in ctx.history:  # a message listed in another zone
                zone = rng.choice(["history", "words", "since"])
                assert msg.described(zone) == {**msg.data, "zone": zone, "tokens": msg.tokens,
                                               **({"ref": msg.ref} if msg.ref else {})}
            assert ctx.to_state()["history"] == [
                {"data": m.data, "tokens": m.tokens, "turn": m.turn, "ref": m.ref}
                for m in ctx.history]
            assert ctx.history_tokens() == sum(m.tokens for m in ctx.history)
            assert ctx._user_texts(tuple(ctx.history)) == {
                m.ref: m.text for m in ctx.history if m.ref and m.data.get("role") == "user"}
            assert ctx.frozen_lines() == set(ctx.snapshot_text.splitlines())
            assert since_lines(ctx.snapshot_text, ctx.live_snapshot, ctx.frozen_lines()) \
                == since_lines(ctx.snapshot_text, ctx.live_snapshot)


def test_the_kept_person_view_matches_a_fresh_reading():
    from types import SimpleNamespace

    from agents.loop.context_keeper import ContextKeeper
    from agents.words.in_force import Message, read_view
    from agents.words.person import PersonMessage, PersonWords

    said = ["Keep the budget under 400 EUR.", "Never email the customer.",
            "Actually, keep it under 500 EUR.", "Use the 2024 figures only."]
    for seed in range(20):
        rng = random.Random(seed)
        person = PersonWords()
        keeper = SimpleNamespace(ctx=SimpleNamespace(person=person), _view_of=None)
        for turn in range(25):
            roll = rng.random()
            if roll < 0.3:
                person.add(turn, f"arc:{turn}", rng.choice(said),
                           rng.choice(["user", "admin", "pin"]),
                           replaces=rng.choice(["", rng.choice(said)]))
            elif roll < 0.4:  # restored: equal messages, new objects
                person.restore([m.to_state() for m in person.messages])
            elif roll < 0.5 and person.messages:  # one replaced by an edit of its own
                i = rng.randrange(len(person.messages))
                old = person.messages[i]
                person.messages[i] = PersonMessage(old.turn, old.ref, rng.choice(said),
                                                   old.source, old.replaces)
            fresh = read_view([Message(m.turn, m.source, m.ref, m.text)
                               for m in person.messages], person.superseded())
            assert ContextKeeper.person_view(keeper) == fresh, (seed, turn)


def test_the_view_after_a_clearing_batch_matches_a_fresh_view():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from agents.compaction.clearing import HistoryView, plan_clearing
    from agents.context.history import group_units
    from agents.counting.tokens import default_counter
    from agents.tools.base import ToolBoundary

    from .test_history_view import UNIT, history_of

    @settings(max_examples=300, deadline=None)
    @given(st.lists(UNIT, max_size=25), st.integers(0, 30), st.integers(0, 3),
           st.integers(0, 4), st.integers(-2, 35))
    def check(spec, keep_from, keep_last, after, asked):
        history = history_of(spec)
        view = HistoryView(tuple(history), group_units(history))
        plan = plan_clearing(view.units, keep_from, lambda name: ToolBoundary(
            keep_last=keep_last, clear_after_rounds=after), default_counter())
        if plan is None:
            return
        key = tuple(plan.history)
        kept = view.cleared(key, plan)
        fresh = HistoryView(key, group_units(plan.history))
        assert kept is not None
        assert [u.messages for u in kept.units] == [u.messages for u in fresh.units]
        assert (kept.live_rounds, kept.residue) == (fresh.live_rounds, fresh.residue)
        assert kept.clearable(asked) == fresh.clearable(asked)
        assert kept.first_clearable(asked) == fresh.first_clearable(asked)
        assert (kept._clearable, kept._live, kept._residue) == (
            fresh._clearable, fresh._live, fresh._residue)
        # Not the units the batch was planned on: no shortcut.
        assert fresh.cleared(key, plan) is None

    check()


def _session_requests(runs, *, memo: bool, alternate=None):
    """Run each (name, scenario, window) to its end, at the same time when `alternate` (each
    keeper's prepare then waits for its turn); every request each keeper prepared and its
    snapshot memo's hits, by name. `memo` False: every snapshot rendered from scratch."""
    import json
    import tempfile
    import threading
    from pathlib import Path

    from agents.config import ContextConfig, ModelProfile
    from agents.loop.agent_loop import AgentLoop
    from agents.loop.spec import SessionSpec
    from agents.runner import run_session
    from agents.store.memory import MemoryStore

    requests = {name: [] for name, _, _ in runs}
    keepers, failures = {}, []

    class Events:
        def emit(self, event) -> None:
            pass

    def run(name, scenario, window):
        def make_loop(**kwargs):
            loop = AgentLoop(**kwargs)
            keeper = keepers[name] = loop.keeper
            if not memo:
                keeper.snapshot_memo = None
            prepare = keeper.prepare

            def recorded(*args, **kw):
                if alternate is not None:
                    alternate.wait(name)
                try:
                    request, limit = prepare(*args, **kw)
                    requests[name].append(json.dumps(request.messages, sort_keys=True))
                    return request, limit
                finally:
                    if alternate is not None:
                        alternate.passed(name)
            keeper.prepare = recorded
            return loop

        spec = SessionSpec.plan(goal="", scenario=scenario, config=ContextConfig(),
                                profile=ModelProfile(name="sim", context_size=window))
        try:
            with tempfile.TemporaryDirectory() as tmp:
                run_session(spec, session_id=name, store=MemoryStore(), events=Events(),
                            workspace=Path(tmp), make_loop=make_loop)
        except BaseException as exc:  # a thread's error would otherwise only be printed
            failures.append(exc)
        finally:
            if alternate is not None:
                alternate.finished(name)

    threads = [threading.Thread(target=run, args=r, daemon=True) for r in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive()
    assert not failures, failures
    hits = {name: keeper.snapshot_memo.hits if memo else 0 for name, keeper in keepers.items()}
    return requests, hits


class _Alternate:
    """The sessions' prepares one after the other in turn, as long as each still runs."""

    def __init__(self, names):
        import threading
        self.cond, self.running, self.next = threading.Condition(), list(names), names[0]
        self.order: list[str] = []  # whose prepare ran, in turn

    def wait(self, name):
        with self.cond:
            assert self.cond.wait_for(lambda: self.next == name, timeout=60), name

    def passed(self, name):
        with self.cond:
            self.order.append(name)
            i = self.running.index(name)
            self.next = self.running[(i + 1) % len(self.running)]
            self.cond.notify_all()

    def finished(self, name):
        with self.cond:
            i = self.running.index(name)
            self.running.remove(name)
            if self.running and self.next == name:
                self.next = self.running[i % len(self.running)]
            self.cond.notify_all()


def test_two_sessions_interleaved_in_one_process_keep_their_own_snapshot_memos():
    """Each keeper owns its snapshot memo: two sessions whose turns alternate in one
    process send the requests they send rendered from scratch, and each memo answers
    exactly as often as when its session runs alone (a memo the sessions shared would be
    overwritten by the other session's turn in between, and answer less)."""
    runs = [("sales", "sales-report", 128000), ("tools", "workspace-tools", 32000)]
    fresh, _ = _session_requests(runs, memo=False)
    alone = {}
    for run in runs:
        requests, hits = _session_requests([run], memo=True)
        assert requests == {run[0]: fresh[run[0]]}
        alone.update(hits)
    names = [name for name, _, _ in runs]
    alternate = _Alternate(names)
    together, hits = _session_requests(runs, memo=True, alternate=alternate)
    assert together == fresh
    both = 2 * min(len(fresh[name]) for name in names)
    assert both > 4 and alternate.order[:both] == names * (both // 2)  # they did alternate
    assert hits == alone and all(alone.values()), (hits, alone)
