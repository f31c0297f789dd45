"""Compare runs of one task (feature E2): reports from stored events, and where contexts part.

Every figure is computed the same way for the recorded session and for each replay, from
their stored events, so a difference is a difference of the runs, not of the counting.
"""
from __future__ import annotations

import json
import re
from typing import Any, Iterator

from agents import (ANNOTATIONS, Audit, Compaction, ErrorEvent, EventType, ModelCall, ReportSink,
                    ScenarioError, ToolResult, differences, load_scenario)
from taskos.runs.models import ArchivedTurn, Session, SessionEvent
from taskos.store.call_messages import MessageResolver
from taskos.store.stored_events import select, stored_event

REF = re.compile(r"arc:(\d+):(\d+)")
IMPOSSIBLE = "replay_decision_impossible"


def expected_tier1(session: Session) -> list[str]:
    if not session.scenario:
        return []
    try:
        return load_scenario(session.scenario).expect_tier1
    except ScenarioError:
        return []


def anchor_survival(session: Session) -> float | None:
    """The run report's anchor survival, from the report state saved with the engine's."""
    state = ((session.engine_state or {}).get("companions") or {}).get("report")
    expect = expected_tier1(session)
    if not expect or state is None:
        return None
    sink = ReportSink(None, expect)
    sink.from_state(state)
    return sink.anchor_survival()


def stored_report(session: Session) -> dict[str, Any]:
    """The runtask report keys plus cost, cache, summaries and audit, from stored events."""
    rows = SessionEvent.objects.filter(session=session)
    # Only the figures compared are read, in SQL: a call's prompt stays in the database.
    calls = select(rows, ModelCall, ("call", "kind", "input_tokens", "cached_tokens", "cost",
                                     "over_window"))
    compactions = select(rows, Compaction, ("noop", "audit"))
    audits = select(rows, Audit, ("ok", "unsupported_figures", "unsupported_names"))
    impossible = select(rows.filter(payload__code=IMPOSSIBLE), ErrorEvent, ("message",))
    # str(): SQLite's JSON_EXTRACT hands a digits-only string back unquoted, and Django
    # then decodes "2" as the number 2; child ids are strings on every backend.
    reused = [{"turn": r.turn, "child": str(r.child), "status": r.child_status,
               "error": r.error, "recorded_input_tokens": r.child_input_tokens,
               "recorded_cost": r.child_cost}
              for r in select(rows.filter(payload__reused=True).order_by("seq"), ToolResult,
                              ("child", "child_status", "error", "child_input_tokens",
                               "child_cost"))]
    inputs = [c.input_tokens for c in calls]
    cached = sum(c.cached_tokens for c in calls)
    real = [c for c in compactions if not c.noop]
    return {
        "session": session.pk, "status": session.status, "turns": session.turns,
        "window": session.window, "profile": session.profile.name,
        "model_calls": [{"call": c.call, "turn": c.turn, "kind": c.kind,
                         "input_tokens": c.input_tokens, "over_window": c.over_window}
                        for c in calls],
        "total_input_tokens": sum(inputs), "peak_input_tokens": max(inputs, default=0),
        "compactions": len(real),
        "summary_calls": sum(1 for c in calls if c.kind == "summary"),
        "over_window_requests": sum(1 for c in calls if c.over_window),
        "anchor_survival": anchor_survival(session),
        "cached_tokens": cached, "cached_share": round(cached / sum(inputs), 4) if inputs else 0,
        "cost": round(sum(float(c.cost) for c in calls), 6),
        # The E3 audit against the archive when the session has it, else the old self-check.
        "audit_failures": sum(1 for a in audits if a.ok is False) if audits
        else sum(1 for c in real if c.audit.get("ok") is False),
        "unsupported_figures": len({f for a in audits for f in a.unsupported_figures}),
        "unsupported_names": len({n for a in audits for n in a.unsupported_names}),
        "impossible_decisions": [{"turn": i.turn, "reason": i.message} for i in impossible],
        # A replay of a session that delegated: the recorded sub-agents' answers it reused
        # (their work is the recording's and is not counted in this run's figures).
        "reused_children": reused,
    }


def _canonical(session: Session) -> dict[str, str]:
    """Each archive ref of `session` -> its rank in the session's archive, so two runs'
    refs compare equal when they point at the same position in their own archives."""
    ids = ArchivedTurn.objects.filter(session=session).order_by("id").values_list("id", flat=True)
    return {f"arc:{session.pk}:{pk}": f"arc:#{rank}" for rank, pk in enumerate(ids, 1)}


def agent_requests(session: Session) -> Iterator[tuple[int, int, list[dict[str, Any]]]]:
    """(turn, call number, messages as sent) of each agent call, oldest first."""
    rows = (SessionEvent.objects.filter(session=session, type=EventType.MODEL_CALL,
                                        payload__kind="agent")
            .order_by("seq").values_list("seq", "turn", "payload"))
    resolver = MessageResolver(session.pk)  # rows store what is new since the last call
    for seq, turn, payload in rows.iterator(chunk_size=20):
        call = stored_event(EventType.MODEL_CALL, payload, seq=seq, turn=turn)
        # The stored row is what the resolver rebuilds messages from: data, kept as stored.
        if call.refused:
            resolver.remember(seq, payload)
            continue
        sent = [{k: v for k, v in m.items() if k not in ANNOTATIONS}
                for m in resolver.messages(seq, payload)]
        yield turn, call.call, sent


def first_difference(source: Session, replay: Session) -> dict[str, Any] | None:
    """The first agent call (by turn) whose context differs between the two runs."""
    maps = (_canonical(source), _canonical(replay))

    def text(messages, refs) -> str:
        return REF.sub(lambda m: refs.get(m.group(0), m.group(0)),
                       json.dumps(messages, ensure_ascii=False, sort_keys=True))

    left, right = agent_requests(source), agent_requests(replay)
    for (turn, call_a, msgs_a), (_, call_b, msgs_b) in zip(left, right):
        if text(msgs_a, maps[0]) != text(msgs_b, maps[1]):
            return {"turn": turn, "source_call": call_a, "replay_call": call_b}
    return None


def compare(source: Session, replays: list[Session]) -> dict[str, Any]:
    """The recorded session's report and each replay's, with differences and first split."""
    base = stored_report(source)
    runs = []
    for replay in replays:
        report = stored_report(replay)
        report["differences"] = differences(base, report)
        report["first_difference"] = first_difference(source, replay)
        runs.append(report)
    return {"source": base, "replays": runs}
