"""One entry point that runs a session: used by the Celery task, runtask and the benchmark."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from agents.config import MAX_INPUT_CHARS, ContextConfig, ModelProfile
from agents.events import EventSink
from agents.loop.agent_loop import AgentLoop, RunResult, SessionSpec
from agents.loop.retry import RetryBudget
from agents.loop.spec import generic_scenario, prepare_workspace
from agents.provider.client import ModelClient
from agents.report import ZERO_SUMS, ReportSink  # noqa: F401 - ZERO_SUMS re-exported
from agents.scenarios import Scenario, load_scenario
from agents.sim.transport import sim_http_client
from agents.store.interface import Store
from agents.tools.delegate import DelegationLimits, DelegationPlan, delegate_tool
from agents.tools.registry import default_registry


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


def run_session(*, session_id: str, goal: str, scenario: str | Scenario | None,
                profile: ModelProfile, config: ContextConfig, store: Store, events: EventSink,
                workspace: Path, progress: Callable[[int, int], None] | None = None,
                http_client: Any = None, retries: RetryBudget | None = None,
                summarizer: str | None = None, unmanaged: bool = False,
                max_input_chars: int = MAX_INPUT_CHARS, model: Any = None,
                make_loop: Callable[..., AgentLoop] = AgentLoop,
                delegation: DelegationLimits | None = None,
                tools: list[str] | None = None) -> SessionRun:
    """Run (or resume) one session to its end and return the result with its report;
    `tools` names the tools offered (default: the scenario's, else all)."""
    plan = load_scenario(scenario) if isinstance(scenario, str) else scenario
    if plan is None and profile.simulated:
        plan = generic_scenario(goal)
    goal = goal or (plan.goal if plan else "")
    transport = None
    if profile.simulated and http_client is None and model is None:
        http_client, transport = sim_http_client(plan, profile.context_size, summarizer,
                                                  profile.sim_latency_ms / 1000)
    model = model or ModelClient(profile, http_client=http_client,
                                 base_url="http://sim.taskos.invalid/v1" if profile.simulated
                                 else None)
    prepare_workspace(workspace)
    sink = ReportSink(events, plan.expect_tier1 if plan else [], profile)
    system = (plan.system if plan and plan.system else None)
    spec = SessionSpec(goal=goal, profile=profile, config=config, scenario=plan,
                       unmanaged=unmanaged, max_input_chars=max_input_chars,
                       **({"system_prompt": system} if system else {}))
    extra = []
    if config.delegation_enabled or (plan and plan.tools and "delegate" in plan.tools):
        extra.append(delegate_tool(DelegationPlan(
            limits=delegation or DelegationLimits(), window=profile.context_size,
            scenario=scenario if isinstance(scenario, str) else "",
            max_turns=config.max_turns)))
    loop = make_loop(session_id=session_id, spec=spec, store=store, events=sink, model=model,
                     tools=default_registry(
                         config, only=tools or config.tools or (plan.tools if plan else None),
                         extra=extra),
                     workspace=workspace, companions=[sink], retries=retries)
    result = loop.run(progress=progress)
    ledger = loop.ledger
    per_call = ledger.per_call_ms()
    learnt = loop.calibration.learnt() if loop.calibration is not None else (1.0, 0)
    report = {"status": result.status, "turns": result.turns, "error": result.error,
              "error_code": result.code,
              "count_source": loop.count_source, "token_ratio": learnt[0],
              "token_ratio_calls": learnt[1],
              "token_overheads": loop.calibration.learnt_overheads()
              if loop.calibration is not None else {},
              "model_calls": sink.model_calls,
              # Calls whose whole prompt was counted exactly (agents.counting.llama_cpp.prompt_count), and why
              # exact counting stopped when a server's report disagreed.
              "exact_prompts": loop.calls.served.confirmed if loop.calls.served else 0,
              "count_mismatch": loop.calls.served.mismatch if loop.calls.served else "",
              **sink.totals(),
              "engine_ms_per_call": round(per_call, 3) if per_call is not None else None,
              "engine_ms_per_turn_median": round(statistics.median(ledger.turn_ms), 3)
              if ledger.turn_ms else None}
    if transport is not None:  # the simulated summarizer says what it made up: check the audit
        invented = transport.summaries.invented
        report["invented_figures"] = len(invented)
        report["invented_unflagged"] = sink.unflagged(invented)
    return SessionRun(result=result, report=report, engine_ms=list(ledger.turn_ms),
                      engine_calls=list(ledger.turn_calls))
