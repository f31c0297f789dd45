"""Task tools (feature T2): AgentScope's semantics and exact texts."""
from __future__ import annotations

import re

from agents.events import EventType
from agents.store.interface import TaskRecord


def states(store):
    return [(t.id, t.subject, t.state) for t in store.load_tasks("s1")]


def test_create_list_update_as_in_agentscope(call, store):
    assert call("TaskCreate", subject="清点沙箱目录", description="列出 sandbox 下所有文件").content == \
        "Task (id=1) created successfully: 清点沙箱目录"
    assert call("TaskCreate", subject="生成目录摘要", description="写一份 notes.md").content == \
        "Task (id=2) created successfully: 生成目录摘要"
    assert states(store) == [("1", "清点沙箱目录", "pending"), ("2", "生成目录摘要", "pending")]
    assert call("TaskUpdate", task_id="1", status="in_progress").content == "Update task (id=1) status."
    assert states(store)[0] == ("1", "清点沙箱目录", "in_progress")
    assert call("TaskList").content == "1 [in_progress] 清点沙箱目录\n2 [pending] 生成目录摘要"


def test_deleted_is_a_command_not_a_state(call, store):
    call("TaskCreate", subject="a")
    call("TaskCreate", subject="b", blocked_by=["1"])
    assert call("TaskUpdate", task_id="1", status="deleted").content == "Task (id=1) deleted."
    tasks = store.load_tasks("s1")
    assert [(t.id, t.state, t.blocked_by) for t in tasks] == [("2", "pending", [])]
    # ids are not reused after a deletion
    assert call("TaskCreate", subject="c").content == "Task (id=3) created successfully: c"


def test_blocks_and_blocked_by_stay_consistent_and_completion_unblocks(call, store):
    call("TaskCreate", subject="load data")
    call("TaskCreate", subject="clean data", blocked_by=["1"])
    call("TaskCreate", subject="analyse")
    assert call("TaskUpdate", task_id="3", add_blocked_by=["2"]).content == \
        "Update task (id=3) blocked_by."
    by_id = {t.id: t for t in store.load_tasks("s1")}
    assert (by_id["1"].blocks, by_id["2"].blocked_by) == (["2"], ["1"])
    assert (by_id["2"].blocks, by_id["3"].blocked_by) == (["3"], ["2"])
    assert call("TaskList").content == ("1 [pending] load data\n2 [pending] clean data (blocked by 1)\n"
                                        "3 [pending] analyse (blocked by 2)")
    assert call("TaskUpdate", task_id="1", status="completed").content == \
        "Update task (id=1) status. Unblocked: 2."
    by_id = {t.id: t for t in store.load_tasks("s1")}
    assert by_id["2"].blocked_by == [] and by_id["1"].blocks == []
    assert by_id["3"].blocked_by == ["2"]


def test_dependency_mistakes_are_refused(call, store):
    call("TaskCreate", subject="a")
    call("TaskCreate", subject="b", blocked_by=["1"])
    assert call("TaskUpdate", task_id="1", add_blocked_by=["2"]).error == \
        "Task (id=2) blocking task (id=1) would make a cycle: it already waits for it."
    assert call("TaskUpdate", task_id="1", add_blocks=["1"]).error == "Task (id=1) cannot block itself."
    assert call("TaskCreate", subject="c", blocked_by=["9"]).error == \
        "Task (id=9) not found. Existing ids: 1, 2."
    assert [t.id for t in store.load_tasks("s1")] == ["1", "2"]  # the failed create saved nothing
    assert call("TaskCreate", subject="c").content == "Task (id=3) created successfully: c"


def test_update_fields_metadata_and_errors(call, store):
    call("TaskCreate", subject="report", metadata={"phase": 4})
    assert call("TaskUpdate", task_id=1, owner="analyst", metadata={"phase": None, "format": "md"},
                status="in_progress").content == "Update task (id=1) status, owner, metadata."
    task = store.load_tasks("s1")[0]
    assert (task.owner, task.metadata) == ("analyst", {"format": "md"})
    assert call("TaskUpdate", task_id="1", owner="analyst").content == "No changes to task (id=1)."
    assert call("TaskUpdate", task_id="1", status="done").error == (
        "Argument 'status' of TaskUpdate must be one of \"pending\", \"in_progress\", "
        "\"completed\", \"deleted\" (got \"done\").")
    assert call("TaskGet", task_id="7").error == "Task (id=7) not found. Existing ids: 1."
    assert call("TaskCreate", subject=" ").error == "A task needs a subject: one short line saying what to do."


def test_task_get_shows_every_field(call, store):
    store.save_tasks("s1", [TaskRecord(id="1", subject="load", state="completed", blocks=["2"],
                                       created_at="2026-10-31T09:00:00+00:00"),
                            TaskRecord(id="2", subject="clean", description="drop empty rows",
                                       owner="bot", blocked_by=["1"], metadata={"rows": 460})])
    assert call("TaskGet", task_id="2").content == (
        "Task (id=2): clean\nstate: pending\ndescription: drop empty rows\nowner: bot\n"
        "blocks: -\nblocked_by: 1\nmetadata: rows=460\ncreated_at: -")


def test_tasks_changed_events_and_created_at(call, sink, store):
    assert call("TaskList").content == "No tasks yet."
    call("TaskCreate", subject="a")
    event = sink.of_type(EventType.TASKS_CHANGED)[-1]
    assert event.payload["source"] == "agent"
    assert [t["id"] for t in event.payload["tasks"]] == ["1"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", event.payload["tasks"][0]["created_at"])
    assert event.turn == 4
    call("TaskList")
    assert len(sink.of_type(EventType.TASKS_CHANGED)) == 1  # reading changes nothing


def test_admin_edits_are_seen_by_the_tools(call, store):
    call("TaskCreate", subject="a")
    store.save_tasks("s1", store.load_tasks("s1") + [TaskRecord(id="5", subject="from admin")])
    assert call("TaskCreate", subject="b").content == "Task (id=6) created successfully: b"
