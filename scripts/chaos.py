#!/usr/bin/env python3
"""Chaos run: N sessions on real Celery workers, Redis and the database while workers,
Redis and (a private) PostgreSQL are SIGKILLed at seeded moments and restarted; every
finished session is compared with an uninterrupted run of the same scenario (turns,
archive, events, model calls).

    .venv/bin/python scripts/chaos.py --sessions 3 --kills 4               # the CI size
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/chaos REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python scripts/chaos.py --redis external --sessions 6 --kills 20 \\
        --scenario long-200 --json chaos-report.json                        # a long run
    .venv/bin/python scripts/chaos.py --private-postgres --sessions 6 --workers 3 \
        --kills 25 --scenario long-200                                      # PostgreSQL too

The database comes from DATABASE_URL (a SQLite file in the run folder when unset) and is
migrated first; with --private-postgres it is a PostgreSQL cluster this run initialises
in the run folder and starts on a free port (taskos/ops/chaos/postgres.py), and about a
quarter of the kills (--postgres-kill-share) SIGKILL the whole cluster. Redis is a private redis-server started on a free port without persistence
(a SIGKILL loses every queued message), or with --redis external the one at REDIS_URL,
which is not killed but emptied and disconnected (see taskos/ops/chaos/stack.py). Exit status
0 only when every session finished exactly like the uninterrupted run: no lost or
duplicated turn or archive row, unbroken call numbers and no double execution; and when
every session's page, inspector and exports then open (taskos/ops/chaos/pages.py).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=3, help="sessions run at once")
    parser.add_argument("--kills", type=int, default=4, help="SIGKILLs of a busy worker, "
                        "of Redis (about one in four) or of the private PostgreSQL")
    parser.add_argument("--workers", type=int, default=2,
                        help="worker processes (concurrency 1 each)")
    parser.add_argument("--scenario", default="",
                        help="bundled name or file (default: a generated one of --turns)")
    parser.add_argument("--turns", type=int, default=60, help="of the generated scenario")
    parser.add_argument("--seed", type=int, default=1, help="picks the kill schedule")
    parser.add_argument("--redis", choices=("private", "external"), default="private",
                        help="a redis-server started here, or the one at REDIS_URL")
    parser.add_argument("--private-postgres", action="store_true",
                        help="run on a PostgreSQL cluster started in the run folder, and "
                             "kill it too (DATABASE_URL is ignored)")
    parser.add_argument("--postgres-kill-share", type=float, default=None,
                        help="share of the kills that hit the private PostgreSQL (0.25)")
    parser.add_argument("--lease-seconds", type=float, default=6.0)
    parser.add_argument("--sweep-seconds", type=float, default=2.0)
    parser.add_argument("--run-dir", type=Path, default=None,
                        help="logs, workspaces and the SQLite file (default: a temp folder)")
    parser.add_argument("--json", type=Path, default=None, help="write the full report here")
    parser.add_argument("--timeout", type=float, default=1800.0)
    return parser.parse_args()


def main() -> int:
    args = arguments()
    postgres_share = args.postgres_kill_share
    if postgres_share is None:
        postgres_share = 0.25 if args.private_postgres else 0.0
    if postgres_share and not args.private_postgres:
        sys.exit("--postgres-kill-share needs --private-postgres: only a cluster this run "
                 "started is killed")
    run_dir = (args.run_dir or Path(tempfile.mkdtemp(prefix="taskos-chaos-"))).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    postgres = None
    if args.private_postgres:
        # Before Django is set up: this process must use the cluster from its first query.
        from taskos.ops.chaos.postgres import PrivatePostgres

        try:
            postgres = PrivatePostgres(run_dir / "postgres", free_port(),
                                       run_dir / "postgres.log")
            os.environ["DATABASE_URL"] = postgres.create("chaos")
        except RuntimeError as exc:
            if postgres is not None:
                postgres.stop()
            sys.exit(f"--private-postgres: {exc}")
    try:
        return run(args, run_dir, postgres, postgres_share)
    finally:
        if postgres is not None:
            postgres.stop()


def run(args: argparse.Namespace, run_dir: Path, postgres, postgres_share: float) -> int:
    if args.redis == "private":
        os.environ["REDIS_URL"] = f"redis://127.0.0.1:{free_port()}/0"
    elif not os.environ.get("REDIS_URL"):
        sys.exit("--redis external needs REDIS_URL")
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{run_dir / 'chaos.sqlite3'}")
    os.environ["TASKOS_WORKSPACES"] = str(run_dir / "workspaces")
    os.environ["TASKOS_SWEEP_SECONDS"] = "0"  # this process only drives; workers sweep
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskos.settings")
    import django

    django.setup()
    from taskos.ops.chaos.report import summary_text
    from taskos.ops.chaos.run import ChaosPlan, run_chaos, worker_env
    from taskos.ops.chaos.scenario import write_chaos_scenario
    from taskos.ops.chaos.stack import Stack
    from taskos.ops.chaos.this_process import database_url, using_redis

    plan = ChaosPlan(sessions=args.sessions, kills=args.kills, workers=args.workers,
                     scenario=args.scenario, seed=args.seed, timeout_s=args.timeout,
                     lease_s=args.lease_seconds, sweep_s=args.sweep_seconds,
                     postgres_kill_share=postgres_share)
    scenario = args.scenario or write_chaos_scenario(run_dir, args.turns)
    redis_url = os.environ["REDIS_URL"]
    stack = Stack(run_dir=run_dir, redis_url=redis_url, workers=args.workers,
                  env=worker_env(plan, run_dir / "workspaces", database_url()),
                  private_redis=args.redis == "private", postgres=postgres)
    private = "private PostgreSQL " if postgres is not None else ""
    print(f"Chaos run in {run_dir} (database {private}{database_url().split('@')[-1]}, "
          f"{args.redis} Redis {redis_url}), seed {args.seed}", flush=True)
    with using_redis(redis_url, plan.lease_s):
        report = run_chaos(plan, scenario, stack, say=lambda text: print(text, flush=True))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))
    print(summary_text(report), flush=True)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
