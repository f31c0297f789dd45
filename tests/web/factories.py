"""Rows and event payloads for web tests, shaped as agents/events.py documents them."""
from __future__ import annotations

import itertools
from typing import Any

from django.utils import timezone

from taskos.runs.models import Session, SessionEvent

ZONE_ORDER = ("system", "snapshot", "summary", "history", "hints")


def add_events(session: Session, *events: tuple[str, dict[str, Any]] | tuple[str, dict, int]
               ) -> list[SessionEvent]:
    """Store events after the session's last seq; each is (type, payload[, turn])."""
    last = session.events.order_by("-seq").values_list("seq", flat=True).first() or 0
    rows = []
    for seq, event in zip(itertools.count(last + 1), events):
        kind, payload, *rest = event
        rows.append(SessionEvent.objects.create(session=session, seq=seq, type=kind,
                                                payload=payload, turn=rest[0] if rest else 1,
                                                at=timezone.now()))
    return rows


def budget(window: int = 8000, **zones: int) -> tuple[str, dict[str, Any]]:
    values = {"system": 300, "snapshot": 200, "summary": 0, "history": 1500, "hints": 50,
              "reserve": 1000, **zones}
    used = sum(values[z] for z in ZONE_ORDER)
    return ("BUDGET", {
        "window": window, "zones": values,
        "budgets": {"system": 375, "snapshot": 250, "summary": 1000, "history": 2000,
                    "hints": 64, "reserve": 1000},
        "input_tokens": used, "trigger_line": int(window * 0.8),
        "warning_line": int(window * 0.6), "free": window - used - values["reserve"]})


def model_call(call: int, input_tokens: int, *, kind: str = "agent", history: int = 0,
               cached: int = 0, cost: float = 0.0, over: bool = False,
               messages: list[dict[str, Any]] | None = None) -> tuple[str, dict[str, Any]]:
    zones = {"system": 300, "snapshot": 200, "summary": 0,
             "history": history or max(0, input_tokens - 550), "hints": 50}
    return ("MODEL_CALL", {
        "call": call, "kind": kind, "input_tokens": input_tokens, "zones": zones,
        "output_tokens": 120, "cached_tokens": cached, "finish_reason": "stop",
        "latency_ms": 12, "cost": cost, "over_window": over, "limit": 7000,
        "model": "taskos-sim",
        "messages": messages or [
            {"role": "system", "zone": "system", "tokens": 300, "content": "You are TaskOS."},
            {"role": "user", "zone": "snapshot", "tokens": 200, "content": "Goal: sales"},
        ]})


def compaction(trigger: str = "rolling", *, before_history: int = 5000,
               after_history: int = 800, summary_before: str = "",
               summary_after: str = "## Progress\n- loaded sales.csv",
               audit: dict[str, Any] | None = None, **extra: Any) -> tuple[str, dict[str, Any]]:
    return ("COMPACTION", {
        "trigger": trigger,
        "before": {"system": 300, "snapshot": 200, "summary": 0, "history": before_history},
        "after": {"system": 300, "snapshot": 200, "summary": 400, "history": after_history},
        "summary_before": summary_before, "summary_after": summary_after,
        "archived_turns": [1, 4], "refs": ["arc:1:2", "arc:1:3"], "fallback": False,
        "fallback_reason": "", "instructions": "",
        "audit": audit if audit is not None else {
            "ok": True, "missing_anchors": [], "snapshot_present": True,
            "missing_tasks": [], "unsupported_numbers": []},
        **extra})
