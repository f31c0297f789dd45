"""Goal and message length limits in the engine (issue 9 F14): refused, never archived."""
from __future__ import annotations

import tempfile
from pathlib import Path

from agents.config import ContextConfig, ModelProfile
from agents.events import EventType, ListSink
from agents.loop.spec import SessionSpec
from agents.runner import run_session
from agents.store.memory import MemoryStore


def run(goal: str, store: MemoryStore, limit: int):
    sink = ListSink()
    with tempfile.TemporaryDirectory() as tmp:
        result = run_session(SessionSpec.plan(goal=goal, scenario=None, profile=ModelProfile(),
                                              config=ContextConfig(), max_input_chars=limit),
                             session_id="L", store=store, events=sink, workspace=Path(tmp))
    return result, sink


def test_a_goal_over_the_limit_fails_the_session_and_is_not_archived():
    store = MemoryStore()
    result, sink = run("g" * 5000, store, limit=1000)
    assert result.status == "failed"
    [error] = [e.payload for e in sink.of_type(EventType.ERROR)]
    assert error["code"] == "input_too_long" and error["fatal"]
    assert "5,000 characters, at most 1,000" in error["message"]
    [started] = sink.of_type(EventType.SESSION_STARTED)
    assert len(started.payload["goal"]) == 500
    assert store.archived_rows("L") == []


def test_a_message_over_the_limit_is_reported_and_skipped():
    store = MemoryStore()
    store.user_messages["L"] = ["m" * 2000, "please also add a table"]
    result, sink = run("List the files.", store, limit=1000)
    assert result.status == "finished"
    errors = [e.payload for e in sink.of_type(EventType.ERROR)]
    assert [(e["code"], e["fatal"]) for e in errors] == [("input_too_long", False)]
    texts = [r["content"] for r in store.archived_rows("L") if r["role"] == "user"]
    assert "please also add a table" in texts and not any("m" * 2000 in t for t in texts)
