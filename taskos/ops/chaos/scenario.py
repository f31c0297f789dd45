"""The scenario a chaos run plays when no bundled one is named: short, with compactions.

Every round fetches a ~1600-token synthetic document, so a small window forces compactions
(summary calls) every few turns; user messages arrive mid-run. A kill can then land inside
a tool call, a model call, an archive write or a compaction, all of which must resume
exactly where the last committed turn ended.
"""
from __future__ import annotations

import json
from pathlib import Path

TOPICS = ["battery chemistry", "grid storage", "solar yield", "wind capacity"]


def chaos_scenario(turns: int, window: int = 12_000) -> dict:
    steps: list[dict] = []
    for index in range(turns):
        if index == 1:
            steps.append({"user": "Hard constraint: the final report must include a table."})
        if index == turns // 2:
            steps.append({"user": "Also give every figure with its unit."})
        steps.append({"tool": "fetch_document",
                      "args": {"tokens": 1600, "topic": f"{TOPICS[index % 4]} #{index + 1}"}})
    steps.append({"final": f"| sources | figures |\n|---|---|\n| {turns} | with units |"})
    return {"name": f"chaos-{turns}", "window": window,
            "tools": ["fetch_document", "recall", "read_ref"],
            "goal": f"Read {turns} documents on the energy transition and write a report.",
            "expect": {"tier1": ["must include a table"]}, "steps": steps}


def write_chaos_scenario(folder: Path, turns: int, window: int = 12_000) -> str:
    """Write the scenario file; return its path (a session's `scenario` takes a path)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"chaos-{turns}.json"
    path.write_text(json.dumps(chaos_scenario(turns, window), ensure_ascii=False, indent=1))
    return str(path)
