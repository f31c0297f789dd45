"""The same Store assertions against MemoryStore and DjangoStore (agents/store/interface.py protocol)."""
from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Callable

import pytest

from agents.store.interface import AnchorRecord, TaskRecord
from agents.store.memory import MemoryStore
from taskos.runs import services
from taskos.store.django_store import DjangoStore

# For every test, also the MemoryStore ones: a database requested only from inside a
# parametrized fixture is not set up by pytest-django.
pytestmark = pytest.mark.django_db


@dataclass
class Subject:
    store: object
    session_id: str
    other_session_id: str
    post_message: Callable[[str], None]
    request_compaction: Callable[[str], None]
    cancel: Callable[[], None]
    add_file: Callable[[str, int], None]  # a person's upload into the workspace (T9)


@pytest.fixture(params=["memory", "django"])
def subject(request) -> Subject:
    if request.param == "memory":
        store = MemoryStore()

        def compact(text):
            store.compaction_requests["s1"] = text

        return Subject(store, "s1", "s2",
                       post_message=lambda text: store.user_messages["s1"].append(text),
                       request_compaction=compact, cancel=lambda: store.cancelled.add("s1"),
                       add_file=lambda path, size: store.add_workspace_file("s1", path, size))
    make_session = request.getfixturevalue("make_session")
    session, other = make_session(status="running"), make_session(status="running")
    return Subject(DjangoStore(), str(session.pk), str(other.pk),
                   post_message=lambda text: services.post_message(session, text),
                   request_compaction=lambda text: services.request_compaction(session, text),
                   cancel=lambda: services.request_cancel(session),
                   add_file=lambda path, size: session.workspace_files.create(path=path,
                                                                              size=size))


def test_archive_returns_a_ref_that_reads_back_the_whole_content(subject):
    store, sid = subject.store, subject.session_id
    big = "row,value\n" + "\n".join(f"{i},{i * 3}" for i in range(40_000))
    ref = store.archive(sid, 3, "tool", big, tool_name="read_file", tool_args={"path": "a.csv"},
                        tokens=120_000)
    assert ref.startswith(f"arc:{sid}:")
    assert store.read_ref(sid, ref) == big
    second = store.archive(sid, 4, "assistant", "done")
    assert second != ref and store.read_ref(sid, second) == "done"


def test_unknown_foreign_or_malformed_refs_read_as_none(subject):
    store, sid = subject.store, subject.session_id
    ref = store.archive(sid, 1, "user", "hello")
    assert store.read_ref(subject.other_session_id, ref) is None
    for bad in (f"arc:{sid}:999999", "arc:nope", "offload:1", "", f"arc:{sid}:x"):
        assert store.read_ref(sid, bad) is None


def test_raw_bytes_are_archived_as_base64(subject):
    store, sid = subject.store, subject.session_id
    raw = bytes(range(256)) * 3
    ref = store.archive(sid, 2, "tool", "", tool_name="screenshot", raw_bytes=raw)
    assert base64.b64decode(store.read_ref(sid, ref)) == raw


def test_text_no_database_stores_reads_back_with_the_same_marks(subject):
    # issue 25 item 4: NUL as "␀", a lone surrogate as U+FFFD, on every store alike
    store, sid = subject.store, subject.session_id
    ref = store.archive(sid, 1, "assistant", "A\x00B \ud800 C", tool_name="t\x00")
    assert store.read_ref(sid, ref) == "A\u2400B \ufffd C"
    subject.post_message("keep D\x00E")
    assert store.take_user_messages(sid) == ["keep D\u2400E"]


def test_search_ranks_rows_with_every_word_first_then_newest(subject):
    store, sid = subject.store, subject.session_id
    store.archive(sid, 1, "tool", "Region A revenue fell 12% in Q3", tool_name="group_by")
    store.archive(sid, 2, "tool", "Missing value ratio of the revenue column is 4.1%")
    store.archive(sid, 3, "assistant", "The weather is irrelevant here")
    store.archive(sid, 4, "tool", "revenue by quarter: Q1 10, Q2 11")
    hits = store.search_archive(sid, "missing revenue", limit=5)
    assert [h.turn for h in hits] == [2, 4, 1]  # both words, then newest first
    assert hits[0].ref.startswith(f"arc:{sid}:") and hits[0].role == "tool"
    assert "Missing value ratio" in hits[0].excerpt
    assert store.read_ref(sid, hits[0].ref).startswith("Missing value ratio")
    assert [h.turn for h in store.search_archive(sid, "revenue", limit=2)] == [4, 2]
    assert store.search_archive(sid, "fell")[0].tool_name == "group_by"


def test_search_finds_chinese_text_and_misses_cleanly(subject):
    store, sid = subject.store, subject.session_id
    store.archive(sid, 1, "user", "请分析华东区域的销售额下降原因")
    store.archive(sid, 2, "user", "数据截止到上月底")
    assert [h.turn for h in store.search_archive(sid, "销售额")] == [1]
    assert store.search_archive(sid, "截止")[0].turn == 2
    assert store.search_archive(sid, "nonexistentword") == []
    assert store.search_archive(sid, "  ,.;  ") == []


def test_search_stays_inside_the_session_and_respects_the_limit(subject):
    store, sid = subject.store, subject.session_id
    store.archive(subject.other_session_id, 1, "tool", "inventory audit figures")
    for turn in range(1, 9):
        store.archive(sid, turn, "tool", f"inventory snapshot number {turn}")
    hits = store.search_archive(sid, "inventory", limit=3)
    assert [h.turn for h in hits] == [8, 7, 6]
    assert all(h.ref.startswith(f"arc:{sid}:") for h in hits)


def test_search_excerpt_is_a_window_around_the_match(subject):
    store, sid = subject.store, subject.session_id
    text = "filler " * 2000 + "the churn_rate was 7.5 percent " + "tail " * 2000
    store.archive(sid, 1, "tool", text)
    excerpt = store.search_archive(sid, "churn_rate")[0].excerpt
    assert "churn_rate was 7.5" in excerpt and len(excerpt) <= 250


def test_anchors_are_inserted_then_updated_by_id(subject):
    store, sid = subject.store, subject.session_id
    assert store.load_anchors(sid) == []
    saved = store.save_anchor(sid, AnchorRecord(tier=1, text="output must include a table",
                                                key="format", turn=1))
    assert saved.id is not None
    store.save_anchor(sid, AnchorRecord(tier=2, text="region A -12%", key="region-a", turn=3))
    saved.text, saved.active = "output must include two tables", False
    updated = store.save_anchor(sid, saved)
    assert updated.id == saved.id
    # Only active anchors are loaded: the working set stays small in long sessions.
    assert [(a.tier, a.text, a.key) for a in store.load_anchors(sid)] == [
        (2, "region A -12%", "region-a")]
    saved.active = True
    store.save_anchor(sid, saved)
    assert [(a.id, a.tier, a.text, a.key) for a in store.load_anchors(sid)] == [
        (saved.id, 1, "output must include two tables", "format"),
        (store.load_anchors(sid)[1].id, 2, "region A -12%", "region-a")]
    assert store.load_anchors(subject.other_session_id) == []


def _task(id_, subject_, state="pending", **kw):
    return TaskRecord(id=id_, subject=subject_, state=state,
                      created_at="2025-03-01T10:00:00+00:00", **kw)


def test_save_tasks_replaces_the_list(subject):
    store, sid = subject.store, subject.session_id
    store.save_tasks(sid, [_task("1", "load data", "completed", owner="agent"),
                           _task("2", "aggregate", "in_progress", blocked_by=["1"],
                                 metadata={"rows": 120}),
                           _task("3", "write report", blocks=[], blocked_by=["2"])])
    store.save_tasks(sid, [_task("1", "load data", "completed", owner="agent"),
                           _task("3", "write the report", "in_progress", blocked_by=["2"])])
    tasks = store.load_tasks(sid)
    assert [(t.id, t.subject, t.state, t.owner, t.blocked_by) for t in tasks] == [
        ("1", "load data", "completed", "agent", []),
        ("3", "write the report", "in_progress", "", ["2"])]
    assert tasks[0].created_at.startswith("2025-03-01T10:00:00")
    assert store.load_tasks(subject.other_session_id) == []


def test_task_metadata_survives(subject):
    store, sid = subject.store, subject.session_id
    store.save_tasks(sid, [_task("1", "x", metadata={"source": "scenario", "n": [1, 2]})])
    assert store.load_tasks(sid)[0].metadata == {"source": "scenario", "n": [1, 2]}


def test_notes_and_state_round_trip(subject):
    store, sid = subject.store, subject.session_id
    assert store.load_notes(sid) == {} and store.load_state(sid) is None
    notes = {"objective": "report", "findings": [{"text": "Q3 dip", "source": "arc:1:2"}]}
    store.save_notes(sid, notes)
    state = {"turn": 7, "messages": [{"role": "user", "content": "hi"}], "summary": None}
    store.save_state(sid, state)
    assert store.load_notes(sid) == notes and store.load_state(sid) == state
    store.save_state(sid, {**state, "turn": 8})
    assert store.load_state(sid)["turn"] == 8


def test_user_messages_are_taken_once_oldest_first(subject):
    store, sid = subject.store, subject.session_id
    assert store.take_user_messages(sid) == []
    subject.post_message("also split by channel")
    subject.post_message("budget is 50k tokens")
    assert store.take_user_messages(sid) == ["also split by channel", "budget is 50k tokens"]
    assert store.take_user_messages(sid) == []


def test_compaction_requests_are_taken_once(subject):
    store, sid = subject.store, subject.session_id
    assert store.take_compaction_request(sid) is None
    subject.request_compaction("")
    assert store.take_compaction_request(sid) == ""
    assert store.take_compaction_request(sid) is None
    subject.request_compaction("keep the regional figures")
    assert store.take_compaction_request(sid) == "keep the regional figures"


def test_cancel_flag(subject):
    assert subject.store.cancel_requested(subject.session_id) is False
    subject.cancel()
    assert subject.store.cancel_requested(subject.session_id) is True
    assert subject.store.cancel_requested(subject.other_session_id) is False


def test_an_uncommitted_turn_is_undone_and_its_messages_given_back(subject):
    store, sid = subject.store, subject.session_id
    kept = store.archive(sid, 2, "tool", "committed result of turn 2", tool_name="query")
    subject.post_message("from turn 2")
    assert store.take_user_messages(sid, turn=2) == ["from turn 2"]
    dropped = store.archive(sid, 3, "tool", "half-done result of turn 3", tool_name="query")
    subject.post_message("taken by the dying turn 3")
    assert store.take_user_messages(sid, turn=3) == ["taken by the dying turn 3"]

    assert store.discard_uncommitted(sid, 3) == {"archive_rows": 1, "messages": 1}
    assert store.read_ref(sid, kept) == "committed result of turn 2"
    assert store.read_ref(sid, dropped) is None
    assert [h.ref for h in store.search_archive(sid, "result")] == [kept]
    assert store.take_user_messages(sid, turn=3) == ["taken by the dying turn 3"]
    assert store.discard_uncommitted(sid, 4) == {"archive_rows": 0, "messages": 0}


def test_the_persons_files_are_taken_once_and_given_back_by_an_uncommitted_turn(subject):
    store, sid = subject.store, subject.session_id
    assert store.take_new_files(sid, turn=1) == []
    subject.add_file("q1.csv", 120)
    subject.add_file("blank.txt", 0)
    assert store.take_new_files(sid, turn=2) == [("q1.csv", 120), ("blank.txt", 0)]
    assert store.take_new_files(sid, turn=3) == []
    assert store.take_new_files(subject.other_session_id, turn=3) == []
    subject.add_file("later.md", 7)
    assert store.take_new_files(sid, turn=3) == [("later.md", 7)]
    store.discard_uncommitted(sid, 3)  # turn 3 never committed: told again
    assert store.take_new_files(sid, turn=3) == [("later.md", 7)]


def test_children_are_recorded_listed_and_inherit_the_constraints_given(subject):
    store, sid = subject.store, subject.session_id
    assert store.list_children(sid) == [] and store.delegation_depth(sid) == 0
    request = {"goal": "Find the worst region", "scenario": "", "window": 4000,
               "max_turns": 7, "profile": "", "anchors": ["Use data up to 2026-10-31"],
               "turn": 3}
    first = store.create_child(sid, request)
    second = store.create_child(sid, {**request, "goal": "Second", "anchors": [], "turn": 4})
    children = store.list_children(sid)
    assert [(c.id, c.goal, c.status) for c in children] == [
        (first, "Find the worst region", "queued"), (second, "Second", "queued")]
    assert not any(c.done for c in children)
    assert [(a.tier, a.text) for a in store.load_anchors(first)] == [
        (1, "Use data up to 2026-10-31")]
    assert store.load_anchors(second) == []
    assert store.delegation_depth(first) == 1
    grandchild = store.create_child(first, {**request, "goal": "Deeper", "anchors": []})
    assert store.delegation_depth(grandchild) == 2
    assert store.list_children(subject.other_session_id) == []
    # A turn that never committed takes back the sub-agents it asked for.
    store.discard_uncommitted(sid, 4)
    assert [c.id for c in store.list_children(sid)] == [first]


def test_cancelling_a_session_reaches_its_children(subject):
    store, sid = subject.store, subject.session_id
    child = store.create_child(sid, {"goal": "Sub-task", "anchors": [], "turn": 0})
    assert store.cancel_requested(child) is False
    subject.cancel()
    assert store.cancel_requested(child) is True


def test_a_session_reads_its_sub_agents_archive_and_nobody_elses(subject):
    store, sid = subject.store, subject.session_id
    child = store.create_child(sid, {"goal": "Sub-task", "anchors": [], "turn": 0})
    grandchild = store.create_child(child, {"goal": "Deeper", "anchors": [], "turn": 0})
    answer = store.archive(child, 1, "assistant", "the child's answer")
    deep = store.archive(grandchild, 1, "assistant", "the grandchild's answer")
    other = store.archive(subject.other_session_id, 1, "assistant", "not yours")
    assert store.read_ref(sid, answer) == "the child's answer"
    assert store.read_ref(sid, deep) == "the grandchild's answer"
    assert store.read_ref(child, deep) == "the grandchild's answer"
    assert store.read_ref(child, store.archive(sid, 1, "user", "parent's")) is None
    assert store.read_ref(sid, other) is None
