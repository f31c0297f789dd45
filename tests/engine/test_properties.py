"""Property tests of the engine's promises against the strict simulated provider (issue 13 §5).

Each example is a small generated scenario run through the real loop (run_session with a
MemoryStore): a window from 2 048 to 1 M tokens, a system prompt up to 90 % of it, 0–30
parallel tool calls a turn, hard constraints in English and Chinese (colliding ones and
prohibitions among them), each summarizer mode, and providers whose real window is smaller
than the profile says (they refuse). The invariants, checked with the provider's own
counting (agents/sim/counting.py) and the audit's own statement rules (agents/compaction/source_audit.py):

1. no request is sent over window − max_tokens: the provider refused nothing unless its
   window was smaller than the profile's, and every refusal is in the report;
2. no request splits a tool call from its result;
3. every tier-1 statement the person made is in every later agent request, or the session
   failed before sending anything it could not fit, with a reason that names the fix;
4. every figure the hostile summarizer invented that reached a request was flagged.

The windows over 32 k get system prompts of at most SYSTEM_CAP tokens and tool results of
a few thousand tokens: the provider counts every request whole, so a 900 k-token prompt
would make one example take seconds. Small windows carry the full 90 % range.
"""
from __future__ import annotations

import dataclasses
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.compaction.source_audit import binding_statements
from agents.events import EventType
from agents.scenarios import parse_scenario
from agents.sim import counting
from agents.sim.summarizer import MODES

from .helpers import run_scenario

SYSTEM_CAP = 12_000  # tokens of system prompt for the large windows (see the docstring)
STEP_TOKENS = 4_000  # tool output per turn, all parallel calls together
SYSTEM_UNIT = "Follow the house style guide and cite every source you use. "
UNIT_TOKENS = counting.text_tokens(SYSTEM_UNIT)

# Hard constraints a person might state, obligations and prohibitions with and without
# "must" (section 3 of issue 13: "Do not …", "Never …", "Always …", 不要, 只能 are tier 1).
CONSTRAINTS = (
    "Do not delete any files.",
    "Never email the customer.",
    "Always answer in German.",
    "Only use data up to 2025-12-31.",
    "不要删除任何文件。",
    "只能使用2025年的数据。",
    "The report must include a table.",
    "The budget is at most 50k tokens.",
    "You must not delete any files.",
    "The final answer must be in German.",
    "Data must be no later than 2025-12-31.",
    "数据必须截止到2026年10月31日。",
    "报告必须用中文写摘要。",
    "不得删除任何文件。",
    "预算最多5万元。",
)
# Statements about different things that share words (and, for the engine's old rules, a
# conflict key). Neither replaces the other.
COLLIDING = (("The budget is at most 50k tokens.", "The travel cost must be at most 300 EUR."),
             ("The report must include a table.", "The appendix must include a chart."))
REPLACEMENT = ("The budget is at most 50k tokens.",
               "Change of plan: the budget is at most 80k tokens now.")


def _window():
    return st.one_of(st.integers(2048, 24_000), st.sampled_from([32_768, 131_072, 1_000_000]))


@st.composite
def scenarios(draw):
    window = draw(_window())
    share = draw(st.floats(0.0, 0.9))
    cap = SYSTEM_CAP if window > 32_768 else window
    units = max(1, int(min(share * window, cap) / UNIT_TOKENS))
    kind = draw(st.sampled_from(["plain", "colliding", "replacement"]))
    stated = list(draw(st.lists(st.sampled_from(CONSTRAINTS), max_size=3, unique=True)))
    if kind == "colliding":
        stated += [c for c in draw(st.sampled_from(COLLIDING)) if c not in stated]
    turns = draw(st.integers(1, 4))
    steps, messages = [], list(stated)
    in_goal = draw(st.integers(0, len(messages)))
    goal = "Collect sources on grid storage and report. " + " ".join(messages[:in_goal])
    later = messages[in_goal:]
    for turn in range(turns):
        if later and draw(st.booleans()):
            steps.append({"user": later.pop(0)})
        calls = draw(st.integers(0, 30))
        if calls == 0:
            steps.append({"user": "Carry on."})
            continue
        per_call = draw(st.integers(8, max(8, min(1_200, STEP_TOKENS // calls))))
        steps.append({"tools": [{"tool": "fetch_document", "args": {
            "tokens": per_call, "topic": f"grid storage {turn}-{k}"}} for k in range(calls)]})
    steps += [{"user": text} for text in later]
    if kind == "replacement":
        steps.insert(0, {"user": REPLACEMENT[0]})
        steps.append({"user": REPLACEMENT[1]})
    steps.append({"final": "Here is the report."})
    provider_share = draw(st.sampled_from([1.0, 1.0, 1.0, 0.95, 0.85]))
    return {"name": "generated", "goal": goal, "system_units": units,
            "tools": draw(st.sampled_from([["fetch_document"], None])),
            # Spread evenly: sampled_from favours its first element when it shrinks.
            "summarizer": MODES[draw(st.integers(0, 999_999)) % len(MODES)], "steps": steps,
            "window": window, "provider_window": max(1_000, int(window * provider_share)),
            "replacement": kind == "replacement"}


def _plain(text: str) -> str:
    return " ".join(text.casefold().split())


def _split_pairs(messages: list[dict]) -> list[str]:
    """Tool calls without their result, or results without their call, in one request."""
    problems, open_ids = [], set()
    for message in messages:
        if message.get("role") == "tool":
            if message.get("tool_call_id") not in open_ids:
                problems.append(f"result {message.get('tool_call_id')} without its call")
            open_ids.discard(message.get("tool_call_id"))
            continue
        if open_ids:
            problems.append(f"calls {sorted(open_ids)} without results")
            open_ids = set()
        open_ids = {c["id"] for c in message.get("tool_calls") or ()}
    if open_ids:
        problems.append(f"calls {sorted(open_ids)} without results at the end")
    return problems


def _required(events, replacement: bool) -> list[tuple[int, list[str]]]:
    """(seq, statements in force from then on) per person message, oldest first."""
    out, force = [], []
    for event in events:
        if event.type != EventType.USER_MESSAGE or event.payload.get("source") == "engine":
            continue
        text = event.payload["text"]
        if replacement and text == REPLACEMENT[1]:
            force = [s for s in force if s not in binding_statements(REPLACEMENT[0])]
        force = force + [s for s in binding_statements(text) if s not in force]
        out.append((event.seq, list(force)))
    return out


def check_invariants(plan: dict) -> None:
    scenario = parse_scenario({k: v for k, v in plan.items()
                               if k not in ("provider_window", "replacement", "system_units")})
    # Built here, past the scenario's input limit (100 000 characters): a system prompt is
    # the operator's, and the plan's repr stays readable when an example fails.
    scenario = dataclasses.replace(scenario, system=SYSTEM_UNIT * plan["system_units"])
    out = run_scenario(scenario, window=plan["window"], transport_window=plan["provider_window"])
    run, transport, events = out.run, out.transport, out.sink.events
    where = json.dumps({k: plan[k] for k in ("window", "provider_window", "summarizer")})
    # 1. Nothing over the window, as the provider counts; refusals only from a smaller one.
    for body, prompt in zip(transport.requests, transport.prompt_tokens):
        assert prompt + body["max_tokens"] <= plan["provider_window"], where
    if plan["provider_window"] >= plan["window"]:
        assert transport.refused == [], where
    assert run.report["over_window_requests"] >= len(transport.refused), where
    # 2. No split tool call / result pairs in any request sent.
    for body in transport.requests:
        assert _split_pairs(body["messages"]) == [], where
    # 3. Every tier-1 statement in every later agent request, or a clear failure.
    if run.status == "failed":
        assert run.result.code in ("preflight_failed", "request_too_large",
                                   "context_length_exceeded"), (where, run.result.error)
        assert "Fix:" in run.result.error or "not sent again" in run.result.error, where
    else:
        assert run.status == "finished", (where, run.result.error)
    required = _required(events, plan["replacement"])
    for event in events:
        if event.type != EventType.MODEL_CALL or event.payload["kind"] != "agent" \
                or event.payload.get("refused"):
            continue
        force = next((f for seq, f in reversed(required) if seq < event.seq), [])
        sent = _plain("\n".join(str(m.get("content") or "") for m in event.payload["messages"]))
        missing = [s for s in force if _plain(s) not in sent]
        assert missing == [], (where, event.payload["call"], missing)
    assert all(not a["missing_statements"] for a in out.payloads(EventType.AUDIT)), where
    # 4. Every invented figure that reached a request was flagged by the audit.
    flagged = {f for a in out.payloads(EventType.AUDIT) for f in a["unsupported_figures"]}
    shown = " ".join(str(m.get("content") or "") for call in out.payloads(EventType.MODEL_CALL)
                     if call["kind"] == "agent" and not call.get("refused")
                     for m in call["messages"] if m.get("zone") == "summary")
    unflagged = [f for f in transport.summaries.invented if f in shown and f not in flagged]
    assert unflagged == [], where


@settings(max_examples=200, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenarios())
def test_the_engine_keeps_its_promises_on_generated_scenarios(plan):
    check_invariants(plan)


@st.composite
def hostile_runs(draw):
    """Longer runs at mid windows, so the hostile summarizer is asked many times."""
    steps = [{"user": draw(st.sampled_from(CONSTRAINTS))}]
    for turn in range(draw(st.integers(3, 6))):
        calls = draw(st.integers(1, 6))
        steps.append({"tools": [{"tool": "fetch_document", "args": {
            "tokens": draw(st.integers(300, 1_500)), "topic": f"wind {turn}-{k}"}}
            for k in range(calls)]})
    steps.append({"final": "Here is the report."})
    return {"name": "hostile", "goal": "Collect sources on wind power and report.",
            "system_units": 1, "tools": ["fetch_document"], "summarizer": "hostile",
            "steps": steps, "window": draw(st.integers(6_000, 16_000)),
            "provider_window": 0, "replacement": False}


@settings(max_examples=30, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(hostile_runs())
def test_the_audit_flags_what_a_hostile_summarizer_invents(plan):
    check_invariants({**plan, "provider_window": plan["window"]})
