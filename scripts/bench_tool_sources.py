"""How long a tool source takes (T10): starting the example MCP server and listing its
tools, then calls through the registry (bounded and archived, as the loop runs them).

    python scripts/bench_tool_sources.py [--calls 50]

Prints figures; asserts nothing (the machine may be busy).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agents.store.memory import MemoryStore  # noqa: E402
from agents.tools.base import ToolContext  # noqa: E402
from agents.tools.registry import ToolRegistry  # noqa: E402
from agents.toolsources import SourceSpec  # noqa: E402
from agents.toolsources.offered import SourceSet  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    spec = SourceSpec(name="workspace", command=sys.executable,
                      args=["-m", "taskos.mcp_servers.workspace_tools"], start_timeout_s=300)
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder)
        started = time.perf_counter()
        sources = SourceSet.open([spec], workspace)
        start_s = time.perf_counter() - started
        try:
            registry = ToolRegistry()
            for tool in sources.tools:
                registry.register(tool)
            ctx = ToolContext(session_id="bench", store=MemoryStore(), workspace=workspace)
            times = []
            for i in range(args.calls):
                begun = time.perf_counter()
                outcome = registry.run("workspace__calculate",
                                       json.dumps({"expression": f"{i} * 3 + 1"}), ctx)
                times.append((time.perf_counter() - begun) * 1000)
                assert outcome.error is None, outcome.error
        finally:
            sources.close()
    print(f"start and list tools: {start_s:.2f} s ({len(sources.tools)} tools, "
          f"schemas ~{sum(sources.schema_tokens().values())} tokens)")
    print(f"calls: {len(times)}, median {statistics.median(times):.1f} ms, "
          f"max {max(times):.1f} ms")


if __name__ == "__main__":
    main()
