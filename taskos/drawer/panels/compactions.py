"""Compactions: one row per COMPACTION with zones before → after, summary diff and audit.

The audit shown is the E3 audit of the request sent after the compaction (an AUDIT event,
agents/audit.py, checked against the archive); sessions recorded before it existed show
the engine's own check from the COMPACTION payload instead.
"""
from __future__ import annotations

import difflib
from typing import Any

from agents.events import ZONES
from taskos.drawer.base import Panel
from taskos.drawer.events import Ev

CONTEXT_LINES = 1  # unchanged summary lines kept around each change
DETAILED = 8  # newest compactions shown in full; older ones get one line each


def summary_diff(before: str, after: str) -> list[dict[str, str]]:
    """Line diff of two summaries as [{"op": "add"|"del"|"same"|"gap", "text"}]."""
    old, new = (before or "").splitlines(), (after or "").splitlines()
    lines: list[dict[str, str]] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for group in matcher.get_grouped_opcodes(CONTEXT_LINES):
        if lines:
            lines.append({"op": "gap", "text": "…"})
        for tag, a0, a1, b0, b1 in group:
            if tag == "equal":
                lines.extend({"op": "same", "text": text} for text in old[a0:a1])
                continue
            if tag in ("delete", "replace"):
                lines.extend({"op": "del", "text": text} for text in old[a0:a1])
            if tag in ("insert", "replace"):
                lines.extend({"op": "add", "text": text} for text in new[b0:b1])
    return lines


def zone_changes(before: dict[str, int], after: dict[str, int]) -> list[dict[str, Any]]:
    """Tokens per zone before → after, in layout order, zones absent from both skipped."""
    rows = []
    for zone in ZONES:
        if zone not in before and zone not in after:
            continue
        old, new = int(before.get(zone, 0)), int(after.get(zone, 0))
        rows.append({"zone": zone, "before": old, "after": new, "delta": new - old})
    return rows


def input_total(zones: dict[str, int]) -> int:
    return sum(v for k, v in zones.items() if k != "reserve")


def brief_row(number: int, ev: Ev, checked: dict[str, Any] | None = None) -> dict[str, Any]:
    """One line of a compaction: enough for the older ones of a long session; `checked`
    is the AUDIT payload of the request sent after it, if there was one."""
    data = ev.payload
    audit = checked or data.get("audit") or {}
    return {"number": number, "seq": ev.seq, "turn": ev.turn, "trigger": data.get("trigger", ""),
            "total_before": input_total(data.get("before") or {}),
            "total_after": input_total(data.get("after") or {}),
            "fallback": bool(data.get("fallback")), "noop": bool(data.get("noop")),
            "audit_known": bool(audit), "audit_ok": audit.get("ok"),
            "audit_from_archive": checked is not None}


def detailed_row(number: int, ev: Ev, checked: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything about one compaction: zones, summary diff, audit and what left."""
    data = ev.payload
    archived = data.get("archived_turns") or []
    audit = {} if checked is not None else data.get("audit") or {}
    checked = checked or {}
    return {
        **brief_row(number, ev, checked or None),
        "zones": zone_changes(data.get("before") or {}, data.get("after") or {}),
        "diff": summary_diff(data.get("summary_before", ""), data.get("summary_after", "")),
        "fallback_reason": data.get("fallback_reason") or "",
        "instructions": data.get("instructions") or "",
        "archived_first": archived[0] if len(archived) == 2 else None,
        "archived_last": archived[1] if len(archived) == 2 else None,
        "refs": list(data.get("refs") or []),
        "missing_anchors": audit.get("missing_anchors") or [],
        "missing_tasks": audit.get("missing_tasks") or [],
        "unsupported_numbers": audit.get("unsupported_numbers") or [],
        "snapshot_present": audit.get("snapshot_present"),
        "missing_statements": checked.get("missing_statements") or [],
        "unsupported_figures": checked.get("unsupported_figures") or [],
        "unsupported_more": max(0, int(checked.get("unsupported_count") or 0)
                                - len(checked.get("unsupported_figures") or [])),
        "audit_call": checked.get("call"),
    }


class CompactionsPanel(Panel):
    name = "compactions"
    title = "Compactions"
    template = "drawer/panels/compactions.html"
    event_types = ("COMPACTION_STARTED", "COMPACTION", "AUDIT")

    def get_context(self, session, events: list[Ev]) -> dict[str, Any]:
        done = [ev for ev in events if ev.type == "COMPACTION"]
        audits = {ev.payload.get("compaction_seq"): ev.payload
                  for ev in events if ev.type == "AUDIT"}
        newest_first = list(enumerate(done, start=1))[::-1]
        # A start with no end is running only while the session is; else it failed midway.
        last = [ev for ev in events if ev.type != "AUDIT"]
        running = (bool(last) and last[-1].type == "COMPACTION_STARTED"
                   and session.is_active)
        return {
            "rows": [detailed_row(n, ev, audits.get(ev.seq)) for n, ev in newest_first[:DETAILED]],
            "older": [brief_row(n, ev, audits.get(ev.seq)) for n, ev in newest_first[DETAILED:]],
            "count": len(done),
            "audit_failures": sum(1 for a in audits.values() if a.get("ok") is False),
            "running_trigger": last[-1].payload.get("trigger", "") if running else None,
        }

    def badge(self, context: dict[str, Any]) -> str:
        if context["running_trigger"] is not None:
            return "running…"
        if context["audit_failures"]:
            return f"{context['count']} · {context['audit_failures']} audit failed"
        return str(context["count"]) if context["count"] else ""
