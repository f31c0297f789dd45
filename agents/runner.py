"""One entry point that runs a session: used by the Celery task, runtask and the benchmark."""
from __future__ import annotations

import shutil
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from agents.config import MAX_INPUT_CHARS, ContextConfig, ModelProfile
from agents.events import Event, EventSink, EventType
from agents.loop import AgentLoop, RunResult, SessionSpec
from agents.model import ModelClient
from agents.pricing import CostMeter
from agents.retry import RetryBudget
from agents.scenarios import DATA_DIR, Scenario, load_scenario, parse_scenario
from agents.sim.transport import sim_http_client
from agents.store import Store
from agents.tools.registry import default_registry


class ReportSink:
    """Forwards every event and keeps what the run report needs (the runtask keys).

    Everything is a running total updated per event, so saving it with the loop state
    every turn costs the same at turn 10 and at turn 1000 (the per-call list is shared
    with the saved state, not copied).
    """

    def __init__(self, inner: EventSink, expect_tier1: list[str],
                 profile: ModelProfile | None = None) -> None:
        self.inner = inner
        self.expect = expect_tier1
        self.model_calls: list[dict[str, Any]] = []
        self.compactions = 0
        self.stated_turn: dict[str, int] = {}
        # per expected anchor: [calls that should show it, calls that did]
        self.present: dict[str, list[int]] = {s: [0, 0] for s in expect_tier1}
        self.meter = CostMeter(profile or ModelProfile())

    def emit(self, event: Event) -> None:
        payload = event.payload
        if event.type == EventType.MODEL_CALL:
            cached, output = int(payload.get("cached_tokens") or 0), int(payload.get("output_tokens") or 0)
            self.model_calls.append({"input_tokens": payload["input_tokens"],
                                     "kind": payload["kind"],
                                     "over_window": payload["over_window"],
                                     "cached_tokens": cached, "output_tokens": output,
                                     **({"refused": True} if payload.get("refused") else {})})
            if payload.get("refused"):  # never sent on to the model: nothing to check in it
                return self.inner.emit(event)
            self.meter.add(payload["input_tokens"], cached, output)
            if self.expect:
                text = "\n".join(str(m.get("content") or "") for m in payload["messages"])
                for expected in self.expect:
                    stated = self.stated_turn.get(expected)
                    if stated is not None and event.turn >= stated:
                        self.present[expected][0] += 1
                        self.present[expected][1] += expected in text
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
                "stated_turn": self.stated_turn, "present": self.present,
                "cost": self.meter.totals}

    def from_state(self, state: dict[str, Any]) -> None:
        self.model_calls = list(state.get("model_calls", []))
        self.compactions = state.get("compactions", 0)
        self.stated_turn = dict(state.get("stated_turn", {}))
        for key, pair in state.get("present", {}).items():
            if (key in self.present and isinstance(pair, list) and len(pair) == 2
                    and all(isinstance(x, int) for x in pair)):
                self.present[key] = [int(pair[0]), int(pair[1])]
        for name, value in (state.get("cost") or {}).items():
            if name in self.meter.totals:
                self.meter.totals[name] = float(value)

    def anchor_survival(self) -> float | None:
        if not self.expect:
            return None
        survived = sum(1 for expected in self.expect
                       if self.present[expected][0] and
                       self.present[expected][1] == self.present[expected][0])
        return survived / len(self.expect)

    def totals(self) -> dict[str, Any]:
        calls = self.model_calls
        inputs = [c["input_tokens"] for c in calls]
        return {"total_input_tokens": sum(inputs), "peak_input_tokens": max(inputs, default=0),
                "cached_input_tokens": sum(c.get("cached_tokens", 0) for c in calls),
                "output_tokens": sum(c.get("output_tokens", 0) for c in calls),
                "summary_calls": sum(1 for c in calls if c["kind"] == "summary"),
                "compactions": self.compactions,
                "over_window_requests": sum(1 for c in calls if c["over_window"]),
                "anchor_survival": self.anchor_survival(), "cost": self.meter.rounded()}


@dataclass
class SessionRun:
    result: RunResult
    report: dict[str, Any] = field(default_factory=dict)
    engine_ms: list[float] = field(default_factory=list)  # per turn, in order
    engine_calls: list[int] = field(default_factory=list)  # model calls per turn

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
                summarizer: str | None = None, unmanaged: bool = False,
                max_input_chars: int = MAX_INPUT_CHARS, model: Any = None,
                make_loop: Callable[..., AgentLoop] = AgentLoop,
                tools: list[str] | None = None) -> SessionRun:
    """Run (or resume) one session to its end and return the result with its report;
    `tools` names the tools offered (default: the scenario's, else all)."""
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
    sink = ReportSink(events, plan.expect_tier1 if plan else [], profile)
    system = (plan.system if plan and plan.system else None)
    spec = SessionSpec(goal=goal, profile=profile, config=config, scenario=plan,
                       unmanaged=unmanaged, max_input_chars=max_input_chars,
                       **({"system_prompt": system} if system else {}))
    loop = make_loop(session_id=session_id, spec=spec, store=store, events=sink, model=model,
                     tools=default_registry(
                         config, only=tools or config.tools or (plan.tools if plan else None)),
                     workspace=workspace, companions=[sink], retries=retries)
    result = loop.run(progress=progress)
    ledger = loop.ledger
    per_call = ledger.per_call_ms()
    learnt = loop.calibration.learnt() if loop.calibration is not None else (1.0, 0)
    report = {"status": result.status, "turns": result.turns, "error": result.error,
              "count_source": loop.count_source, "token_ratio": learnt[0],
              "token_ratio_calls": learnt[1],
              "model_calls": sink.model_calls,
              **sink.totals(),
              "engine_ms_per_call": round(per_call, 3) if per_call is not None else None,
              "engine_ms_per_turn_median": round(statistics.median(ledger.turn_ms), 3)
              if ledger.turn_ms else None}
    return SessionRun(result=result, report=report, engine_ms=list(ledger.turn_ms),
                      engine_calls=list(ledger.turn_calls))
