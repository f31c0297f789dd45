"""Compactions: one row per COMPACTION with zones before → after, summary diff and audit."""
from __future__ import annotations

import difflib
from typing import Any

from agents.events import ZONES
from taskos.drawer.base import Panel
from taskos.drawer.events import Ev

CONTEXT_LINES = 1  # unchanged summary lines kept around each change


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


class CompactionsPanel(Panel):
    name = "compactions"
    title = "Compactions"
    template = "drawer/panels/compactions.html"
    event_types = ("COMPACTION_STARTED", "COMPACTION")

    def get_context(self, session, events: list[Ev]) -> dict[str, Any]:
        rows = []
        for number, ev in enumerate((e for e in events if e.type == "COMPACTION"), start=1):
            data = ev.payload
            before, after = data.get("before") or {}, data.get("after") or {}
            archived = data.get("archived_turns") or []
            audit = data.get("audit") or {}
            rows.append({
                "number": number, "seq": ev.seq, "turn": ev.turn,
                "trigger": data.get("trigger", ""), "zones": zone_changes(before, after),
                "total_before": sum(v for k, v in before.items() if k != "reserve"),
                "total_after": sum(v for k, v in after.items() if k != "reserve"),
                "diff": summary_diff(data.get("summary_before", ""),
                                     data.get("summary_after", "")),
                "fallback": bool(data.get("fallback")),
                "fallback_reason": data.get("fallback_reason") or "",
                "instructions": data.get("instructions") or "",
                "archived_first": archived[0] if len(archived) == 2 else None,
                "archived_last": archived[1] if len(archived) == 2 else None,
                "refs": list(data.get("refs") or []),
                "audit": {
                    "ok": audit.get("ok"), "known": bool(audit),
                    "missing_anchors": audit.get("missing_anchors") or [],
                    "missing_tasks": audit.get("missing_tasks") or [],
                    "unsupported_numbers": audit.get("unsupported_numbers") or [],
                    "snapshot_present": audit.get("snapshot_present"),
                },
            })
        running = bool(events) and events[-1].type == "COMPACTION_STARTED"
        return {"rows": rows[::-1], "count": len(rows),
                "running_trigger": events[-1].payload.get("trigger", "") if running else None}

    def badge(self, context: dict[str, Any]) -> str:
        if context["running_trigger"] is not None:
            return "running…"
        return str(context["count"]) if context["count"] else ""
