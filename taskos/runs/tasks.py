"""Celery tasks, kept thin: build the store and the event sink, hand over to the engine."""
from __future__ import annotations

import logging
import traceback

from celery import shared_task
from django.utils import timezone

from agents import Event, EventType, redact
from taskos.live.sending import GroupSender
from taskos.store.django_store import DjangoStore, relaxed_commits
from taskos.store.event_log import EventLog

from . import delegation, queue
from .lease import Lease, LeaseLost
from .models import Session, SessionEvent, max_input_chars

log = logging.getLogger("taskos.runs")

FINAL_STATUSES = {Session.Status.FINISHED, Session.Status.FAILED, Session.Status.CANCELLED}


def event_sink(session: Session | int | str) -> EventLog:
    """The engine's event sink for a session: the event log, announcing what it stored to
    the session's live pages."""
    pk = session.pk if isinstance(session, Session) else int(session)
    return EventLog(pk, GroupSender(pk).announce)


def execute_session(session: Session, progress=None, lease: Lease | None = None,
                    summarizer: str | None = None) -> dict:
    """Run (or resume) a session through the engine in this process; return its report.

    With a lease, every write is fenced by it; losing it stops the run without touching the
    session row, which belongs to the new executor then. `summarizer` picks the simulated
    model's summary mode (faithful, lossy, hostile).
    """
    sink = event_sink(session)
    Session.objects.filter(pk=session.pk).update(
        status=Session.Status.RUNNING,
        started_at=session.started_at or timezone.now())
    try:
        from agents import ContextConfig
        from agents import run_session as run_engine

        if session.replay_of_id:  # SPEC E2: recorded decisions under this session's settings
            from .replays import replay_engine
            run_engine = replay_engine(session)
        store = DjangoStore(lease=lease)
        store.undo_uncommitted_anchors(session.pk)  # a resume starts from the last commit
        with relaxed_commits():
            result = run_engine(
                session_id=str(session.pk), goal=session.goal, scenario=session.scenario or None,
                profile=session.profile.to_engine(context_size=session.window),
                config=ContextConfig.from_dict(session.context_settings),
                store=store, events=sink,
                workspace=session.workspace, progress=progress, summarizer=summarizer,
                max_input_chars=max_input_chars(), delegation=delegation.limits())
    except LeaseLost as exc:
        log.warning("Session %s: stopped, %s.", session.pk, exc)
        return {"status": "lease_lost"}
    except Exception as exc:  # noqa: BLE001 - recorded on the session, never lost silently
        mark_failed(session, sink, exc)
        raise
    report = dict(result.report or {})
    session.profile.learn_token_ratio(report)
    if result.status == Session.Status.WAITING:  # for sub-agents: no worker holds it now
        values = {"status": Session.Status.WAITING, "turns": result.turns}
        if lease is not None:
            lease.fenced_update(**values)
        else:
            Session.objects.filter(pk=session.pk).update(**values)
        return report
    status = result.status if result.status in FINAL_STATUSES else Session.Status.FAILED
    values = {"status": status, "final_answer": result.final_answer or "",
              "turns": result.turns, "finished_at": timezone.now()}
    for name in ("total_input_tokens", "peak_input_tokens", "compactions"):
        if isinstance(report.get(name), int):
            values[name] = report[name]
    if status == Session.Status.FAILED and not values["final_answer"]:
        values["error"] = failure_reason(session, report)
    if lease is not None:
        lease.fenced_update(**values)
    else:
        Session.objects.filter(pk=session.pk).update(**values)
    return report


def failure_reason(session: Session, report: dict) -> str:
    """Why a run failed, for Session.error and the page: the engine's message and what to
    do about it, else the last fatal ERROR event the session stored."""
    from agents import advise

    message, code = report.get("error") or "", report.get("error_code") or ""
    if not message:
        fatal = (SessionEvent.objects.filter(session=session, type="ERROR", payload__fatal=True)
                 .order_by("-seq").values_list("payload", flat=True).first())
        if fatal:
            message, code = fatal.get("message") or "", fatal.get("code") or ""
    if not message:
        return ("The engine stopped without a final answer and gave no reason; see the "
                "drawer's log and the worker log.")
    label = f"{code}: " if code else ""
    action = f" What to do: {advise(code).action}" if code else ""
    message = message.rstrip()
    end = "" if message.endswith((".", "!", "?", "。")) else "."
    return redact(f"{label}{message}{end}{action}")


def mark_failed(session: Session, sink: EventLog | None, exc: BaseException) -> None:
    """Record an unexpected error on the session and as an ERROR event; keep what was saved."""
    message = redact(f"{type(exc).__name__}: {exc}")  # no API key on the row or in the event
    log.error("Session %s failed: %s\n%s", session.pk, message, traceback.format_exc())
    # The event first: whoever sees the row say "failed" finds the ERROR event stored too.
    if sink is not None:
        try:
            sink.emit(Event(type=EventType.ERROR, payload={
                "code": "internal_error", "message": message,
                "cause": "An unexpected error in the engine or the worker.",
                "action": "Everything up to the last committed turn is saved; see the worker "
                          "log for the traceback, then start a new session.",
                "fatal": True}))
        except Exception:  # noqa: BLE001 - the database itself may be what failed
            log.exception("Could not store the ERROR event of session %s", session.pk)
    Session.objects.filter(pk=session.pk).update(
        status=Session.Status.FAILED, finished_at=timezone.now(),
        error=f"The run stopped because of an internal error: {message}")


# ignore_result: the session row is the result; storing the report in Redis as well only
# made a finished run raise (and log a traceback) when Redis was down at that moment.
@shared_task(name=queue.RUN_SESSION, bind=True, ignore_result=True)
def run_session(self, session_id: int) -> dict:
    """Run one session; a redelivered task for a running session resumes it.

    Whatever the outcome, once the lease is released: a session now waiting sends its
    sub-agents to the queue, a sub-agent that ended may wake its parent (SPEC T6)."""
    try:
        return _run_session(self, session_id)
    finally:
        try:
            delegation.after_run(session_id)
        except Exception:  # noqa: BLE001 - the sweeper wakes a stranded parent later
            log.exception("Session %s: could not hand over to its sub-agents or parent",
                          session_id)


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
