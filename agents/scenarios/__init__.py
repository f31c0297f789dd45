"""Scenario files: scripts the simulated model plays (format in docs/SCENARIOS.md)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.scenarios.validate import (MAX_ARGS_DEPTH, REPEAT, ScenarioShapeError,
                                       validate_scenario)
from agents.storable import storable_text

SCENARIO_DIR = Path(__file__).resolve().parent
DATA_DIR = SCENARIO_DIR / "data"


class ScenarioError(ValueError):
    """A scenario that cannot be found or does not follow the format."""


@dataclass
class ModelStep:
    """What the simulated model answers at one agent turn."""

    index: int
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {"tool", "args"}
    final: str | None = None
    say: str = ""


@dataclass
class Scenario:
    name: str
    goal: str
    steps: list[dict[str, Any]]
    system: str = ""
    window: int | None = None
    expect_tier1: list[str] = field(default_factory=list)
    tools: list[str] | None = None  # offer only these tools (schemas cost tokens)
    summarizer: str = ""  # the simulated model's summary mode: faithful | lossy | hostile
    model_steps: list[ModelStep] = field(default_factory=list)
    # user messages that arrive before the agent turn with this index
    user_before: dict[int, list[str]] = field(default_factory=dict)

    def user_messages_before(self, turn_index: int) -> list[str]:
        """The person's messages of the script as the engine takes them in: by the storable
        rule (agents/storable.py), as a message people send through the store is."""
        return [storable_text(text) for text in self.user_before.get(turn_index, [])]


def list_scenarios() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.json"))


def _parse_step(raw: Any, where: str) -> tuple[str, Any]:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: a step must be an object, got {type(raw).__name__}")
    if "user" in raw:
        if not isinstance(raw["user"], str):
            raise ScenarioError(f"{where}: 'user' must be a string")
        return "user", raw["user"]
    if "final" in raw:
        if not isinstance(raw["final"], str):
            raise ScenarioError(f"{where}: 'final' must be a string")
        return "final", raw["final"]
    if "tool" in raw:
        calls = [raw]
    elif "tools" in raw and isinstance(raw["tools"], list) and raw["tools"]:
        calls = raw["tools"]
    else:
        raise ScenarioError(f"{where}: a step needs one of 'user', 'tool', 'tools', 'final'")
    parsed = []
    for call in calls:
        if not isinstance(call, dict) or not isinstance(call.get("tool"), str):
            raise ScenarioError(f"{where}: each tool call needs a 'tool' name")
        args = call.get("args", {})
        if not isinstance(args, dict):
            raise ScenarioError(f"{where}: 'args' of {call['tool']} must be an object")
        parsed.append({"tool": call["tool"], "args": args})
    return "tools", (parsed, raw.get("say", ""))


MAX_REPEAT = int(REPEAT.high)


def _fill(value: Any, n: int) -> Any:
    if isinstance(value, str):
        return value.replace("{n}", str(n))
    if isinstance(value, dict):
        return {k: _fill(v, n) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, n) for v in value]
    return value


def expand_repeats(steps: list[Any], origin: str) -> list[Any]:
    """`{"repeat": N, "from": K, "tool": …, "args": …}` is N tool steps, "{n}" in its
    strings numbered K, K+1, …: long load scenarios stay a few lines long."""
    out: list[Any] = []
    for i, raw in enumerate(steps):
        if not (isinstance(raw, dict) and "repeat" in raw):
            out.append(raw)
            continue
        count, first = raw["repeat"], raw.get("from", 1)
        if not (isinstance(count, int) and 1 <= count <= MAX_REPEAT and isinstance(first, int)):
            raise ScenarioError(f"{origin} step {i + 1}: 'repeat' must be a whole number from "
                                f"1 to {MAX_REPEAT} and 'from' a whole number")
        step = {k: v for k, v in raw.items() if k not in ("repeat", "from")}
        out.extend(_fill(step, n) for n in range(first, first + count))
    return out


def parse_scenario(data: Any, origin: str = "<scenario>") -> Scenario:
    try:
        validate_scenario(data)
    except ScenarioShapeError as exc:
        raise ScenarioError(f"{origin}: {exc}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{origin}: the scenario must be a JSON object")
    for key in ("name", "goal", "steps"):
        if key not in data:
            raise ScenarioError(f"{origin}: missing required key {key!r}")
    if not isinstance(data["steps"], list) or not data["steps"]:
        raise ScenarioError(f"{origin}: 'steps' must be a non-empty list")
    data = {**data, "steps": expand_repeats(data["steps"], origin)}
    window = data.get("window")  # checked against WINDOW's range by validate_scenario
    scenario = Scenario(name=str(data["name"]), goal=str(data["goal"]), steps=data["steps"],
                        system=str(data.get("system", "")), window=window,
                        expect_tier1=list((data.get("expect") or {}).get("tier1", [])),
                        tools=data.get("tools"), summarizer=str(data.get("summarizer") or ""))
    if scenario.summarizer not in ("", "faithful", "lossy", "hostile"):
        raise ScenarioError(f"{origin}: 'summarizer' must be faithful, lossy or hostile, "
                            f"not {scenario.summarizer!r}")
    if scenario.tools is not None and not (
            isinstance(scenario.tools, list) and all(isinstance(t, str) for t in scenario.tools)):
        raise ScenarioError(f"{origin}: 'tools' must be a list of tool names")
    pending_users: list[str] = []
    for i, raw in enumerate(data["steps"]):
        kind, value = _parse_step(raw, f"{origin} step {i + 1}")
        if kind == "user":
            pending_users.append(value)
            continue
        index = len(scenario.model_steps)
        if pending_users:
            scenario.user_before[index] = pending_users
            pending_users = []
        if kind == "final":
            scenario.model_steps.append(ModelStep(index=index, final=value))
        else:
            calls, say = value
            scenario.model_steps.append(ModelStep(index=index, tool_calls=calls, say=say))
    if pending_users:
        scenario.user_before[len(scenario.model_steps)] = pending_users
    if scenario.model_steps[-1].final is None:
        raise ScenarioError(f"{origin}: the last model step must be a 'final' answer")
    return scenario


def split_subtask(name_or_path: str) -> tuple[str, str]:
    """"research-report#pricing" → ("research-report", "pricing"); no "#" → (name, "")."""
    base, _, subtask = name_or_path.partition("#")
    return base, subtask


def load_scenario(name_or_path: str) -> Scenario:
    """Load a bundled scenario by name, or a scenario file by path; "NAME#SUB" loads the
    subtask SUB of that file (what a sub-agent plays, feature T6)."""
    name_or_path, subtask = split_subtask(name_or_path)
    path = Path(name_or_path)
    if not path.suffix:
        path = SCENARIO_DIR / f"{name_or_path}.json"
    if not path.is_file():
        raise ScenarioError(f"Unknown scenario {name_or_path!r}. Bundled scenarios: "
                            f"{', '.join(list_scenarios())}; or give a path to a JSON file.")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ScenarioError(f"{path}: cannot read the scenario ({exc})") from exc
    except RecursionError:
        raise ScenarioError(f"{path}: cannot read the scenario: it is nested too deeply "
                            "(tool arguments may be nested at most "
                            f"{MAX_ARGS_DEPTH} levels)") from None
    if not subtask:
        return parse_scenario(data, origin=str(path))
    scenario = parse_scenario(data, origin=str(path))  # the whole file is checked first
    subtasks = data.get("subtasks") or {}
    if subtask not in subtasks:
        raise ScenarioError(f"{path}: no subtask {subtask!r}; subtasks: "
                            f"{', '.join(sorted(subtasks)) or 'none'}")
    child = {"name": f"{scenario.name}#{subtask}", **subtasks[subtask]}
    return parse_scenario(child, origin=f"{path}#{subtask}")
