"""The engine's own check of a compaction (feature E3): what must stay in context stayed,
and the new summary holds no number that none of its sources held.

(agents/compaction/source_audit.py is the independent audit against the archive; this one checks the
context the engine built right after compacting.)
"""
from __future__ import annotations

from typing import Any

from agents.compaction.numbers import known_values, numbers_in, summary_values
from agents.compaction.summary import one_line as _one_line


def audit_compaction(*, new_context_text: str, tier1_anchors: list[str], snapshot_text: str,
                     open_tasks: list[str], new_summary_text: str, compacted_texts: list[str],
                     previous_summary_text: str) -> dict[str, Any]:
    """Check a compaction: anchors, snapshot and open tasks still in context, no invented numbers.

    A number in the new summary is supported when it appears in one of the compacted
    messages (`compacted_texts`, each read on its own: a tool result the source audit
    already read is not read again), the previous summary or a hard constraint the
    engine gave the summarizer.
    """
    context = _one_line(new_context_text)
    missing_anchors = [a for a in tier1_anchors if _one_line(a) not in context]
    snapshot_present = _one_line(snapshot_text) in context
    missing_tasks = [t for t in open_tasks if _one_line(t) not in context]
    known = set().union(summary_values(previous_summary_text),
                        *(known_values(source) for source in (*compacted_texts, *tier1_anchors)))
    unsupported: list[str] = []
    for written, _, scaled in numbers_in(new_summary_text):
        if scaled not in known and written not in unsupported:
            unsupported.append(written)
    return {"ok": not (missing_anchors or missing_tasks or unsupported) and snapshot_present,
            "missing_anchors": missing_anchors, "snapshot_present": snapshot_present,
            "missing_tasks": missing_tasks, "unsupported_numbers": unsupported}
