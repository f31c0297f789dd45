"""What a run of the loop is given (SessionSpec, its workspace, a plan for a free goal on
the simulated model) and what it ends with (RunResult)."""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.config import MAX_INPUT_CHARS, ContextConfig, ModelProfile
from agents.tools.ask_first import AskFirst
from agents.scenarios import DATA_DIR, Scenario, load_scenario, parse_scenario
from agents.storable import storable_text
from agents.tools.delegate import DelegationLimits

DEFAULT_SYSTEM = ("You are TaskOS's agent. Work step by step with the tools. Keep the hard "
                  "constraints in the task snapshot. When you are done, answer without tool calls.")


@dataclass
class SessionSpec:
    """What a run is given: the task, the model, the settings. `SessionSpec.plan` builds one
    from a goal and a scenario's name, path or script."""

    goal: str
    profile: ModelProfile
    config: ContextConfig
    system_prompt: str = DEFAULT_SYSTEM
    scenario: Scenario | None = None
    scenario_name: str = ""  # the bundled name or path it came from: a child's subtask is in it
    tools: list[str] | None = None  # the tools offered; None: the config's, the scenario's, all
    delegation: DelegationLimits = field(default_factory=DelegationLimits)
    summarizer: str | None = None  # the simulated model's summaries: faithful, lossy, hostile
    compress_hooks: list = field(default_factory=list)  # extra on_compress_context hooks (C14)
    # The benchmark's baseline: append-only history, no snapshot, hints or compaction.
    unmanaged: bool = False
    max_input_chars: int = MAX_INPUT_CHARS  # a longer goal or message is refused, not stored
    # MCP servers whose tools are offered beside the built-ins (agents.toolsources.SourceSpec,
    # feature T10): started or reached at every run, so a resumed session reconnects them.
    tool_sources: list = field(default_factory=list)
    ask_first: AskFirst = field(default_factory=AskFirst)  # calls that wait for a person (T11)

    def __post_init__(self) -> None:
        # The goal is the first person's text the engine takes in (a scenario file or the
        # command line may hold a NUL): by the storable rule, so the snapshot, the archive
        # and the audit see one text (agents/storable.py).
        if self.goal:
            self.goal = storable_text(self.goal)
        if self.system_prompt:
            self.system_prompt = storable_text(self.system_prompt)

    @classmethod
    def plan(cls, *, goal: str, scenario: str | Scenario | None, profile: ModelProfile,
             config: ContextConfig, **settings: Any) -> SessionSpec:
        """The spec of a goal and/or a scenario (loaded by name or path); on the simulated
        model a free goal gets a script of its own, and a scenario may bring its goal and
        system prompt. A setting given as None takes its default."""
        settings = {name: value for name, value in settings.items() if value is not None}
        plan = load_scenario(scenario) if isinstance(scenario, str) else scenario
        if plan is None and profile.simulated:
            plan = generic_scenario(goal)
        if plan is not None and plan.system:
            settings.setdefault("system_prompt", plan.system)
        return cls(goal=goal or (plan.goal if plan else ""), profile=profile, config=config,
                   scenario=plan, scenario_name=scenario if isinstance(scenario, str) else "",
                   **settings)

    def for_child(self, *, goal: str, scenario: str | None, profile: ModelProfile,
                  config: ContextConfig) -> SessionSpec:
        """A sub-agent's spec: its own task and window, this session's run settings."""
        return SessionSpec.plan(goal=goal, scenario=scenario, profile=profile, config=config,
                                tools=self.tools, delegation=self.delegation,
                                summarizer=self.summarizer, compress_hooks=self.compress_hooks,
                                unmanaged=self.unmanaged, max_input_chars=self.max_input_chars,
                                ask_first=self.ask_first)


@dataclass
class RunResult:
    status: str  # agents.statuses' final ones, or waiting (for sub-agents; runs again later)
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
            # lexists: a link left in the workspace (dangling or not) is never written through
            if item.is_file() and not os.path.lexists(target):
                shutil.copy2(item, target)
