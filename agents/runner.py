"""One entry point that runs a session: used by the Celery task, runtask and the benchmark."""
from __future__ import annotations

import shutil
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from agents.config import ContextConfig, ModelProfile
from agents.events import Event, EventSink, EventType
from agents.loop import AgentLoop, RunResult, SessionSpec
from agents.model import ModelClient
from agents.retry import RetryBudget
from agents.scenarios import DATA_DIR, Scenario, load_scenario, parse_scenario
from agents.sim.transport import sim_http_client
from agents.store import Store
from agents.tools.registry import default_registry


class ReportSink:
    """Forwards every event and keeps what the run report needs (the runtask keys)."""

    def __init__(self, inner: EventSink, expect_tier1: list[str]) -> None:
        self.inner = inner
        self.expect = expect_tier1
        self.model_calls: list[dict[str, Any]] = []
        self.compactions = 0
        self.stated_turn: dict[str, int] = {}
        self.present: dict[str, list[tuple[int, bool]]] = {s: [] for s in expect_tier1}

    def emit(self, event: Event) -> None:
        payload = event.payload
        if event.type == EventType.MODEL_CALL:
            self.model_calls.append({"input_tokens": payload["input_tokens"],
                                     "kind": payload["kind"],
                                     "over_window": payload["over_window"],
                                     **({"refused": True} if payload.get("refused") else {})})
            if payload.get("refused"):  # never sent on to the model: nothing to check in it
                return self.inner.emit(event)
            text = "\n".join(str(m.get("content") or "") for m in payload["messages"])
            for expected in self.expect:
                self.present[expected].append((event.turn, expected in text))
        elif event.type == EventType.COMPACTION and not payload.get("noop"):
            self.compactions += 1
        elif event.type == EventType.USER_MESSAGE:
            for expected in self.expect:
                if expected in payload["text"] and expected not in self.stated_turn:
                    self.stated_turn[expected] = event.turn
        self.inner.emit(event)

    def discard_after(self, seq: int) -> int:
        discard = getattr(self.inner, "discard_after", None)
        return discard(seq) if discard else 0

    # The report survives a resume: the loop saves this with its own state every turn.
    state_key = "report"

    def to_state(self) -> dict[str, Any]:
        return {"model_calls": self.model_calls, "compactions": self.compactions,
                "stated_turn": self.stated_turn,
                "present": {k: [list(p) for p in v] for k, v in self.present.items()}}

    def from_state(self, state: dict[str, Any]) -> None:
        self.model_calls = list(state.get("model_calls", []))
        self.compactions = state.get("compactions", 0)
        self.stated_turn = dict(state.get("stated_turn", {}))
        for key, pairs in state.get("present", {}).items():
            if key in self.present:
                self.present[key] = [tuple(p) for p in pairs]

    def anchor_survival(self) -> float | None:
        if not self.expect:
            return None
        survived = 0
        for expected in self.expect:
            stated = self.stated_turn.get(expected)
            seen = [ok for turn, ok in self.present[expected] if stated is not None and turn >= stated]
            survived += bool(seen) and all(seen)
        return survived / len(self.expect)


@dataclass
class SessionRun:
    result: RunResult
    report: dict[str, Any] = field(default_factory=dict)
    engine_ms: list[float] = field(default_factory=list)  # per agent call, in order

    @property
    def status(self) -> str:
        return self.result.status

    @property
    def final_answer(self) -> str:
        return self.result.final_answer

    @property
    def turns(self) -> int:
        return self.result.turns


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


def run_session(*, session_id: str, goal: str, scenario: str | Scenario | None,
                profile: ModelProfile, config: ContextConfig, store: Store, events: EventSink,
                workspace: Path, progress: Callable[[int, int], None] | None = None,
                http_client: Any = None, retries: RetryBudget | None = None,
                summarizer: str | None = None, model: Any = None,
                make_loop: Callable[..., AgentLoop] = AgentLoop) -> SessionRun:
    """Run (or resume) one session to its end and return the result with its report."""
    plan = load_scenario(scenario) if isinstance(scenario, str) else scenario
    if plan is None and profile.simulated:
        plan = generic_scenario(goal)
    goal = goal or (plan.goal if plan else "")
    if profile.simulated and http_client is None and model is None:
        http_client, _ = sim_http_client(plan, profile.context_size, summarizer)
    model = model or ModelClient(profile, http_client=http_client,
                                 base_url="http://sim.taskos.invalid/v1" if profile.simulated
                                 else None)
    prepare_workspace(workspace)
    sink = ReportSink(events, plan.expect_tier1 if plan else [])
    system = (plan.system if plan and plan.system else None)
    spec = SessionSpec(goal=goal, profile=profile, config=config, scenario=plan,
                       **({"system_prompt": system} if system else {}))
    loop = make_loop(session_id=session_id, spec=spec, store=store, events=sink, model=model,
                     tools=default_registry(config, only=plan.tools if plan else None),
                     workspace=workspace, companions=[sink], retries=retries)
    result = loop.run(progress=progress)
    calls = sink.model_calls
    inputs = [c["input_tokens"] for c in calls]
    report = {
        "status": result.status, "turns": result.turns, "error": result.error,
        "model_calls": calls,
        "total_input_tokens": sum(inputs), "peak_input_tokens": max(inputs, default=0),
        "compactions": sink.compactions,
        "over_window_requests": sum(1 for c in calls if c["over_window"]),
        "anchor_survival": sink.anchor_survival(),
        "engine_ms_per_call": round(statistics.median(loop.ledger.engine_ms), 3)
        if loop.ledger.engine_ms else None,
    }
    return SessionRun(result=result, report=report, engine_ms=list(loop.ledger.engine_ms))
