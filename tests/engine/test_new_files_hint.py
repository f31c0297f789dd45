"""Files a person adds to the workspace are named to the agent by a hint on its next turn
(features T9, C12), once, and given back by a turn that never commits."""
from __future__ import annotations

import tempfile
from pathlib import Path

from agents.config import ContextConfig, ModelProfile
from agents.context.hints import HintInjector, new_files_text
from agents.events import EventType, ListSink
from agents.loop.spec import SessionSpec
from agents.runner import run_session
from agents.store.memory import MemoryStore


class LaterFilesStore(MemoryStore):
    """A person who uploads two files while turn 1 is due."""

    def take_new_files(self, session_id, turn=0):
        if turn == 1 and not self.new_files.get(session_id) and not self._files_taken[session_id]:
            self.add_workspace_file(session_id, "brief.txt", 2_048)
            self.add_workspace_file(session_id, "blank.csv", 0)
        return super().take_new_files(session_id, turn)


def run(store: MemoryStore) -> ListSink:
    sink = ListSink()
    with tempfile.TemporaryDirectory() as tmp:
        result = run_session(SessionSpec.plan(goal="List the files.", scenario=None,
                                              profile=ModelProfile(), config=ContextConfig()),
                             session_id="F", store=store, events=sink, workspace=Path(tmp))
    assert result.status == "finished"
    return sink


def file_hints(sink: ListSink) -> list[tuple[int, str]]:
    return [(e.turn, e.payload["text"]) for e in sink.of_type(EventType.HINT_BLOCK)
            if e.payload["kind"] == "files"]


def test_files_added_before_the_first_turn_are_named_on_it():
    store = MemoryStore()
    store.add_workspace_file("F", "q1.csv", 1234)
    assert file_hints(run(store)) == [(0, "The person added 1 file to the workspace: q1.csv "
                                          "(1,234 bytes). Use list_files and read_file to "
                                          "look at them.")]


def test_files_added_mid_session_are_named_on_the_next_turn_once():
    assert file_hints(run(LaterFilesStore())) == [(1, (
        "The person added 2 files to the workspace: brief.txt (2,048 bytes), blank.csv "
        "(empty, 0 bytes). Use list_files and read_file to look at them."))]


def test_no_files_no_hint():
    assert file_hints(run(MemoryStore())) == []


def test_an_uncommitted_turn_gives_the_files_back():
    store = MemoryStore()
    store.add_workspace_file("F", "a.txt", 5)
    assert store.take_new_files("F", turn=3) == [("a.txt", 5)]
    assert store.take_new_files("F", turn=4) == []
    store.discard_uncommitted("F", from_turn=3)
    assert store.take_new_files("F", turn=3) == [("a.txt", 5)]


def test_pending_files_survive_a_resume_and_many_are_counted():
    injector = HintInjector(ContextConfig())
    injector.note_new_files([(f"f{i}.txt", i) for i in range(25)])
    restored = HintInjector(ContextConfig()).from_state(injector.to_state())
    assert restored.pending_files == injector.pending_files
    text = new_files_text(restored.pending_files)
    assert "25 files" in text and "f19.txt" in text and "f20.txt" not in text
    assert "and 5 more" in text
