"""Sessions nobody runs get queued again, whoever started Redis (runs in every worker).

Two ways a session can be orphaned: its worker died (the lease stops being renewed and
expires), or its run_session message died with a Redis that keeps nothing on disk (the
session stays "queued"). Every worker sweeps at start and then periodically. Each
re-enqueue is claimed with a compare-and-set on `enqueued_at`, so several workers sweeping
at once send one message, and the lease makes any duplicate delivery a harmless no-op.

A sub-agent that was never sent is not orphaned until its parent waits for it: its row is
written by the parent's delegate call mid-turn, and until that turn commits (the parent
goes "waiting") a dying parent runs the turn again and asks again. Sending such a child
early made its sub-task run twice (once for the lost turn, once for the re-run).
"""
from __future__ import annotations

import datetime as dt
import logging
import threading
from typing import Callable

import redis
from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import F, Q
from django.utils import timezone

from taskos.runs import approvals, queue
from taskos.runs.delegation import resume_if_done, stranded_parents
from taskos.runs.models import Session
from taskos.store.storage_errors import storage_problem

log = logging.getLogger("taskos.runs")

# The longest wait between two sweeps while they keep failing (the interval when longer).
SWEEP_BACKOFF_CAP_S = 120.0


def requeue_after() -> dt.timedelta:
    """How long a sent message may wait in the queue before the sweeper sends another.

    A queued session may simply be waiting for a free worker; re-sending it then only adds
    a message that exits at once, so the grace is long compared with a sweep.
    """
    return dt.timedelta(seconds=float(getattr(settings, "TASKOS_REQUEUE_AFTER_SECONDS", 300)))


def mark_enqueued(pk: int) -> None:
    Session.objects.filter(pk=pk).update(enqueued_at=timezone.now())


def _claim(pk: int, orphaned: Q, now: dt.datetime) -> bool:
    """Set enqueued_at=now only if the session is still orphaned: one sweeper wins."""
    return Session.objects.filter(Q(pk=pk) & orphaned).update(enqueued_at=now) == 1


def broker_started(now: dt.datetime) -> dt.datetime | None:
    """When the broker's Redis started: messages sent before then are gone with it."""
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=3,
                                  socket_timeout=3)
    try:
        uptime = client.info("server").get("uptime_in_seconds")
    except (redis.RedisError, OSError):
        return None
    finally:
        client.close()
    return now - dt.timedelta(seconds=int(uptime)) if uptime is not None else None


def orphaned_sessions(now: dt.datetime, redis_started: dt.datetime | None = None) -> Q:
    """Running with an expired lease and not sent again since, or queued with a message that
    is older than the broker (lost with it) or than the re-send grace."""
    lease_gone = Q(lease_expires__isnull=True) | Q(lease_expires__lt=now)
    send_lost = (Q(enqueued_at__isnull=True, created_at__lt=now - dt.timedelta(seconds=30))
                 | Q(enqueued_at__lt=now - requeue_after()))
    if redis_started is not None:
        send_lost |= Q(enqueued_at__lt=redis_started)
    dead_worker = (Q(status=Session.Status.RUNNING) & lease_gone
                   & (send_lost | Q(enqueued_at__lt=F("lease_expires"))))
    lost_message = (Q(status=Session.Status.QUEUED) & lease_gone & send_lost
                    & (Q(parent__isnull=True) | Q(enqueued_at__isnull=False)
                       | Q(parent__status=Session.Status.WAITING)))
    return dead_worker | lost_message


def cancel_unasked_children() -> list[int]:
    """Never-sent sub-agents whose parent ended without committing the turn that asked for
    them (it failed in that turn): nobody waits for them, so they stop, saying why."""
    unasked = Session.objects.filter(status=Session.Status.QUEUED, enqueued_at__isnull=True,
                                     parent__status__in=Session.FINAL_STATUSES)
    pks = list(unasked.values_list("pk", flat=True))
    if pks:
        Session.objects.filter(pk__in=pks, status=Session.Status.QUEUED,
                               enqueued_at__isnull=True).update(
            status=Session.Status.CANCELLED, finished_at=timezone.now(),
            error="Never run: its parent session ended before the turn that asked for this "
                  "sub-agent was committed, so nobody waits for its answer.")
        log.info("Cancelled %d sub-agent(s) whose parent ended without them: %s", len(pks), pks)
    return pks


def sweep(send=None, now: dt.datetime | None = None) -> list[int]:
    """Queue again every orphaned session; return their ids."""
    send = send or queue.run_session
    now = now or timezone.now()
    orphaned = orphaned_sessions(now, broker_started(now))
    sent = []
    for pk, previous in Session.objects.filter(orphaned).values_list("pk", "enqueued_at"):
        if not _claim(pk, orphaned, now):
            continue
        try:
            send(pk)
        except Exception as exc:  # noqa: BLE001 - broker down: the next sweep tries again
            Session.objects.filter(pk=pk, enqueued_at=now).update(enqueued_at=previous)
            log.warning("Could not queue orphaned session %s again: %s", pk, exc)
            continue
        sent.append(pk)
    cancel_unasked_children()
    for pk in stranded_parents():  # every sub-agent ended, but nobody woke the parent
        if resume_if_done(pk, send):
            sent.append(pk)
    # Ask-first calls (T11): past the timeout they are denied; a session whose calls are
    # all decided but was never woken is queued again.
    approvals.deny_overdue(now, send)
    sent += approvals.stranded_waits(send)
    if sent:
        log.info("Queued again %d session(s) no worker was running: %s", len(sent), sent)
    return sent


def start_session_sweeper(sender=None, **kwargs) -> Sweeper | None:
    """On Celery's worker_ready (apps.py): every worker looks for sessions nobody runs, at
    start and then periodically, whoever started Redis."""
    if float(getattr(settings, "TASKOS_SWEEP_SECONDS", 0)) > 0:
        return Sweeper().start()
    return None


class Sweeper:
    """A daemon thread in the worker's main process: sweep now, then every `interval`.

    While sweeps keep failing (a full disk, a database that is gone: issue 25 item 7) the
    wait doubles from one failure to the next up to `cap`, and the failure is logged once
    per change of cause instead of every round; the first sweep that works again says so
    and the interval is back. `sweep_once` and `wait` are injected in tests.
    """

    def __init__(self, interval: float | None = None, cap: float | None = None,
                 sweep_once: Callable[[], object] | None = None,
                 wait: Callable[[float], bool] | None = None) -> None:
        self.interval = interval or float(getattr(settings, "TASKOS_SWEEP_SECONDS", 30))
        self.cap = max(self.interval, cap or SWEEP_BACKOFF_CAP_S)
        self.failures = 0
        self._said: str | None = None  # the failure last logged
        self._sweep_once = sweep_once
        self._stop = threading.Event()
        self._wait = wait or self._stop.wait
        self._thread = threading.Thread(target=self._run, name="taskos-sweeper", daemon=True)

    def start(self) -> "Sweeper":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._wait(self.round()):
            pass

    def round(self) -> float:
        """Sweep once; return how long to wait before the next sweep."""
        try:
            close_old_connections()
            (self._sweep_once or sweep)()
        except Exception as exc:  # noqa: BLE001 - a database or broker hiccup: next round
            self.failures += 1
            delay = min(self.interval * 2 ** self.failures, self.cap)
            self._tell_failure(exc, delay)
        else:
            if self.failures:
                log.info("The session sweep works again after %d failed round(s).",
                         self.failures)
            self.failures, self._said = 0, None
            delay = self.interval
        finally:
            try:
                connection.close()
            except Exception:  # noqa: BLE001 - closing a connection to a gone server fails too
                pass
        return delay

    def _tell_failure(self, exc: Exception, delay: float) -> None:
        problem = storage_problem(exc)
        said = problem.what() if problem else f"{type(exc).__name__}: {exc}"
        if said == self._said:
            log.debug("The session sweep failed again (%s); next try in %.0f s", said, delay)
            return
        self._said = said
        if problem is not None:
            log.warning("The session sweep failed. %s Trying again in %.0f s, less often "
                        "(up to every %.0f s) while it keeps failing.", problem.line(), delay,
                        self.cap)
        else:
            log.exception("The session sweep failed; trying again in %.0f s, less often "
                          "(up to every %.0f s) while it keeps failing.", delay, self.cap)
