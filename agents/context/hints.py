"""Hint injection (feature C12): short facts appended at the end of the context each turn.

Volatile facts do not belong in the system prompt (that would change the agent's persona
every turn) nor in the user's words. Four kinds, each with its own throttle:

- time: the current time in the configured timezone, again only after time_interval_hours;
- tasks: "N in progress, M pending" when the task list changed since the model last saw it;
- context: inside the warning band, "Context is now N tokens; compaction at M.";
- tool_error: the same tool with the same arguments failed tool_retries_limit times in a row;
- tool_repeat: the same successful call made tool_retries_limit times in a row (a weak
  model that forgets it already has the result and asks again, turn after turn);
- files: the person added files to the workspace since the last turn (feature T9).

The loop emits each returned Hint as a HINT_BLOCK event and keeps `to_state()` for resume.
"""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agents.config import ConfigError, ContextConfig
from agents.store.interface import TaskRecord

TOOL_ERROR_TEMPLATE = ("The last {count} calls to '{tool_name}' with the same arguments all "
                       "failed. Stop retrying the same call as-is, check the error message and "
                       "try a different approach.")
TOOL_REPEAT_TEMPLATE = ("You called '{tool_name}' with the same arguments {count} times in a row "
                        "and it succeeded each time: its result is already in the context. Do "
                        "not call it again; use that result, call a different tool, or give "
                        "your final answer.")
FILES_NAMED = 20  # files a files hint names; more are counted
MAX_TRACKED_CALLS = 64  # distinct failing calls remembered; older ones are forgotten


@dataclass
class Hint:
    kind: str  # time | tasks | context | tool_error | tool_repeat | files
    text: str


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"Unknown timezone {name!r}: use an IANA name such as 'UTC' or "
                          "'Asia/Shanghai'.") from None


def _call_key(name: str, arguments_json: str) -> str:
    """Tool name plus its arguments in a canonical form, so key order does not matter."""
    try:
        canonical = json.dumps(json.loads(arguments_json or "{}"), sort_keys=True,
                               ensure_ascii=False, separators=(",", ":"))
    except (ValueError, RecursionError):
        canonical = (arguments_json or "").strip()
    return f"{name}\n{canonical}"


def tasks_fingerprint(tasks: list[TaskRecord]) -> str:
    return json.dumps(sorted([t.id, t.state] for t in tasks))


def _utc(moment: dt.datetime) -> dt.datetime:
    return moment.replace(tzinfo=dt.timezone.utc) if moment.tzinfo is None else moment


class HintInjector:
    def __init__(self, config: ContextConfig) -> None:
        self.config = config
        self.zone = _zone(config.timezone)
        self.last_time_hint: dt.datetime | None = None
        self.seen_tasks: str | None = None  # fingerprint of the task list the model last saw
        self.failures: dict[str, int] = {}  # call key -> failures in a row
        self.pending_errors: list[tuple[str, int]] = []  # (tool name, count) to report
        # The latest successful call and how many times in a row it was made.
        self.last_success: tuple[str, int] = ("", 0)
        self.pending_repeats: list[tuple[str, int]] = []
        self.pending_files: list[tuple[str, int]] = []  # the person's, not told yet (T9)
        # Pairs of the person's requirements a contradiction hint named (C19): told once,
        # a resumed session too.
        self.told_contradictions: set[tuple[str, str]] = set()

    def record_tool_call(self, name: str, arguments_json: str, failed: bool) -> int:
        """Count failures of identical calls; a success of that call resets its count.
        Returns how often this exact call has now failed in a row."""
        key = _call_key(name, arguments_json)
        count = self.failures.pop(key, 0)
        if not failed:
            self._record_success(key, name)
            return 0
        self.last_success = ("", 0)
        count += 1
        self.failures[key] = count  # re-inserted last: the dict is ordered oldest first
        while len(self.failures) > MAX_TRACKED_CALLS:
            del self.failures[next(iter(self.failures))]
        if count % self.config.tool_retries_limit == 0:  # again after every further N failures
            self.pending_errors.append((name, count))
        return count

    def _record_success(self, key: str, name: str) -> None:
        last_key, repeats = self.last_success
        repeats = repeats + 1 if key == last_key else 1
        self.last_success = (key, repeats)
        if repeats % self.config.tool_retries_limit == 0:
            self.pending_repeats.append((name, repeats))

    def note_new_files(self, files: list[tuple[str, int]]) -> None:
        """Files the person added to the workspace: the next hint names them."""
        self.pending_files += [(str(path), int(size)) for path, size in files]

    @property
    def repeats(self) -> int:
        """How many times in a row the latest successful call was made as it is."""
        return self.last_success[1]

    def mark_tasks_seen(self, tasks: list[TaskRecord]) -> None:
        """The model saw this task list itself (e.g. it just called a task tool)."""
        self.seen_tasks = tasks_fingerprint(tasks)

    def hints_for_turn(self, *, now: dt.datetime, tasks: list[TaskRecord], input_tokens: int,
                       compaction_at: int, warning_line: int) -> list[Hint]:
        hints = []
        now = _utc(now)
        interval = dt.timedelta(hours=self.config.time_interval_hours)
        last = self.last_time_hint
        if last is None or now - last >= interval or now < last:
            hints.append(Hint("time", self.time_text(now)))
            self.last_time_hint = now
        fingerprint = tasks_fingerprint(tasks)
        if fingerprint != self.seen_tasks:
            self.seen_tasks = fingerprint
            in_progress = sum(1 for t in tasks if t.state == "in_progress")
            pending = sum(1 for t in tasks if t.state == "pending")
            if in_progress or pending:
                hints.append(Hint("tasks", f"Tasks: {in_progress} in progress, {pending} pending. "
                                           "Call TaskList for details."))
        if input_tokens >= warning_line:
            hints.append(Hint("context", f"Context is now {input_tokens} tokens; compaction at "
                                         f"{compaction_at}."))
        for tool_name, count in self.pending_errors:
            hints.append(Hint("tool_error", TOOL_ERROR_TEMPLATE.format(count=count,
                                                                      tool_name=tool_name)))
        self.pending_errors = []
        for tool_name, count in self.pending_repeats:
            hints.append(Hint("tool_repeat", TOOL_REPEAT_TEMPLATE.format(count=count,
                                                                        tool_name=tool_name)))
        self.pending_repeats = []
        if self.pending_files:
            hints.append(Hint("files", new_files_text(self.pending_files)))
            self.pending_files = []
        return hints

    def time_text(self, now: dt.datetime) -> str:
        local = now.astimezone(self.zone)
        name = self.config.timezone
        if name == "UTC":
            return f"Current time: {local:%Y-%m-%d %H:%M} UTC."
        offset = local.strftime("%z")
        return f"Current time: {local:%Y-%m-%d %H:%M} {name} (UTC{offset[:3]}:{offset[3:]})."

    def to_state(self) -> dict[str, Any]:
        return {"last_time_hint": self.last_time_hint.isoformat() if self.last_time_hint else None,
                "seen_tasks": self.seen_tasks,
                "failures": [[key, count] for key, count in self.failures.items()],
                "pending_errors": [[name, count] for name, count in self.pending_errors],
                "last_success": list(self.last_success),
                "pending_repeats": [[name, count] for name, count in self.pending_repeats],
                "pending_files": [[path, size] for path, size in self.pending_files],
                "told_contradictions": sorted([a, b] for a, b in self.told_contradictions)}

    def from_state(self, state: dict[str, Any] | None) -> "HintInjector":
        """Restore what to_state() saved, in place (a resumed session keeps its throttles)."""
        state = state or {}
        stamp = state.get("last_time_hint")
        self.last_time_hint = _utc(dt.datetime.fromisoformat(stamp)) if stamp else None
        self.seen_tasks = state.get("seen_tasks")
        self.failures = {str(key): int(count) for key, count in state.get("failures", [])}
        self.pending_errors = [(str(n), int(c)) for n, c in state.get("pending_errors", [])]
        key, repeats = state.get("last_success") or ("", 0)
        self.last_success = (str(key), int(repeats))
        self.pending_repeats = [(str(n), int(c)) for n, c in state.get("pending_repeats", [])]
        self.pending_files = [(str(p), int(b)) for p, b in state.get("pending_files", [])]
        self.told_contradictions = {(str(a), str(b))
                                    for a, b in state.get("told_contradictions", [])}
        return self


def new_files_text(files: list[tuple[str, int]]) -> str:
    """The files hint: which files the person added, with their sizes (an empty one says
    so), and how to look at them."""
    named = ", ".join(f"{path} ({'empty, 0 bytes' if size == 0 else f'{size:,} bytes'})"
                      for path, size in files[:FILES_NAMED])
    more = f" and {len(files) - FILES_NAMED} more" if len(files) > FILES_NAMED else ""
    noun = "file" if len(files) == 1 else "files"
    return (f"The person added {len(files)} {noun} to the workspace: {named}{more}. Use "
            "list_files and read_file to look at them.")
