"""Queueing sessions for a worker: the Celery task names, and sending by name.

Everything that queues a run (starting a session, waking a parent or its sub-agents, the
sweeper, `up` resuming what a stop interrupted) goes through here, so none of it imports
the worker's code; the worker's tasks register under these names (taskos/worker/tasks.py).
The names are those of queued messages in running installations: they stay as they are.
"""
from __future__ import annotations

from celery.result import AsyncResult

from taskos.celery import app

RUN_SESSION = "taskos.runs.tasks.run_session"


def run_session(pk: int) -> AsyncResult:
    """Send run_session(pk) to the queue now; the result's id is the Celery task id.

    ignore_result as the task itself declares it: the session row is the result, and a
    sender that waits for none subscribes to nothing in the result backend."""
    return app.send_task(RUN_SESSION, args=[pk], ignore_result=True)
