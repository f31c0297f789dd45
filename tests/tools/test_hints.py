"""Hint injection (feature C12): four kinds, their conditions, throttles and exact texts."""
from __future__ import annotations

import datetime as dt

import pytest

from agents.config import ConfigError, ContextConfig
from agents.context.hints import Hint, HintInjector
from agents.store.interface import TaskRecord

T0 = dt.datetime(2026, 11, 2, 6, 5, tzinfo=dt.timezone.utc)
QUIET = {"input_tokens": 1000, "compaction_at": 102_400, "warning_line": 76_800}


def hints(injector, now=T0, tasks=(), **budget):
    return injector.hints_for_turn(now=now, tasks=list(tasks), **{**QUIET, **budget})


def kinds(found):
    return [h.kind for h in found]


def test_time_is_injected_then_throttled_for_the_interval():
    injector = HintInjector(ContextConfig())
    assert hints(injector) == [Hint("time", "Current time: 2026-11-02 06:05 UTC.")]
    assert hints(injector, now=T0 + dt.timedelta(minutes=29)) == []
    assert hints(injector, now=T0 + dt.timedelta(minutes=30)) == [
        Hint("time", "Current time: 2026-11-02 06:35 UTC.")]
    assert hints(injector, now=T0 + dt.timedelta(minutes=45)) == []


def test_time_uses_the_configured_timezone():
    injector = HintInjector(ContextConfig(timezone="Asia/Shanghai", time_interval_hours=2))
    assert hints(injector)[0].text == "Current time: 2026-11-02 14:05 Asia/Shanghai (UTC+08:00)."
    assert hints(injector, now=T0 + dt.timedelta(hours=1, minutes=59)) == []


def test_an_unknown_timezone_is_a_clear_error():
    with pytest.raises(ConfigError, match="Unknown timezone 'Mars/Olympus'"):
        HintInjector(ContextConfig(timezone="Mars/Olympus"))


def task(task_id, state):
    return TaskRecord(id=task_id, subject=f"task {task_id}", state=state)


def test_tasks_hint_only_when_the_list_changed_since_last_seen():
    injector = HintInjector(ContextConfig())
    tasks = [task("1", "in_progress"), task("2", "pending"), task("3", "pending")]
    first = hints(injector, tasks=tasks)
    assert first[1] == Hint("tasks", "Tasks: 1 in progress, 2 pending. Call TaskList for details.")
    assert hints(injector, tasks=tasks) == []
    tasks[1].state = "in_progress"  # e.g. an admin edit
    assert hints(injector, tasks=tasks) == [
        Hint("tasks", "Tasks: 2 in progress, 1 pending. Call TaskList for details.")]
    tasks[2].state = "completed"
    injector.mark_tasks_seen(tasks)  # the model changed it itself
    assert hints(injector, tasks=tasks) == []
    for t in tasks:
        t.state = "completed"
    assert hints(injector, tasks=tasks) == []  # nothing open: nothing to remind


def test_context_hint_inside_the_warning_band():
    injector = HintInjector(ContextConfig())
    hints(injector)
    assert hints(injector, input_tokens=76_799) == []
    assert hints(injector, input_tokens=76_800) == [
        Hint("context", "Context is now 76800 tokens; compaction at 102400.")]
    assert kinds(hints(injector, input_tokens=90_000)) == ["context"]


TEMPLATE = ("The last {n} calls to 'read_file' with the same arguments all failed. Stop retrying "
            "the same call as-is, check the error message and try a different approach.")


def test_tool_error_after_the_retry_limit_with_the_exact_template():
    injector = HintInjector(ContextConfig())
    hints(injector)
    for _ in range(2):
        injector.record_tool_call("read_file", '{"path": "x.csv"}', failed=True)
    assert hints(injector) == []
    injector.record_tool_call("read_file", '{ "path":"x.csv" }', failed=True)  # same arguments
    assert hints(injector) == [Hint("tool_error", TEMPLATE.format(n=3))]
    assert hints(injector) == []  # reported once
    for _ in range(3):
        injector.record_tool_call("read_file", '{"path": "x.csv"}', failed=True)
    assert hints(injector) == [Hint("tool_error", TEMPLATE.format(n=6))]


def test_a_success_or_other_arguments_do_not_count():
    injector = HintInjector(ContextConfig(tool_retries_limit=2))
    hints(injector)
    injector.record_tool_call("read_file", '{"path": "a"}', failed=True)
    injector.record_tool_call("read_file", '{"path": "b"}', failed=True)
    injector.record_tool_call("read_file", '{"path": "a"}', failed=False)
    injector.record_tool_call("read_file", '{"path": "a"}', failed=True)
    assert hints(injector) == []
    injector.record_tool_call("read_file", '{"path": "b"}', failed=True)
    assert hints(injector) == [Hint("tool_error", TEMPLATE.format(n=2))]


def test_state_round_trip_keeps_every_throttle():
    config = ContextConfig()
    injector = HintInjector(config)
    tasks = [task("1", "pending")]
    hints(injector, tasks=tasks)
    injector.record_tool_call("sql_query", '{"sql": "DELETE"}', failed=True)
    injector.record_tool_call("sql_query", '{"sql": "DELETE"}', failed=True)
    resumed = HintInjector(config).from_state(injector.to_state())
    assert hints(resumed, now=T0 + dt.timedelta(minutes=10), tasks=tasks) == []
    resumed.record_tool_call("sql_query", '{"sql": "DELETE"}', failed=True)
    assert kinds(hints(resumed, now=T0 + dt.timedelta(minutes=10), tasks=tasks)) == ["tool_error"]
    assert HintInjector(config).from_state(None).to_state() == {
        "last_time_hint": None, "seen_tasks": None, "failures": [], "pending_errors": [],
        "last_success": ["", 0], "pending_repeats": [], "pending_files": [],
        "told_contradictions": []}


def test_a_successful_call_repeated_in_a_row_is_counted_across_a_resume():
    config = ContextConfig(tool_retries_limit=3)
    injector = HintInjector(config)
    for _ in range(2):
        injector.record_tool_call("list_files", "{}", failed=False)
    resumed = HintInjector(config).from_state(injector.to_state())
    resumed.record_tool_call("list_files", " {} ", failed=False)  # same call, other spacing
    assert resumed.repeats == 3
    assert kinds(hints(resumed)) == ["time", "tool_repeat"]
    resumed.record_tool_call("read_file", '{"path": "a"}', failed=False)
    assert resumed.repeats == 1


def test_all_four_kinds_in_order():
    injector = HintInjector(ContextConfig(tool_retries_limit=1))
    injector.record_tool_call("csv_top_k", "not json", failed=True)
    found = hints(injector, tasks=[task("1", "pending")], input_tokens=80_000)
    assert kinds(found) == ["time", "tasks", "context", "tool_error"]
    assert found[3].text.startswith("The last 1 calls to 'csv_top_k' with the same arguments")
