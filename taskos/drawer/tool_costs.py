"""What each tool, and each tool source (T10), put into the context: the cost panel's
table. A source's tool is named `SOURCE__TOOL` (agents/toolsources); the others are
built-in."""
from __future__ import annotations

from typing import Any

from agents import Event, ToolResult

BUILT_IN = "built-in"


def source_of(tool: str) -> str:
    return tool.split("__", 1)[0] if "__" in tool else BUILT_IN


def tool_costs(events: list[Event]) -> dict[str, list[dict[str, Any]]]:
    """Per tool and per source: calls, errors, tokens kept in the context (what every later
    request carries until a compaction or a clear) and tokens of the whole results."""
    tools: dict[str, dict[str, Any]] = {}
    for ev in events:
        if not isinstance(ev, ToolResult):
            continue
        row = tools.setdefault(ev.name, {"tool": ev.name, "source": source_of(ev.name),
                                         "calls": 0, "errors": 0, "kept": 0, "original": 0})
        row["calls"] += 1
        row["errors"] += 1 if ev.error else 0
        row["kept"] += int(ev.kept_tokens or 0)
        row["original"] += int(ev.original_tokens if ev.original_tokens is not None
                               else ev.kept_tokens or 0)
    sources: dict[str, dict[str, Any]] = {}
    for row in tools.values():
        total = sources.setdefault(row["source"], {"source": row["source"], "calls": 0,
                                                   "errors": 0, "kept": 0, "original": 0})
        for key in ("calls", "errors", "kept", "original"):
            total[key] += row[key]
    return {"tool_rows": sorted(tools.values(), key=lambda r: (-r["kept"], r["tool"])),
            "source_rows": sorted(sources.values(), key=lambda r: (-r["kept"], r["source"]))}


def schema_part(tools: list[dict[str, Any]], count) -> dict[str, Any]:
    """The request's tool schemas as the inspector's `tools` part; when tool sources are on
    offer, its label and `by_source` split it into the built-ins' and each source's, which
    sum to the whole (`count`: the engine's count of a list of schemas)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for tool in tools:
        name = str((tool.get("function") or {}).get("name", ""))
        groups.setdefault(source_of(name), []).append(tool)
    whole = count(tools)
    part = {"part": "tools", "label": f"{len(tools)} tool schemas", "tokens": whole}
    if set(groups) <= {BUILT_IN}:
        return part
    sources = [{"source": source, "schemas": len(group), "tokens": count(group)}
               for source, group in sorted(groups.items()) if source != BUILT_IN]
    built_in = {"source": BUILT_IN, "schemas": len(groups.get(BUILT_IN, [])),
                "tokens": whole - sum(row["tokens"] for row in sources)}
    part["by_source"] = [built_in, *sources]
    part["label"] += " (" + "; ".join(
        f"{row['schemas']} {'built-in' if row['source'] == BUILT_IN else 'from ' + row['source']}"
        f" {row['tokens']:,} tok" for row in part["by_source"]) + ")"
    return part
