"""One entry point that runs a session: used by the Celery task, runtask and the benchmark.

This is where the simulated model is wired in; the loop itself never imports it.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from agents.config import TOOLS_OFF_NOTICE
from agents.counting.pricing import PRICE_TABLES
from agents.events import EventSink
from agents.loop.agent_loop import AgentLoop
from agents.loop.retry import RetryBudget
from agents.loop.spec import RunResult, SessionSpec, prepare_workspace
from agents.provider.client import ModelClient
from agents.report import ReportSink
from agents.sim.transport import sim_http_client
from agents.store.interface import Store
from agents.tools.delegate import DelegationPlan, delegate_tool
from agents.tools.registry import all_tools, default_registry
from agents.toolsources.offered import SourceSet


@dataclass
class SessionRun:
    result: RunResult
    report: dict[str, Any] = field(default_factory=dict)
    engine_ms: list[float] = field(default_factory=list)  # per turn, in order
    engine_calls: list[int] = field(default_factory=list)  # model calls per turn
    engine_cpu_ms: list[float] = field(default_factory=list)  # per turn, the loop's CPU time
    compacted: list[bool] = field(default_factory=list)  # per turn: a compaction ran in it

    @property
    def status(self) -> str:
        return self.result.status

    @property
    def final_answer(self) -> str:
        return self.result.final_answer

    @property
    def turns(self) -> int:
        return self.result.turns


def run_session(spec: SessionSpec, *, session_id: str, store: Store, events: EventSink,
                workspace: Path, progress: Callable[[int, int], None] | None = None,
                http_client: Any = None, model: Any = None, retries: RetryBudget | None = None,
                make_loop: Callable[..., AgentLoop] = AgentLoop) -> SessionRun:
    """Run (or resume) session `session_id` of `spec` to its end and return the result with
    its report. The simulated model is wired in here, for a profile without an endpoint,
    unless `http_client` or `model` says what answers."""
    plan, profile, config = spec.scenario, spec.profile, spec.config
    transport = None
    if profile.simulated and http_client is None and model is None:
        http_client, transport = sim_http_client(plan, profile.context_size, spec.summarizer,
                                                  profile.sim_latency_ms / 1000)
    model = model or ModelClient(profile, http_client=http_client,
                                 base_url="http://sim.taskos.invalid/v1" if profile.simulated
                                 else None)
    prepare_workspace(workspace)
    sink = ReportSink(events, plan.expect_tier1 if plan else [], profile)
    extra = []
    if config.delegation_enabled or (plan and plan.tools and "delegate" in plan.tools):
        extra.append(delegate_tool(DelegationPlan(
            limits=spec.delegation, window=profile.context_size, scenario=spec.scenario_name,
            max_turns=config.max_turns)))
    only = spec.tools or config.tools or (plan.tools if plan else None)
    if config.tools_off:  # said where the session starts (SESSION_STARTED's warnings)
        only = []
        if TOOLS_OFF_NOTICE not in profile.warnings:
            profile.warnings = [*profile.warnings, TOOLS_OFF_NOTICE]
    tools = default_registry(config, only=only, extra=extra)
    sources = None
    if spec.tool_sources and not config.tools_off:
        # Started (or reached) before the first turn: their schemas are in the request from
        # the start and counted in the budget like the built-ins'. What could not be offered
        # is said where the session starts (SESSION_STARTED's warnings).
        sources = SourceSet.open(spec.tool_sources, workspace,
                                 taken={t.name for t in all_tools()} | set(tools.names()))
        for tool in sources.tools:
            tools.register(tool)
        profile.warnings = [*profile.warnings, *sources.warnings]
    try:
        loop = make_loop(session_id=session_id, spec=spec, store=store, events=sink,
                         model=model, tools=tools, workspace=workspace, companions=[sink],
                         retries=retries)
        result = loop.run(progress=progress)
    finally:
        if sources is not None:
            sources.close()
    ledger = loop.ledger
    per_call, cpu_per_call = ledger.per_call_ms(), ledger.per_call_cpu_ms()
    learnt = loop.calibration.learnt() if loop.calibration is not None else (1.0, 0)
    report = {"status": result.status, "turns": result.turns, "error": result.error,
              "error_code": result.code,
              # Which calls were exact and why the rest were not, when exactness was lost.
              "count_source": loop.calibration.summary() if loop.calibration is not None
              else loop.count_source, "token_ratio": learnt[0],
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
              "engine_cpu_ms_per_call": round(cpu_per_call, 3)
              if cpu_per_call is not None else None,
              "engine_ms_per_turn_median": round(statistics.median(ledger.turn_ms), 3)
              if ledger.turn_ms else None}
    if sources is not None:
        report["tool_sources"] = {"offered": [vars(o) for o in sources.offered],
                                  "schema_tokens": sources.schema_tokens(),
                                  "warnings": sources.warnings,
                                  "starts": {name: c.starts
                                             for name, c in sources.connections.items()}}
    if transport is not None:  # the simulated summarizer says what it made up: check the audit
        invented = transport.summaries.invented
        report["invented_figures"] = len(invented)
        report["invented_unflagged"] = sink.unflagged(invented)
        # The same calls priced under Anthropic's strict cache rule (agents/sim/cache.py).
        usage = transport.strict_usage
        report["cached_input_tokens_strict"] = sum(
            marked[0] if marked is not None else cached for _, cached, _, marked in usage)
        report["cost_anthropic_strict"] = round(sum(
            PRICE_TABLES["anthropic-like"].cost(*call) for call in usage), 4)
    return SessionRun(result=result, report=report, engine_ms=list(ledger.turn_ms),
                      engine_calls=list(ledger.turn_calls),
                      engine_cpu_ms=list(ledger.turn_cpu_ms), compacted=list(ledger.turn_compacted))
