"""What a run of the loop is given (SessionSpec, its workspace, a plan for a free goal on
the simulated model) and what it ends with (RunResult)."""
from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from agents.config import MAX_INPUT_CHARS, ContextConfig, ModelProfile
from agents.scenarios import DATA_DIR, Scenario, parse_scenario

DEFAULT_SYSTEM = ("You are TaskOS's agent. Work step by step with the tools. Keep the hard "
                  "constraints in the task snapshot. When you are done, answer without tool calls.")


@dataclass
class SessionSpec:
    goal: str
    profile: ModelProfile
    config: ContextConfig
    system_prompt: str = DEFAULT_SYSTEM
    scenario: Scenario | None = None
    compress_hooks: list = field(default_factory=list)  # extra on_compress_context hooks (C14)
    # The benchmark's baseline: append-only history, no snapshot, hints or compaction.
    unmanaged: bool = False
    max_input_chars: int = MAX_INPUT_CHARS  # a longer goal or message is refused, not stored


@dataclass
class RunResult:
    status: str  # finished | failed | cancelled | waiting (for sub-agents; runs again later)
    final_answer: str
    turns: int
    error: str = ""
    code: str = ""  # the error code (agents/errors.py) of a failed run


def generic_scenario(goal: str) -> Scenario:
    """What the simulated model plays when a person typed a goal instead of a scenario."""
    return parse_scenario({"name": "ad-hoc", "goal": goal, "steps": [
        {"tool": "list_files", "args": {}, "say": "Looking at the workspace first."},
        {"final": "This is TaskOS's simulated model: it cannot reason about a free-form goal. "
                  f"Goal received: {goal[:500]}. Pick a bundled scenario, or point a profile "
                  "at a real model to work on it."}]})


def prepare_workspace(workspace: Path) -> None:
    workspace.mkdir(parents=True, exist_ok=True)
    if DATA_DIR.is_dir():
        for item in DATA_DIR.iterdir():
            target = workspace / item.name
            if item.is_file() and not target.exists():
                shutil.copy2(item, target)
