"""The chaos run's verdict: totals over all sessions, and the text a person reads."""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

# Any of these above zero fails the run.
FAILURES = ("lost_turns", "duplicated_turns", "lost_archive_rows", "duplicated_archive_rows",
            "duplicated_call_numbers", "double_executions", "call_numbers_broken",
            "sessions_not_like_uninterrupted", "kills_not_done", "page_errors")


def summarize(plan, base_pk: int, results: list[dict], kills: list[dict], elapsed: float,
              worker_logs: str) -> dict[str, Any]:
    totals = {
        "sessions": len(results),
        "sessions_not_like_uninterrupted": sum(
            1 for r in results if r["status"] != "finished" or r["differs_in"]),
        "lost_turns": sum(len(r["lost_turns"]) for r in results),
        "duplicated_turns": sum(len(r["duplicated_turns"]) for r in results),
        "lost_archive_rows": sum(r["lost_archive_rows"] for r in results),
        "duplicated_archive_rows": sum(r["duplicated_archive_rows"] for r in results),
        "duplicated_call_numbers": sum(r["duplicated_call_numbers"] for r in results),
        "double_executions": sum(r["double_executions"] for r in results),
        "call_numbers_broken": sum(1 for r in results if not r["call_numbers_ok"]),
        "kills_not_done": plan.kills - len(kills),
        # Pages, inspector views and exports that failed when opened after the run.
        "page_errors": sum(r["page_errors"] for r in results),
        "pages_opened": sum(r["requests"] for r in results),
        "resumes": sum(r["resumes"] for r in results),
        "compactions_moved": sum(r["compactions_moved"] for r in results),
        "sessions_with_another_compaction_count": sum(
            1 for r in results if r["compactions"][0] != r["compactions"][1]),
        "discarded_events": sum(r["discarded_events"] for r in results),
        "redeliveries_refused": worker_logs.count("this delivery exits"),
        "tracebacks_in_worker_logs": worker_logs.count("Traceback (most recent call last)"),
    }
    return {"ok": not any(totals[name] for name in FAILURES), "plan": asdict(plan),
            "baseline_session": base_pk, "kills": kills,
            "kills_by_target": kills_by_target(kills), "elapsed_s": round(elapsed, 1),
            "totals": totals, "sessions": results}


def kills_by_target(kills: list[dict]) -> dict[str, int]:
    """Kills done per kind of target (workers are named worker1, worker2 …)."""
    counts = dict.fromkeys(("worker", "redis", "postgres"), 0)
    for kill in kills:
        kind = kill["target"] if kill["target"] in ("redis", "postgres") else "worker"
        counts[kind] += 1
    return counts


def summary_text(report: dict[str, Any]) -> str:
    """The lines printed at the end of a run."""
    totals, plan = report["totals"], report["plan"]
    by_target = kills_by_target(report["kills"])
    lines = [f"Chaos run: {totals['sessions']} sessions, {len(report['kills'])} of "
             f"{plan['kills']} kills ({by_target['worker']} worker, {by_target['redis']} "
             f"Redis, {by_target['postgres']} PostgreSQL), seed {plan['seed']}, "
             f"{report['elapsed_s']} s"]
    for name in FAILURES:
        lines.append(f"  {name:38} {totals[name]}")
    for name in ("pages_opened", "resumes", "discarded_events", "compactions_moved",
                 "sessions_with_another_compaction_count", "redeliveries_refused",
                 "tracebacks_in_worker_logs"):
        lines.append(f"  {name:38} {totals[name]}   (information)")
    for result in report["sessions"]:
        if result["status"] != "finished" or result["differs_in"]:
            lines.append(f"  session {result['session']}: {result['status']}, "
                         f"{result['turns']} turns, differs in {result['differs_in']}")
        for failure in result["failed"]:
            lines.append(f"  session {result['session']} page {failure}")
    lines.append("RESULT: " + ("OK, every session finished exactly like the uninterrupted run"
                               if report["ok"] else "FAILED"))
    return "\n".join(lines)
