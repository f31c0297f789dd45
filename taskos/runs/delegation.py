"""Sub-agents (feature T6): who queues children, wakes their parent and cancels a tree.

A parent whose turn called `delegate` ends that turn with status "waiting" and lets its
worker go. After its task has released the lease, `after_run` sends the queued children
to the queue; each child's task, when it ends (however it ends), calls `after_run` too,
which moves the parent from waiting back to queued and sends it once every child is done.
The move is a compare-and-set on the status, so of two children finishing together exactly
one wakes the parent; the sweeper repeats the check for a worker that died in between.
Headless runs (`runtask`) run a tree in their own process instead (taskos/worker/execute.py).
"""
from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents import DelegationLimits

from . import queue
from .models import Session

log = logging.getLogger("taskos.runs")

WAITING, QUEUED = Session.Status.WAITING, Session.Status.QUEUED


def limits() -> DelegationLimits:
    return DelegationLimits(
        max_depth=int(getattr(settings, "TASKOS_MAX_DELEGATION_DEPTH", 2)),
        max_children=int(getattr(settings, "TASKOS_MAX_CHILDREN", 8)))


def _send(pk: int, send=None) -> None:
    """Send run_session(pk) once the current transaction (if any) has committed."""
    send = send or queue.run_session

    def now() -> None:
        try:
            result = send(pk)
        except Exception as exc:  # noqa: BLE001 - broker down: the sweeper sends it later
            log.warning("Could not queue session %s: %s", pk, exc)
            return
        task_id = getattr(result, "id", None)
        if task_id:
            Session.objects.filter(pk=pk).update(celery_task_id=task_id)

    transaction.on_commit(now)


def start_children(parent_pk: int, send=None) -> list[int]:
    """Queue the parent's children that were never sent (each claimed once)."""
    sent = []
    for pk in Session.objects.filter(parent_id=parent_pk, status=QUEUED,
                                     enqueued_at__isnull=True).order_by("id").values_list(
                                         "pk", flat=True):
        if Session.objects.filter(pk=pk, enqueued_at__isnull=True).update(
                enqueued_at=timezone.now()) != 1:
            continue  # the sweeper or another call sent it meanwhile
        _send(pk, send)
        sent.append(pk)
    return sent


def resume_if_done(parent_pk: int, send=None) -> bool:
    """Queue a waiting parent again once none of its children is active."""
    if Session.objects.filter(parent_id=parent_pk, status__in=Session.ACTIVE_STATUSES).exists():
        return False
    if Session.objects.filter(pk=parent_pk, status=WAITING).update(
            status=QUEUED, enqueued_at=timezone.now()) != 1:
        return False  # not waiting (any more): another child's task woke it
    _send(parent_pk, send)
    return True


def after_run(pk: int, send=None) -> None:
    """Called when a run_session task ends: start a waiting session's children, or wake
    the parent of a session that is done."""
    session = Session.objects.filter(pk=pk).values("status", "parent_id").first()
    if session is None:
        return
    if session["status"] == WAITING:
        start_children(pk, send)
        resume_if_done(pk, send)  # children that had already ended (sent by the sweeper)
    elif session["status"] in Session.FINAL_STATUSES and session["parent_id"]:
        resume_if_done(session["parent_id"], send)


def stranded_parents() -> list[int]:
    """Waiting sessions none of whose children is active: their wake-up was lost."""
    return list(Session.objects.filter(status=WAITING).exclude(
        children__status__in=Session.ACTIVE_STATUSES).values_list("pk", flat=True))


def cancel_tree(session: Session) -> list[int]:
    """Ask the session and every sub-agent below it to stop; queued ones stop at once.

    A waiting session is woken when its children end and then stops at its next turn,
    with its children's cancellations as its delegate results."""
    tree, level = [session.pk], [session.pk]
    while level:
        level = list(Session.objects.filter(parent_id__in=level).values_list("pk", flat=True))
        tree += level
    Session.objects.filter(pk__in=tree).update(cancel_requested=True)
    Session.objects.filter(pk__in=tree, status=QUEUED).update(
        status=Session.Status.CANCELLED, finished_at=timezone.now())
    for pk in reversed(tree):  # the deepest first: a woken parent then sees ended children
        resume_if_done(pk)
    return tree
