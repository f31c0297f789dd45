"""CPU per model call: TaskOS's engine against AgentScope's agent on the same workload.

Both run a bundled scenario (long-200 by default) with a scripted model and no network:
the same tool calls in the same order, the same tool results (the synthetic documents of
the scenario), the same window. What is measured is the CPU time of the framework between
model calls — building each request (context, formatting, token counting), compaction
bookkeeping, storing the results — with the model's answers and the tools' own work left
out on both sides (TaskOS: the engine CPU figure `bench` prints; AgentScope: the process's
CPU time less what the scripted model and the tool spent).

AgentScope is not a TaskOS dependency: install it into a throwaway virtualenv and name its
Python; this script (run with TaskOS's Python) writes the workload to a file, runs TaskOS,
then runs itself under that Python to replay the workload through AgentScope's `Agent`:

    python3 -m venv /tmp/agentscope-venv && /tmp/agentscope-venv/bin/pip install agentscope
    .venv/bin/python scripts/bench_agentscope_cpu.py --agentscope-python \\
        /tmp/agentscope-venv/bin/python [--scenario long-1000] [--json out.json]

On AgentScope's side (2.0.x): its own `OpenAIChatModel` calls the `openai` SDK, which sends
each request through an in-process HTTP transport that answers from the script, as TaskOS's
requests reach its simulated model (an in-process transport behind the same SDK). On both
sides the model's call is left out: TaskOS's `ModelClient.complete` (the request's
parameters, the SDK, the transport, the answer read into a reply), AgentScope's SDK call
and the reading of its answer. AgentScope's formatter, which turns its context into
OpenAI messages on every call, and its own token estimate and compression (a structured
summary call when a request passes 0.8 of the window) run as shipped and are counted. The
scripted summary is a short structured summary (one line per field). A person's message
that the scenario sends in the middle of the run ends AgentScope's reply loop with a
one-word answer and starts the next reply: one extra model call per such message (3 in
long-200 and long-1000).

The script also prints AgentScope with its API call replaced by a Python function that
returns its answer objects (no SDK, no JSON, no transport), which is what it measured until
issue 24's eighth round. That is not like for like: TaskOS pays the SDK round trip on every
call, and the framework's code after a call then runs on caches the round trip displaced.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


# --- the TaskOS side (TaskOS's Python)
def write_workload(scenario_name: str, path: Path) -> dict:
    sys.path.insert(0, str(ROOT))
    from agents.scenarios import load_scenario
    from agents.tools.documents import synthetic_document

    scenario = load_scenario(scenario_name)
    turns = []
    for step in scenario.model_steps:
        calls = []
        for call in step.tool_calls:
            if call["tool"] != "fetch_document":
                raise SystemExit(f"{scenario_name}: only fetch_document workloads are "
                                 f"replayed (found {call['tool']})")
            args = call["args"]
            calls.append({"name": call["tool"], "args": args,
                          "result": synthetic_document(args["tokens"], args["topic"].strip())})
        turns.append({"user": scenario.user_messages_before(step.index), "calls": calls,
                      "say": step.say, "final": step.final})
    workload = {"scenario": scenario_name, "goal": scenario.goal,
                "window": scenario.window or 128_000, "turns": turns}
    path.write_text(json.dumps(workload, ensure_ascii=False))
    return workload


def taskos_cpu(scenario_name: str, window: int) -> dict:
    from agents.bench.workloads import bench_scenario

    with exact_counting_timed() as counting:
        report = bench_scenario(scenario_name, window, with_unmanaged=False)
    calls = len(report["model_calls"])
    return {"model_calls": calls,
            "summary_calls": report["summary_calls"],
            "cpu_ms_per_call": report["engine_cpu"]["per_call"],
            "wall_ms_per_call": report["engine_wall"]["per_call"],
            "exact_counting_cpu_ms_per_call": round(counting["cpu"] * 1000 / calls, 3),
            "cpu": report["engine_cpu"]}


@contextlib.contextmanager
def exact_counting_timed():
    """The engine's CPU in tiktoken (cache misses of TokenCounter), outside tools.

    AgentScope estimates a request's tokens as its UTF-8 bytes / 4 and encodes nothing;
    TaskOS encodes every new text exactly. This share is printed beside the ratio so a
    reader can compare like for like. Tools are left out as the engine's figure leaves
    them out (the synthetic documents count their own sentences while they are made, in
    the tool's own thread or inline in the loop's)."""
    from agents.counting.tokens import TokenCounter
    from agents.tools.registry import ToolRegistry

    spent, inside = {"cpu": 0.0}, threading.local()
    loop_thread = threading.get_ident()  # bench_scenario runs the loop in this thread
    encode_count, run = TokenCounter.encode_count, ToolRegistry.run

    def timed_encode_count(self, text):
        if getattr(inside, "tool", False) or threading.get_ident() != loop_thread:
            return encode_count(self, text)
        started = time.thread_time()
        try:
            return encode_count(self, text)
        finally:
            spent["cpu"] += time.thread_time() - started

    def marked_run(self, *args, **kwargs):
        inside.tool = True
        try:
            return run(self, *args, **kwargs)
        finally:
            inside.tool = False

    TokenCounter.encode_count, ToolRegistry.run = timed_encode_count, marked_run
    try:
        yield spent
    finally:
        TokenCounter.encode_count, ToolRegistry.run = encode_count, run


# --- the AgentScope side (AgentScope's Python)
SUMMARY_FIELDS = ("task_overview", "current_state", "important_discoveries", "next_steps",
                  "context_to_preserve")


def replay_agentscope(workload_path: Path, via: str) -> dict:
    """`via` "sdk": AgentScope's own OpenAIChatModel calls the `openai` SDK, which sends the
    request through an in-process HTTP transport that answers from the script, as TaskOS's
    requests reach the simulated model; the SDK call and the parsing of its answer are
    left out, as TaskOS's `ModelClient.complete` is. "replaced": the model's API call is
    a Python function that returns AgentScope's answer objects, with no SDK and no JSON
    (what this script measured until the eighth round)."""
    import asyncio
    import logging

    import httpx
    from agentscope.agent import Agent, ContextConfig, InjectionConfig, ReActConfig
    from agentscope.credential import OpenAICredential
    from agentscope.message import TextBlock, ToolCallBlock, UserMsg
    from agentscope.model import ChatResponse, OpenAIChatModel
    from agentscope.permission import PermissionBehavior, PermissionDecision
    from agentscope.tool import FunctionTool, Toolkit

    logging.disable(logging.WARNING)  # one "compression activated" line per compaction
    workload = json.loads(workload_path.read_text())
    turns = workload["turns"]
    outside = {"cpu": 0.0}  # CPU spent in the model's call and the tool: not AgentScope's
    cursor = {"turn": 0, "pending_user": False, "calls": 0, "summaries": 0}
    results = iter([c["result"] for t in turns for c in t["calls"]])

    def fetch_document(tokens: int, topic: str) -> str:
        """Fetch a source document of about `tokens` tokens on a topic.

        Args:
            tokens (int): Approximate length in tokens.
            topic (str): The topic.
        """
        started = time.thread_time()
        text = next(results)
        outside["cpu"] += time.thread_time() - started
        return text

    def scripted(tool_names: list[str]) -> tuple[str, list[tuple[str, str, str]]]:
        """The next answer as (text, [(call id, tool, arguments)]): a short structured
        summary (one line per field) when asked for one, else the scenario's next step.
        A person's message in the middle of the run ends the reply with a one-word answer."""
        cursor["calls"] += 1
        if "generate_structured_output" in tool_names:
            cursor["summaries"] += 1
            summary = {field: f"{field.replace('_', ' ')}: the documents read so far, "
                              "their key figures and the constraints stated."
                       for field in SUMMARY_FIELDS}
            return "", [(f"s{cursor['calls']}", "generate_structured_output",
                         json.dumps(summary))]
        if cursor["turn"] >= len(turns):
            return "done", []
        turn = turns[cursor["turn"]]
        if turn["user"] and not cursor["pending_user"]:
            cursor["pending_user"] = True  # end this reply: the person's message comes
            return "ok", []
        cursor["pending_user"] = False
        cursor["turn"] += 1
        if turn["final"] is not None:
            return turn["final"], []
        return turn["say"] or "", [(f"c{cursor['turn']}_{i}", c["name"], json.dumps(c["args"]))
                                   for i, c in enumerate(turn["calls"])]

    class ScriptedModel(OpenAIChatModel):
        async def _call_api(self, model_name, messages, tools=None, tool_choice=None, **kw):
            # AgentScope's own per-call work: the formatter and the tool schemas.
            await self.formatter.format(messages)
            self._format_tools(tools, tool_choice)
            started = time.thread_time()
            text, calls = scripted([t["function"]["name"] for t in tools or ()])
            blocks = [TextBlock(text=text)] if text else []
            blocks += [ToolCallBlock(id=i, name=name, input=args) for i, name, args in calls]
            outside["cpu"] += time.thread_time() - started
            return ChatResponse(content=blocks, is_last=True)

    class ScriptedServer(httpx.AsyncBaseTransport):
        """An OpenAI-compatible endpoint in the process: it reads the request's JSON and
        answers from the script, with usage (the prompt's characters / 4)."""

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            body = json.loads(await request.aread())
            text, calls = scripted([t["function"]["name"] for t in body.get("tools") or ()])
            message: dict = {"role": "assistant", "content": text or None}
            if calls:
                message["tool_calls"] = [
                    {"id": i, "type": "function", "function": {"name": name, "arguments": args}}
                    for i, name, args in calls]
            prompt = sum(len(json.dumps(m, ensure_ascii=False)) for m in body["messages"]) // 4
            return httpx.Response(200, json={
                "id": f"chatcmpl-{cursor['calls']}", "object": "chat.completion", "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": 10,
                          "total_tokens": prompt + 10}})

    def left_out(call):
        """`call` with its CPU counted as outside AgentScope."""
        def timed(*args, **kwargs):
            started = time.thread_time()
            try:
                return call(*args, **kwargs)
            finally:
                outside["cpu"] += time.thread_time() - started
        return timed

    def left_out_awaited(call):
        """`left_out` for a coroutine function, timed until its result (the SDK's create
        is wrapped by a decorator that hides that it is one)."""
        async def timed(*args, **kwargs):
            started = time.thread_time()
            try:
                return await call(*args, **kwargs)
            finally:
                outside["cpu"] += time.thread_time() - started
        return timed

    if via == "sdk":
        model = OpenAIChatModel(
            credential=OpenAICredential(api_key="offline", base_url="http://scripted.invalid/v1"),
            model="scripted", stream=False, context_size=workload["window"],
            client_kwargs={"http_client": httpx.AsyncClient(transport=ScriptedServer())})
        # The SDK call (the request's JSON, the transport, the answer's objects) and the
        # reading of its answer: TaskOS's figure leaves out the same (ModelClient.complete).
        completions = model.client.chat.completions
        completions.create = left_out_awaited(completions.create)
        model._parse_completion_response = left_out(model._parse_completion_response)
    else:
        model = ScriptedModel(credential=OpenAICredential(api_key="offline"), model="scripted",
                              stream=False, context_size=workload["window"])
    agent = Agent(name="agent", system_prompt="You are a research agent.", model=model,
                  toolkit=Toolkit(tools=[FunctionTool(fetch_document, permission=PermissionDecision(
                      behavior=PermissionBehavior.ALLOW, message="allowed"))]),
                  context_config=ContextConfig(),
                  react_config=ReActConfig(max_iters=len(turns) + 10),
                  injection_config=InjectionConfig())

    async def run() -> None:
        inputs = [UserMsg(name="user", content=workload["goal"])]
        while cursor["turn"] < len(turns):
            turn = turns[cursor["turn"]]
            if cursor["pending_user"]:
                inputs += [UserMsg(name="user", content=text) for text in turn["user"]]
            await agent.reply(inputs)
            inputs = []

    started = time.process_time()
    wall = time.perf_counter()
    asyncio.run(run())
    cpu = time.process_time() - started - outside["cpu"]
    wall = time.perf_counter() - wall
    import agentscope
    return {"framework": f"agentscope {agentscope.__version__}", "via": via,
            "model_calls": cursor["calls"], "summary_calls": cursor["summaries"],
            "cpu_ms_per_call": round(cpu * 1000 / cursor["calls"], 3),
            "wall_ms_per_call": round(wall * 1000 / cursor["calls"], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", default="long-200")
    parser.add_argument("--agentscope-python", help="a Python that has agentscope installed")
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--replay", help=argparse.SUPPRESS)  # the AgentScope side's run
    parser.add_argument("--via", choices=("sdk", "replaced"), default="sdk",
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replay:
        print(json.dumps(replay_agentscope(Path(args.replay), args.via)))
        return
    if not args.agentscope_python:
        parser.error("--agentscope-python is required (see the docstring)")
    agentscope = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "workload.json"
        workload = write_workload(args.scenario, path)
        for via in ("sdk", "replaced"):
            theirs = subprocess.run([args.agentscope_python, __file__, "--replay", str(path),
                                     "--via", via], check=True, capture_output=True, text=True)
            agentscope[via] = json.loads(theirs.stdout.strip().splitlines()[-1])
    taskos = taskos_cpu(args.scenario, workload["window"])
    sdk, replaced = agentscope["sdk"], agentscope["replaced"]
    ratio = round(taskos["cpu_ms_per_call"] / sdk["cpu_ms_per_call"], 3)
    print(f"{args.scenario}: CPU ms per model call, TaskOS {taskos['cpu_ms_per_call']} "
          f"({taskos['model_calls']} calls, {taskos['summary_calls']} summaries) vs "
          f"{sdk['framework']} {sdk['cpu_ms_per_call']} "
          f"({sdk['model_calls']} calls, {sdk['summary_calls']} summaries): {ratio}x")
    print("  both call the model through the openai SDK and an in-process transport; the "
          "call itself is left out on both sides")
    print(f"  AgentScope with its API call replaced by a Python function (no SDK, no JSON): "
          f"{replaced['cpu_ms_per_call']} ms, "
          f"{round(taskos['cpu_ms_per_call'] / replaced['cpu_ms_per_call'], 3)}x")
    print(f"  wall ms per call: TaskOS {taskos['wall_ms_per_call']}, AgentScope "
          f"{sdk['wall_ms_per_call']}")
    counting = taskos["exact_counting_cpu_ms_per_call"]
    print(f"  of TaskOS's CPU, exact token counting (tiktoken) {counting} ms per call; "
          f"AgentScope estimates bytes / 4. Without it: "
          f"{round((taskos['cpu_ms_per_call'] - counting) / sdk['cpu_ms_per_call'], 3)}x")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"scenario": args.scenario, "taskos": taskos, "agentscope": sdk,
             "agentscope_replaced_call": replaced, "cpu_ratio": ratio}, indent=2))


if __name__ == "__main__":
    main()
