"""Ask before a tool acts (feature T11) in memory: pause, decide, resume.

An ask-first call is recorded (with a write's diff) instead of run, the run stops
"waiting_for_approval" with its state saved, and the next run hands each decision on:
an approved call runs, a denied one gets the person's reason as its result.
"""
from __future__ import annotations

import json
from pathlib import Path

from agents.config import ContextConfig, ModelProfile
from agents.events import ListSink
from agents.tools.ask_first import AskFirst
from agents.loop.spec import SessionSpec
from agents.runner import run_session
from agents.scenarios import parse_scenario
from agents.store.memory import MemoryStore
from agents.tools.base import Tool

REASON = "the report must not overwrite the draft"


def scenario() -> dict:
    return {"name": "approvals", "goal": "Write two files.",
            "tools": ["list_files", "write_file", "read_file"],
            "steps": [
                {"say": "Writing both files.", "tools": [
                    {"tool": "write_file", "args": {"path": "report.md", "content": "# Report\nnew\n"}},
                    {"tool": "list_files", "args": {}},
                    {"tool": "write_file", "args": {"path": "draft.md", "content": "replaced\n"}}]},
                {"final": "Done: report.md written."}]}


def spec(ask: AskFirst) -> SessionSpec:
    return SessionSpec.plan(goal="", scenario=parse_scenario(scenario()),
                            profile=ModelProfile(name="sim", context_size=16000),
                            config=ContextConfig(), ask_first=ask)


def once(store, sink, workspace: Path, ask=AskFirst.of(["write_file"])):
    return run_session(spec(ask), session_id="s", store=store, events=sink, workspace=workspace)


def call_ids(store: MemoryStore) -> dict[str, str]:
    """path written → call id, for the recorded approvals."""
    return {json.loads(r.arguments)["path"]: r.call_id for r in store._approvals.values()}


def test_ask_first_calls_wait_and_the_others_run(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "draft.md").write_text("the draft\n")
    store, sink = MemoryStore(), ListSink()
    run = once(store, sink, workspace)
    assert run.status == "waiting_for_approval"
    assert not (workspace / "report.md").exists()  # nothing written before a decision
    assert (workspace / "draft.md").read_text() == "the draft\n"
    # list_files, in the same reply, ran: its result is there
    assert [e.payload["name"] for e in sink.of_type("TOOL_RESULT")] == ["list_files"]
    requested = sink.of_type("APPROVAL_REQUESTED")
    assert [json.loads(e.payload["args"])["path"] for e in requested] == ["report.md", "draft.md"]
    draft = store.approvals("s", [call_ids(store)["draft.md"]])[call_ids(store)["draft.md"]]
    assert "-the draft" in draft.preview and "+replaced" in draft.preview  # what would change
    report = store.approvals("s", [call_ids(store)["report.md"]])[call_ids(store)["report.md"]]
    assert "+# Report" in report.preview and not report.decided
    waiting = sink.of_type("SESSION_WAITING")[-1]
    assert sorted(waiting.payload["approvals"]) == sorted(call_ids(store).values())
    assert sink.of_type("SESSION_FINISHED") == []


def test_undecided_stays_waiting_without_a_model_call(tmp_path):
    store, sink = MemoryStore(), ListSink()
    once(store, sink, tmp_path / "ws")
    calls = len(sink.of_type("MODEL_CALL"))
    ids = call_ids(store)
    store.decide_approval("s", ids["report.md"], approve=True)  # one of two decided
    again = once(store, sink, tmp_path / "ws")
    assert again.status == "waiting_for_approval"
    assert len(sink.of_type("MODEL_CALL")) == calls
    assert not (tmp_path / "ws" / "report.md").exists()  # runs only once both are decided


def test_approval_runs_the_call_and_denial_reaches_the_model(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "draft.md").write_text("the draft\n")
    store, sink = MemoryStore(), ListSink()
    once(store, sink, workspace)
    ids = call_ids(store)
    store.decide_approval("s", ids["report.md"], approve=True, by="alice")
    store.decide_approval("s", ids["draft.md"], approve=False, reason=REASON, by="alice")
    done = once(store, sink, workspace)
    assert done.status == "finished"
    assert (workspace / "report.md").read_text() == "# Report\nnew\n"
    assert (workspace / "draft.md").read_text() == "the draft\n"  # denied: never written
    decided = {e.payload["call_id"]: e.payload for e in sink.of_type("APPROVAL_DECIDED")}
    assert decided[ids["report.md"]]["decision"] == "approved"
    assert decided[ids["draft.md"]]["decision"] == "denied"
    assert decided[ids["draft.md"]]["reason"] == REASON
    results = {e.payload["call_id"]: e.payload for e in sink.of_type("TOOL_RESULT")}
    assert results[ids["report.md"]]["error"] is None
    assert REASON in results[ids["draft.md"]]["error"]
    # The model's next request holds the denial as that call's tool message.
    request = [e for e in sink.of_type("MODEL_CALL") if e.payload["kind"] == "agent"][-1]
    tool_messages = {m.get("tool_call_id"): m["content"] for m in request.payload["messages"]
                     if m.get("role") == "tool"}
    assert REASON in tool_messages[ids["draft.md"]]
    assert tool_messages[ids["draft.md"]].startswith("Error:")
    # Each decision is a row in the archive.
    rows = [r for r in store.archived_rows("s") if r["role"] == "approval"]
    assert sorted(r["content"].split()[0] for r in rows) == ["approved", "denied"]
    assert all(e.payload["ref"] for e in sink.of_type("APPROVAL_DECIDED"))


def test_no_ask_first_runs_everything_at_once(tmp_path):
    store, sink = MemoryStore(), ListSink()
    run = once(store, sink, tmp_path / "ws", ask=AskFirst())
    assert run.status == "finished"
    assert (tmp_path / "ws" / "draft.md").read_text() == "replaced\n"
    assert sink.of_type("APPROVAL_REQUESTED") == []


def test_writes_setting_asks_before_write_file(tmp_path):
    store, sink = MemoryStore(), ListSink()
    run = once(store, sink, tmp_path / "ws", ask=AskFirst.of(writes=True))
    assert run.status == "waiting_for_approval"
    assert sorted(call_ids(store)) == ["draft.md", "report.md"]


def test_which_tools_ask_first():
    def tool(**marks) -> Tool:
        return Tool(name="t", description="", parameters={}, func=lambda: "", **marks)
    assert AskFirst.of(["t"]).asks("t", tool())
    assert not AskFirst().asks("t", tool())
    assert AskFirst().asks("t", tool(ask_first=True))  # the hook a tool source sets
    assert not AskFirst().asks("t", tool(destructive=True))
    assert AskFirst.of(writes=True).asks("t", tool(destructive=True))
    assert AskFirst.of(writes=True).asks("write_file", None)
    assert not AskFirst.of(writes=True).asks("read_file", tool())
    assert not AskFirst.of(["delegate"]).asks("delegate", tool())  # a sub-agent asks itself


def test_pending_survives_a_lost_worker(tmp_path):
    """The wait is in the store's saved state: a new store object over the same data (a
    restarted worker) resumes it, decides nothing twice."""
    store, sink = MemoryStore(), ListSink()
    once(store, sink, tmp_path / "ws")
    saved = store.load_state("s")
    assert sorted(saved["approvals"]) == sorted(call_ids(store).values())
    for call_id in call_ids(store).values():
        store.decide_approval("s", call_id, approve=True)
    assert once(store, ListSink(), tmp_path / "ws").status == "finished"
    assert (tmp_path / "ws" / "draft.md").read_text() == "replaced\n"


def test_a_long_diff_keeps_both_ends(tmp_path):
    from agents.loop.approvals import MAX_PREVIEW_CHARS, write_preview
    from agents.tools.base import ToolContext
    (tmp_path / "big.csv").write_text("".join(f"row {i},{'x' * 60}\n" for i in range(2000)))
    (tmp_path / "huge.txt").write_text("y" * 2_000_001)
    ctx = ToolContext(session_id="s", store=MemoryStore(), workspace=tmp_path)
    diff = write_preview({"path": "big.csv", "content": "replaced\n"}, ctx)
    assert diff.startswith("--- a/big.csv") and diff.rstrip().endswith("+replaced")
    assert "2000 lines removed, 1 added in all" in diff
    assert len(diff) < MAX_PREVIEW_CHARS + 200
    huge = write_preview({"path": "huge.txt", "content": "z"}, ctx)
    assert huge.startswith("huge.txt is longer than 2,000,000 characters") and huge.endswith("z")
    appended = write_preview({"path": "new.md", "content": "a\nb", "append": True}, ctx)
    assert appended.splitlines()[-2:] == ["+a", "+b"]
