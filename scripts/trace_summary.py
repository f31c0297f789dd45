"""Which work fills a page's long tasks, from a Chromium performance trace.

`drawer_bench.py --trace FILE` records a trace while the session runs; this module reads
it and sums, for every main-thread task over 50 ms, the self time of what ran inside it
(script functions by name and source line, style, layout, paint, HTML parsing, GC), so
that a slow update is fixed where the time goes instead of where one guesses it goes.

    .venv/bin/python scripts/trace_summary.py trace.json
"""
from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

LONG_US = 50_000  # a "long task" as the Long Tasks API counts it


def label(event: dict) -> str:
    """A readable name: functions with their source position, other work by its kind."""
    data = (event.get("args") or {}).get("data") or {}
    if event["name"] == "FunctionCall" and data:
        where = data.get("url", "").rsplit("/", 1)[-1]
        return f"js {data.get('functionName') or '(anonymous)'} {where}:{data.get('lineNumber')}"
    if event["name"] == "EventDispatch" and data.get("type"):
        return f"event {data['type']}"
    return event["name"]


def main_thread(events: list[dict]) -> tuple[int, int] | None:
    for event in events:
        if event.get("name") == "thread_name" and event["args"].get("name") == "CrRendererMain":
            return event["pid"], event["tid"]
    return None


def summarize(trace: dict, top: int = 25) -> str:
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    thread = main_thread(events)
    timed = sorted((e for e in events if e.get("ph") == "X" and "dur" in e
                    and (e["pid"], e["tid"]) == thread), key=lambda e: (e["ts"], -e["dur"]))
    self_time: dict[str, float] = defaultdict(float)
    longest, total = 0, 0
    stack: list[dict] = []  # open events: [{"end", "label", "child", "long"}]

    def close(frame: dict) -> None:
        if frame["long"]:
            self_time[frame["label"]] += frame["dur"] - frame["child"]

    for event in timed:
        while stack and stack[-1]["end"] <= event["ts"]:
            close(stack.pop())
        in_long = bool(stack) and stack[0]["long"]
        if not stack and event["name"] in ("RunTask", "ThreadControllerImpl::RunTask"):
            in_long = event["dur"] >= LONG_US
            if in_long:
                longest, total = max(longest, event["dur"]), total + event["dur"]
        if stack:
            stack[-1]["child"] += event["dur"]
        stack.append({"end": event["ts"] + event["dur"], "label": label(event), "dur": event["dur"],
                      "child": 0, "long": in_long})
    while stack:
        close(stack.pop())
    rows = sorted(self_time.items(), key=lambda item: -item[1])[:top]
    lines = [f"long tasks: {total / 1000:.0f} ms in all, longest {longest / 1000:.0f} ms; "
             "self time inside them:"]
    lines += [f"  {ms / 1000:8.0f} ms  {name}" for name, ms in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summarize(json.loads(Path(sys.argv[1]).read_text())))


def summarize_profile(profile: dict, top: int = 25) -> str:
    """Self time per script function from a CDP Profiler profile (Profiler.stop)."""
    nodes = {node["id"]: node for node in profile["nodes"]}
    self_us: dict[str, float] = defaultdict(float)
    for node_id, delta in zip(profile["samples"], profile["timeDeltas"]):
        frame = nodes[node_id]["callFrame"]
        where = frame.get("url", "").rsplit("/", 1)[-1]
        name = f"{frame.get('functionName') or '(anonymous)'} {where}:{frame.get('lineNumber', -1) + 1}"
        self_us[name] += delta
    rows = sorted(self_us.items(), key=lambda item: -item[1])
    rows = [(name, us) for name, us in rows if not name.startswith("(idle)")][:top]
    return "\n".join(["script self time (sampled over the run):"]
                     + [f"  {us / 1000:8.0f} ms  {name}" for name, us in rows])
