"""Drive a chaos run: an uninterrupted run, N sessions on workers, seeded kills, comparison.

The kill schedule comes from the seed and is keyed to progress, not to the clock: kill k
fires when the sessions together have committed a given share of their turns, so the same
seed kills at the same points of the work on a fast or a busy machine. Which worker dies
is the one running a session at that moment (a kill of an idle worker proves nothing).
A PostgreSQL kill takes this process's connection down too: its own reads are tried again
on a fresh connection until the cluster is back (`survive`).
"""
from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from django.core.management import call_command
from django.db import InterfaceError, OperationalError, connection

from agents import EventType
from taskos.runs import services
from taskos.runs.models import ModelProfile, Session, SessionEvent
from taskos.worker.tasks import run_session

from .compare import compare, fingerprint
from .pages import chaos_owner, check_pages
from .report import summarize
from .stack import Managed, Stack

POLL_S = 0.2


@dataclass
class ChaosPlan:
    sessions: int = 3
    kills: int = 4
    workers: int = 2
    scenario: str = ""  # a bundled name or a file path; empty: the generated chaos scenario
    seed: int = 1
    redis_kill_share: float = 0.25  # the rest of the kills hit a busy worker
    postgres_kill_share: float = 0.0  # needs the run's own cluster (Stack.postgres)
    progress: tuple[float, float] = (0.05, 0.85)  # share of all turns where kills may fire
    down_s: tuple[float, float] = (0.2, 2.0)  # how long the killed process stays down
    # Around the lease: a short outage leaves every lease with its holder, a long one lets
    # a sweep hand a session to another worker while the first still runs it.
    postgres_down_s: tuple[float, float] = (0.5, 10.0)
    lease_s: float = 6.0
    sweep_s: float = 2.0
    requeue_after_s: float = 10.0
    timeout_s: float = 900.0


@dataclass
class Kill:
    at_share: float  # of all the sessions' turns committed
    target: str  # "redis", "postgres" or "worker"
    down_s: float


def kill_schedule(plan: ChaosPlan) -> list[Kill]:
    """Each kill's moment, target and outage, by the seed. The draws are the same with or
    without PostgreSQL kills, so a seed without them kills as it did before they existed."""
    rng = random.Random(plan.seed)
    kills = []
    for _ in range(plan.kills):
        at, pick = rng.uniform(*plan.progress), rng.random()
        if pick < plan.redis_kill_share:
            target = "redis"
        elif pick < plan.redis_kill_share + plan.postgres_kill_share:
            target = "postgres"
        else:
            target = "worker"
        down = plan.postgres_down_s if target == "postgres" else plan.down_s
        kills.append(Kill(at, target, round(rng.uniform(*down), 2)))
    return sorted(kills, key=lambda kill: kill.at_share)


# The simulated model's answer time in the workers (TASKOS_SIM_LATENCY_MS overrides it):
# unpaced, a quiet machine ran two 17-turn sessions from the first kill to their end
# between two of the driver's polls, and the kills planned after it were never done.
CHAOS_SIM_LATENCY_MS = "100"


def worker_env(plan: ChaosPlan, workspaces: Path, database_url: str) -> dict[str, str]:
    """The workers' own settings: the test suite's (sweeper off) must not leak into them."""
    return {"TASKOS_SIM_LATENCY_MS": CHAOS_SIM_LATENCY_MS, **os.environ,
            "DATABASE_URL": database_url,
            "TASKOS_LEASE_SECONDS": str(plan.lease_s),
            "TASKOS_SWEEP_SECONDS": str(plan.sweep_s),
            "TASKOS_REQUEUE_AFTER_SECONDS": str(plan.requeue_after_s),
            "TASKOS_WORKSPACES": str(workspaces), "PYTHONUNBUFFERED": "1"}


def sim_profile() -> ModelProfile:
    profile, _ = ModelProfile.objects.get_or_create(
        name="sim", defaults={"model": "taskos-sim", "context_size": 128_000})
    return profile


def baseline(scenario: str, profile: ModelProfile) -> tuple[int, dict[str, Any]]:
    """The uninterrupted run, in this process and through the task, so it holds a lease
    like any other run (the workers' sweeper would otherwise take it for orphaned)."""
    session = services.create_session(chaos_owner(), "", scenario, profile, None, {})
    run_session.apply(args=[session.pk])
    session.refresh_from_db()
    if session.status != "finished":
        raise RuntimeError(f"The uninterrupted run of {scenario} ended {session.status}: "
                           f"{session.error}")
    return session.pk, fingerprint(session)


def survive(read: Callable[[], Any], patience_s: float = 300.0,
            sleep: Callable[[float], None] = time.sleep) -> Any:
    """`read()`, tried again on a fresh connection while the database is down or this
    process's connection died with a killed server."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            return read()
        except (OperationalError, InterfaceError):
            if time.monotonic() > deadline:
                raise
            try:
                connection.close()
            except Exception:  # noqa: BLE001 - closing a connection to a killed server
                pass
        sleep(POLL_S)


def committed_turns(pks: list[int]) -> int:
    return survive(lambda: SessionEvent.objects.filter(
        session_id__in=pks, type=EventType.TURN_STARTED).count())


def active(pks: list[int]) -> int:
    return survive(lambda: Session.objects.filter(
        pk__in=pks, status__in=Session.ACTIVE_STATUSES).count())


def busy_workers(stack: Stack, pks: list[int]) -> list[Managed]:
    """Workers whose process group holds a session's lease (owner is host:pid:…)."""
    groups = set()
    for owner in survive(lambda: list(Session.objects.filter(pk__in=pks).exclude(
            lease_owner="").values_list("lease_owner", flat=True))):
        try:
            groups.add(os.getpgid(int(owner.split(":")[1])))
        except (IndexError, ValueError, ProcessLookupError):
            continue
    return [w for w in stack.worker_procs if w.running and w.process.pid in groups]


def fire(kill: Kill, stack: Stack, pks: list[int], rng: random.Random) -> dict[str, Any]:
    """SIGKILL Redis, PostgreSQL or a busy worker now, then start it again after `down_s`."""
    busy = busy_workers(stack, pks)
    if kill.target == "redis":
        target = stack.redis
    elif kill.target == "postgres":
        target = stack.postgres
    else:
        target = rng.choice(busy or stack.worker_procs)
    turns = committed_turns(pks)
    target.kill()
    time.sleep(kill.down_s)
    target.start()
    return {"target": target.name, "at_share": round(kill.at_share, 3), "down_s": kill.down_s,
            "turns_committed": turns, "busy_workers": len(busy)}


def due(kill: Kill, stack: Stack, pks: list[int]) -> bool:
    """A PostgreSQL kill waits for a worker that runs a session: between a worker's death
    and the sweep that sends its session again nobody may be writing, and a database killed
    then cuts no run."""
    return kill.target != "postgres" or bool(busy_workers(stack, pks))


def run_chaos(plan: ChaosPlan, scenario: str, stack: Stack,
              say: Callable[[str], None] = print) -> dict:
    """Run `plan` on `stack` (not started yet); return the report.

    This process must already use the stack's Redis (settings and the Celery app) and
    `stack.env` the same database.
    """
    schedule = kill_schedule(plan)
    if stack.postgres is None and any(kill.target == "postgres" for kill in schedule):
        raise ValueError("PostgreSQL kills need the run's own cluster (Stack.postgres)")
    call_command("migrate", interactive=False, verbosity=0)
    rng = random.Random(plan.seed)
    done: list[dict[str, Any]] = []
    started = time.monotonic()
    try:
        stack.start()
        profile = sim_profile()
        say(f"Uninterrupted run of {scenario} …")
        base_pk, base = baseline(scenario, profile)
        total_turns = base["turns"] * plan.sessions
        pks = []
        for _ in range(plan.sessions):
            session = services.create_session(chaos_owner(), "", scenario, profile, None, {})
            services.start_session(session)  # autocommit: sent at once
            pks.append(session.pk)
        say(f"{plan.sessions} sessions of {base['turns']} turns on {plan.workers} workers; "
            f"{plan.kills} kills planned")
        deadline = started + plan.timeout_s
        while active(pks) and time.monotonic() < deadline:
            if (schedule and committed_turns(pks) >= schedule[0].at_share * total_turns
                    and due(schedule[0], stack, pks)):
                done.append(fire(schedule.pop(0), stack, pks, rng))
                say(f"kill {len(done)}: {done[-1]['target']} at {done[-1]['turns_committed']}"
                    f"/{total_turns} turns, down {done[-1]['down_s']} s, "
                    f"{done[-1]['busy_workers']} workers running a session")
                continue
            time.sleep(POLL_S)
        results = [compare(Session.objects.get(pk=pk), base) for pk in pks]
        say("Opening every session's page, inspector and exports …")
        opened = time.monotonic()
        for result, pk in zip(results, pks):
            result.update(check_pages(Session.objects.get(pk=pk), say=say))
        say(f"{sum(r['requests'] for r in results)} pages opened in "
            f"{time.monotonic() - opened:.1f} s")
    finally:
        stack.stop()
    return summarize(plan, base_pk, results, done, time.monotonic() - started,
                     stack.worker_logs())
