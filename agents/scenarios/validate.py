"""Check a scenario file's shape before it is played, with errors that say where and what.

Every error names the file, the path inside it (`steps[3].args`) and what was expected,
e.g. `my.json: expect.tier1: expected a list of strings, got a string`. Nothing here
recurses, so a file nested thousands of levels deep gets an error, not a RecursionError.
"""
from __future__ import annotations

from typing import Any

from agents.config import MAX_INPUT_CHARS, MAX_TURNS, WINDOW, Bounds, ConfigError, check_number

TOP_KEYS = {"name", "goal", "steps", "system", "window", "expect", "tools", "summarizer",
            "description", "subtasks"}
STEP_KINDS = ("user", "tool", "tools", "final")
STEP_KEYS = {"user": {"user"}, "final": {"final"}, "tool": {"tool", "args", "say", "repeat", "from"},
             "tools": {"tools", "say"}}
MAX_ARGS_DEPTH = 20  # tool arguments nested deeper than this are not a real tool call
MAX_STEPS = 10_000
# A repeated step stands for `repeat` steps numbered from `from` (agents/scenarios/__init__.py);
# a file expands to at most MAX_TURNS steps, the most turns a session may run.
REPEAT = Bounds(1, 100_000, whole=True)
FROM = Bounds(1, 1_000_000_000, whole=True)


class ScenarioShapeError(ValueError):
    """Raised with `path: expected …` text; the loader prefixes the file name."""


def kind_of(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "true/false",
             int: "an integer", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def fail(path: str, expected: str, value: Any) -> None:
    raise ScenarioShapeError(f"{path}: expected {expected}, got {kind_of(value)}")


def check_text(path: str, value: Any, *, limit: int = MAX_INPUT_CHARS,
               empty: bool = True) -> None:
    if not isinstance(value, str):
        fail(path, "a string", value)
    if not empty and not value.strip():
        raise ScenarioShapeError(f"{path}: expected a non-empty string")
    if len(value) > limit:
        raise ScenarioShapeError(f"{path}: expected at most {limit:,} characters, "
                                 f"got {len(value):,}")


def check_bounded(path: str, value: Any, bounds: Bounds) -> None:
    """A number of the file inside its range, checked as every number a person sets is."""
    try:
        check_number(path, value, bounds)
    except ConfigError:
        kind = "a whole number" if bounds.whole else "a number"
        raise ScenarioShapeError(f"{path}: expected {kind} of {bounds.describe()}, "
                                 f"got {value!r}") from None


def check_strings(path: str, value: Any) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        fail(path, "a list of strings", value)


def check_depth(path: str, value: Any) -> None:
    """Refuse JSON nested deeper than MAX_ARGS_DEPTH, walking it without recursion."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if depth > MAX_ARGS_DEPTH:
            raise ScenarioShapeError(f"{path}: expected at most {MAX_ARGS_DEPTH} levels of "
                                     "nesting in tool arguments")
        children = item.values() if isinstance(item, dict) else item if isinstance(
            item, list) else ()
        pending.extend((child, depth + 1) for child in children)


def check_call(path: str, call: Any) -> None:
    if not isinstance(call, dict):
        fail(path, 'an object {"tool": name, "args": {...}}', call)
    unknown = set(call) - {"tool", "args"}
    if unknown:
        raise ScenarioShapeError(f"{path}: unknown key {sorted(unknown)[0]!r}; a tool call "
                                 "has 'tool' and 'args'")
    check_text(f"{path}.tool", call.get("tool"), limit=64, empty=False)
    args = call.get("args", {})
    if not isinstance(args, dict):
        fail(f"{path}.args", "an object", args)
    check_depth(f"{path}.args", args)


def check_delegate(path: str, args: dict[str, Any], subtasks: set[str] | None) -> None:
    """A delegate call needs a goal; its scenario, if any, names one of the file's subtasks."""
    check_text(f"{path}.args.goal", args.get("goal"), empty=False)
    name = args.get("scenario")
    if name is None:
        return
    check_text(f"{path}.args.scenario", name, limit=500)
    if subtasks is not None and name not in subtasks:
        raise ScenarioShapeError(f"{path}.args.scenario: expected one of the subtasks "
                                 f"({', '.join(sorted(subtasks)) or 'none defined'}), "
                                 f"got {name!r}")


def check_step(path: str, step: Any, subtasks: set[str] | None = None) -> str:
    """Validate one step; return its kind (user, tool, tools, final)."""
    if not isinstance(step, dict):
        fail(path, "an object with one of 'user', 'tool', 'tools', 'final'", step)
    kinds = [k for k in STEP_KINDS if k in step]
    if len(kinds) != 1:
        found = "none" if not kinds else ", ".join(repr(k) for k in kinds)
        raise ScenarioShapeError(f"{path}: expected exactly one of 'user', 'tool', 'tools', "
                                 f"'final', got {found}")
    kind = kinds[0]
    unknown = set(step) - STEP_KEYS[kind]
    if unknown:
        allowed = ", ".join(repr(k) for k in sorted(STEP_KEYS[kind]))
        raise ScenarioShapeError(f"{path}: unknown key {sorted(unknown)[0]!r} in a {kind!r} "
                                 f"step (allowed: {allowed})")
    if kind in ("user", "final"):
        check_text(f"{path}.{kind}", step[kind])
    elif kind == "tool":
        for key, bounds in (("repeat", REPEAT), ("from", FROM)):  # see expand_repeats
            if key in step:
                check_bounded(f"{path}.{key}", step[key], bounds)
        call = {k: v for k, v in step.items() if k not in ("say", "repeat", "from")}
        check_call(path, call)
        if call["tool"] == "delegate":
            check_delegate(path, call.get("args", {}), subtasks)
    else:
        calls = step["tools"]
        if not isinstance(calls, list) or not calls:
            fail(f"{path}.tools", "a non-empty list of tool calls", calls)
        for i, call in enumerate(calls):
            check_call(f"{path}.tools[{i}]", call)
            if call["tool"] == "delegate":
                check_delegate(f"{path}.tools[{i}]", call.get("args", {}), subtasks)
    if "say" in step:
        check_text(f"{path}.say", step["say"])
    return kind


def validate_scenario(data: Any, prefix: str = "", subtasks: set[str] | None = None) -> None:
    """Raise ScenarioShapeError at the first place `data` is not a valid scenario."""
    if not isinstance(data, dict):
        fail(prefix or "(top level)", "a JSON object", data)
    if isinstance(data.get("subtasks"), dict) and not prefix:
        subtasks = set(data["subtasks"])
    for key in ("name", "goal", "steps"):
        if key not in data:
            raise ScenarioShapeError(f"{prefix}{key}: missing; 'name', 'goal' and 'steps' are "
                                     "required")
    unknown = set(data) - TOP_KEYS
    if unknown:
        raise ScenarioShapeError(f"{prefix}{sorted(unknown)[0]}: unknown key (known: "
                                 f"{', '.join(sorted(TOP_KEYS))})")
    check_text("name", data["name"], limit=200, empty=False)
    if "subtasks" in data:
        if prefix:
            raise ScenarioShapeError(f"{prefix}subtasks: a subtask cannot have subtasks of its "
                                     "own; list them all in the top-level 'subtasks'")
        check_subtasks(data["subtasks"], subtasks or set())
    check_text("goal", data["goal"])
    if "system" in data:
        check_text("system", data["system"])
    if data.get("window") is not None:
        check_bounded("window", data["window"], WINDOW)
    if data.get("tools") is not None:
        check_strings("tools", data["tools"])
    if "summarizer" in data and not isinstance(data["summarizer"], str):
        fail("summarizer", "a string", data["summarizer"])
    expect = data.get("expect")
    if expect is not None:
        if not isinstance(expect, dict):
            fail("expect", 'an object such as {"tier1": ["..."]}', expect)
        if set(expect) - {"tier1"}:
            raise ScenarioShapeError(f"expect.{sorted(set(expect) - {'tier1'})[0]}: unknown "
                                     "key (known: tier1)")
        check_strings("expect.tier1", expect.get("tier1", []))
    steps = data["steps"]
    if not isinstance(steps, list) or not steps:
        fail("steps", "a non-empty list", steps)
    if len(steps) > MAX_STEPS:
        raise ScenarioShapeError(f"steps: expected at most {MAX_STEPS} steps, got {len(steps)}")
    kinds = [check_step(f"{prefix}steps[{i}]", step, subtasks) for i, step in enumerate(steps)]
    expanded = sum(step.get("repeat", 1) for step in steps)
    if expanded > MAX_TURNS:
        raise ScenarioShapeError(f"{prefix}steps: expected at most {MAX_TURNS} steps once "
                                 f"repeats are expanded, got {expanded}")
    if "final" not in kinds:
        raise ScenarioShapeError("steps: expected a 'final' answer as the last step, found none")
    first_final = kinds.index("final")
    if first_final != len(kinds) - 1:
        raise ScenarioShapeError(
            f"steps[{first_final}]: a 'final' answer must be the last step; "
            f"{len(kinds) - 1 - first_final} step(s) after it would never run")


def check_subtasks(value: Any, names: set[str]) -> None:
    """Each subtask is a scenario body (goal and steps, no name) checked like a scenario."""
    if not isinstance(value, dict) or not value:
        fail("subtasks", 'an object {"name": {"goal": …, "steps": […]}}', value)
    for name, body in value.items():
        check_text(f"subtasks.{name} (its name)", name, limit=100, empty=False)
        if "#" in name:
            raise ScenarioShapeError(f"subtasks.{name}: a subtask name cannot contain '#'")
        if isinstance(body, dict) and "name" in body:
            raise ScenarioShapeError(f"subtasks.{name}.name: a subtask takes its name from "
                                     "its key; remove 'name'")
        if not isinstance(body, dict):
            fail(f"subtasks.{name}", "an object with 'goal' and 'steps'", body)
        validate_scenario({"name": name, **body}, prefix=f"subtasks.{name}.", subtasks=names)
