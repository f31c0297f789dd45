"""The Celery task, kept thin: take the session's lease, run it (execute.py), then hand
over to its sub-agents or its parent. Registered under the name the queue sends
(taskos/runs/queue.py)."""
from __future__ import annotations

import logging

from celery import shared_task
from django.utils import timezone

from agents import redact
from taskos.runs import approvals, delegation, queue
from taskos.runs.models import Session
from taskos.store.storage_errors import storage_problem

from .execute import FINAL_STATUSES, execute_session
from .lease import Lease

log = logging.getLogger("taskos.runs")


# ignore_result: the session row is the result; storing the report in Redis as well only
# made a finished run raise (and log a traceback) when Redis was down at that moment.
@shared_task(name=queue.RUN_SESSION, bind=True, ignore_result=True)
def run_session(self, session_id: int) -> dict:
    """Run one session; a redelivered task for a running session resumes it.

    Whatever the outcome, once the lease is released: a session now waiting sends its
    sub-agents to the queue, a sub-agent that ended may wake its parent (feature T6)."""
    try:
        return _run_session(self, session_id)
    except Exception as exc:
        problem = storage_problem(exc)
        if problem is None:
            raise
        # Taking the lease or releasing it failed (issue 25 item 7): the message is acked,
        # not retried (every retry would fail the same way while the disk is full); a
        # worker's sweep sends the session again, if it is not over, once writes work.
        log.warning("Session %s: this delivery ends on a storage error. %s", session_id,
                    problem.line())
        return {"status": "storage_error", "error": problem.line()}
    finally:
        try:
            delegation.after_run(session_id)
            approvals.wake_if_decided(session_id)  # decided while this run was stopping
        except Exception as exc:  # noqa: BLE001 - the sweeper wakes a stranded parent later
            problem = storage_problem(exc)
            if problem is None:
                log.exception("Session %s: could not hand over to its sub-agents or parent",
                              session_id)
            else:
                log.warning("Session %s: could not hand over to its sub-agents or parent "
                            "(%s); a sweep does it later.", session_id, problem.what())


def _run_session(self, session_id: int) -> dict:
    session = Session.objects.select_related("profile").filter(pk=session_id).first()
    if session is None:
        log.warning("Session %s no longer exists; nothing to run.", session_id)
        return {"status": "missing"}
    if session.status in FINAL_STATUSES:
        return {"status": session.status}
    # A parent woken from waiting (it has a saved state) still runs: it receives its
    # children's cancellations as its delegate results, then stops at its next turn.
    if (session.cancel_requested and session.status == Session.Status.QUEUED
            and not session.engine_state):
        Session.objects.filter(pk=session.pk).update(status=Session.Status.CANCELLED,
                                                     finished_at=timezone.now())
        return {"status": Session.Status.CANCELLED}
    lease = Lease(session.pk)
    if not lease.take():
        # A redelivered message (visibility timeout, a sweep) while the session runs
        # elsewhere: the holder goes on, this delivery ends here without a single write.
        log.info("Session %s is being run by another worker; this delivery exits.", session.pk)
        return {"status": "leased_elsewhere"}
    session.refresh_from_db()
    if session.status in FINAL_STATUSES:  # the previous holder finished meanwhile
        lease.release()
        return {"status": session.status}
    if self.request.id:
        Session.objects.filter(pk=session.pk).update(celery_task_id=self.request.id)
    lease.start_heartbeat()
    try:
        return execute_session(session, lease=lease)
    except Exception as exc:  # noqa: BLE001 - already recorded by execute_session
        # Not re-raised: a retry would replay a failure; the session row says what happened.
        return {"status": Session.Status.FAILED, "error": redact(f"{type(exc).__name__}: {exc}")}
    finally:
        lease.release()
