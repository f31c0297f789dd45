"""Compare runs of one task (feature E2): reports from stored events, and where contexts part.

Every figure is computed the same way for the recorded session and for each replay, from
their stored events, so a difference is a difference of the runs, not of the counting.
"""
from __future__ import annotations

import json
import re
from typing import Any, Iterator

from agents import (ANNOTATIONS, PRICE_TABLES, Audit, Compaction, ErrorEvent, EventType, ModelCall,
                    ReportSink, ScenarioError, ToolResult, differences, load_scenario)
from taskos.runs.models import ArchivedTurn, Session, SessionEvent
from taskos.runs.prices import cost_at, unpriced
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
                                     "over_window", "output_tokens", "refused",
                                     "cache_read_tokens", "cache_write_tokens"))
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
        **breakpoint_cache(calls),
        "cost": round(sum(float(c.cost) for c in calls), 6),
        # What the calls would have cost at each of the benchmark's named tables: the only
        # money a simulated run (or an unpriced profile) can show.
        "unpriced": unpriced(session.profile),
        "costs_at": {name: cost_at(calls, name) for name in PRICE_TABLES},
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


def breakpoint_cache(calls: list[ModelCall]) -> dict[str, int | None]:
    """What the calls read from and wrote to a breakpoint cache (profile cache_marks), as
    the provider reported it; None when no call reported it (a provider that caches by
    itself). Refused calls were never sent, so never read or wrote anything."""
    reported = [c for c in calls if c.cache_write_tokens is not None and not c.refused]
    if not reported:
        return {"cache_read_tokens": None, "cache_write_tokens": None}
    return {"cache_read_tokens": sum(c.cache_read_tokens or 0 for c in reported),
            "cache_write_tokens": sum(c.cache_write_tokens for c in reported)}


def _canonical(session: Session) -> dict[str, str]:
    """Each archive ref of `session` -> its rank in the session's archive, so two runs'
    refs compare equal when they point at the same position in their own archives."""
    ids = ArchivedTurn.objects.filter(session=session).order_by("id").values_list("id", flat=True)
    return {f"arc:{session.pk}:{pk}": f"arc:#{rank}" for rank, pk in enumerate(ids, 1)}


def requests(session: Session) -> Iterator[tuple[int, int, str, dict[str, Any], int]]:
    """(turn, call number, kind, request as sent: messages and every other parameter, the
    provider's input tokens) of each call the provider answered, oldest first. Tool schemas
    stored once and named by later calls ({"tools_of_call": N}) are read back as sent."""
    rows = (SessionEvent.objects.filter(session=session, type=EventType.MODEL_CALL)
            .order_by("seq").values_list("seq", "turn", "payload"))
    resolver = MessageResolver(session.pk)  # rows store what is new since the last call
    schemas: dict[int, Any] = {}  # call number -> the tool schemas it stored
    for seq, turn, payload in rows.iterator(chunk_size=20):
        call = stored_event(EventType.MODEL_CALL, payload, seq=seq, turn=turn)
        # The stored row is what the resolver rebuilds messages from: data, kept as stored.
        if call.refused:
            resolver.remember(seq, payload)
            continue
        sent = [{k: v for k, v in m.items() if k not in ANNOTATIONS}
                for m in resolver.messages(seq, payload)]
        params = {k: v for k, v in (call.request or {}).items() if k != "key_orders"}
        if "tools" in params:
            params["tools"] = _tools_sent(params["tools"], schemas, call.call)
        yield turn, call.call, call.kind, {**params, "messages": sent}, call.input_tokens


def _tools_sent(tools: Any, schemas: dict[int, Any], number: int) -> Any:
    """The schemas a call sent: stored as JSON text (a JSONB column loses key order), or as
    a marker naming the earlier call that stored them (then remembered for later ones)."""
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except ValueError:
            return tools
    if isinstance(tools, dict) and isinstance(tools.get("tools_of_call"), int):
        return schemas.get(tools["tools_of_call"], tools)
    schemas[number] = tools
    return tools


def agent_requests(session: Session) -> Iterator[tuple[int, int, list[dict[str, Any]]]]:
    """(turn, call number, messages as sent) of each agent call, oldest first."""
    for turn, number, kind, request, _ in requests(session):
        if kind == "agent":
            yield turn, number, request["messages"]


def first_difference(source: Session, replay: Session) -> dict[str, Any] | None:
    """Where the two runs' requests part, None only when every request is byte for byte the
    same and was counted the same. "context": the first call whose request differs (or
    that one run made and the other did not). "refs": the contexts are the same but the
    archive refs in them differ (each run numbers its own archive), so the bytes and
    the counts can differ. "counts": the same bytes, counted differently."""
    maps = (_canonical(source), _canonical(replay))

    def text(request, refs=None) -> str:
        dumped = json.dumps(request, ensure_ascii=False, sort_keys=True)
        return dumped if refs is None else REF.sub(lambda m: refs.get(m.group(0), m.group(0)),
                                                  dumped)

    def found(kind: str, turn: int, a, b) -> dict[str, Any]:
        return {"kind": kind, "turn": turn, "source_call": a[1] if a else None,
                "replay_call": b[1] if b else None}

    near = None  # the first call that is the same context but not the same bytes/count
    left, right = requests(source), requests(replay)
    while True:
        a, b = next(left, None), next(right, None)
        if a is None and b is None:
            return near
        if a is None or b is None:  # one run made more calls than the other
            return found("context", (a or b)[0], a, b)
        if text(a[3], maps[0]) != text(b[3], maps[1]):
            return found("context", a[0], a, b)
        if near is None and text(a[3]) != text(b[3]):
            near = found("refs", a[0], a, b)
        elif near is None and a[4] != b[4]:
            near = found("counts", a[0], a, b)


def difference_text(first: dict[str, Any] | None) -> str:
    """`first_difference` in words, for the terminal."""
    if first is None:
        return "requests identical at every call, byte for byte"
    calls = f"call {first['source_call'] or '–'} vs {first['replay_call'] or '–'}"
    if first["kind"] == "refs":
        return (f"same contexts, but archive refs differ from turn {first['turn']} ({calls}): "
                "the bytes and the token counts can differ")
    if first["kind"] == "counts":
        return f"same requests, counted differently from turn {first['turn']} ({calls})"
    return f"contexts first differ at turn {first['turn']} ({calls})"


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
