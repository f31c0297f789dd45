"""Compare runs of one task (feature E2): reports from stored events, and where contexts part.

Every figure is computed the same way for the recorded session and for each replay, from
their stored events, so a difference is a difference of the runs, not of the counting.
"""
from __future__ import annotations

import json
import re
from typing import Any, Iterator

from django.db.models import F

from agents import ANNOTATIONS, ReportSink, ScenarioError, differences, load_scenario
from taskos.runs.models import ArchivedTurn, Session, SessionEvent
from taskos.store.call_messages import MessageResolver

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
    calls = list(SessionEvent.objects.filter(session=session, type="MODEL_CALL").values(
        "turn", call=F("payload__call"), kind=F("payload__kind"),
        input_tokens=F("payload__input_tokens"), cached=F("payload__cached_tokens"),
        cost=F("payload__cost"), over=F("payload__over_window")))
    compactions = list(SessionEvent.objects.filter(session=session, type="COMPACTION").values(
        noop=F("payload__noop"), ok=F("payload__audit__ok")))
    audits = list(SessionEvent.objects.filter(session=session, type="AUDIT").values(
        ok=F("payload__ok"), count=F("payload__unsupported_count"),
        figures=F("payload__unsupported_figures")))
    impossible = list(SessionEvent.objects.filter(
        session=session, type="ERROR", payload__code=IMPOSSIBLE).values("turn", message=F(
            "payload__message")))
    # str(): SQLite's JSON_EXTRACT hands a digits-only string back unquoted, and Django
    # then decodes "2" as the number 2; child ids are strings on every backend.
    reused = [{"turn": r["turn"], "child": str(r["child"]), "status": r["status"],
               "error": r["error"], "recorded_input_tokens": r["tokens"],
               "recorded_cost": r["cost"]}
              for r in SessionEvent.objects.filter(
                  session=session, type="TOOL_RESULT", payload__reused=True).order_by(
                  "seq").values("turn", child=F("payload__child"),
                                status=F("payload__child_status"), error=F("payload__error"),
                                tokens=F("payload__child_input_tokens"),
                                cost=F("payload__child_cost"))]
    inputs = [int(c["input_tokens"] or 0) for c in calls]
    cached = sum(int(c["cached"] or 0) for c in calls)
    real = [c for c in compactions if not c["noop"]]
    return {
        "session": session.pk, "status": session.status, "turns": session.turns,
        "window": session.window, "profile": session.profile.name,
        "model_calls": [{"call": c["call"], "turn": c["turn"], "kind": c["kind"],
                         "input_tokens": int(c["input_tokens"] or 0),
                         "over_window": bool(c["over"])} for c in calls],
        "total_input_tokens": sum(inputs), "peak_input_tokens": max(inputs, default=0),
        "compactions": len(real),
        "summary_calls": sum(1 for c in calls if c["kind"] == "summary"),
        "over_window_requests": sum(1 for c in calls if c["over"]),
        "anchor_survival": anchor_survival(session),
        "cached_tokens": cached, "cached_share": round(cached / sum(inputs), 4) if inputs else 0,
        "cost": round(sum(float(c["cost"] or 0) for c in calls), 6),
        # The E3 audit against the archive when the session has it, else the old self-check.
        "audit_failures": sum(1 for a in audits if a["ok"] is False) if audits
        else sum(1 for c in real if c["ok"] is False),
        "unsupported_figures": len({f for a in audits for f in a["figures"] or []}),
        "impossible_decisions": [{"turn": i["turn"], "reason": i["message"]} for i in impossible],
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
    rows = (SessionEvent.objects.filter(session=session, type="MODEL_CALL",
                                        payload__kind="agent")
            .order_by("seq").values_list("seq", "turn", "payload"))
    resolver = MessageResolver(session.pk)  # rows store what is new since the last call
    for seq, turn, payload in rows.iterator(chunk_size=20):
        if payload.get("refused"):
            resolver.remember(seq, payload)
            continue
        sent = [{k: v for k, v in m.items() if k not in ANNOTATIONS}
                for m in resolver.messages(seq, payload)]
        yield turn, payload.get("call"), sent


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
