"""Running a session in this process: the engine with the Django store and the event sink.

The Celery task (tasks.py) runs execute_session under the session's lease; the headless
commands (`runtask`, `replay`) run it, or execute_tree for a session with sub-agents, under
a headless lease."""
from __future__ import annotations

import logging
import traceback

from django.utils import timezone

import agents
from agents import (ContextConfig, EventType, SessionSpec, advise, error_event, redact,
                    storable_text)
from taskos.live.sending import GroupSender
from taskos.replays.sessions import replay_engine
from taskos.runs import approvals, delegation
from taskos.runs.models import Session, SessionEvent, max_input_chars
from taskos.store.django_store import DjangoStore, relaxed_commits
from taskos.store.event_log import EventLog
from taskos.store.storage_errors import StorageProblem, keep_trying, storage_problem
from taskos.store.stored_events import stored_event

from .lease import Lease, LeaseLost, headless_lease

log = logging.getLogger("taskos.runs")

FINAL_STATUSES = set(Session.FINAL_STATUSES)
ENDED_WITHOUT_ANSWER = {Session.Status.FAILED, Session.Status.UNUSABLE_ANSWER}
# How long an executor keeps trying to record why a run stopped while the database refuses
# writes: a worker holds its slot for up to an hour (nothing could run meanwhile anyway); a
# command gives up soon, a person is waiting at the terminal.
WORKER_PATIENCE_S = 3600.0
HEADLESS_PATIENCE_S = 10.0
# A run that stopped to wait: for its sub-agents (T6) or for a person's approval (T11).
WAITS = (Session.Status.WAITING, Session.Status.WAITING_FOR_APPROVAL)
RESUMING = "resuming"  # a run cut by a database server that went away, which is back


def event_sink(session: Session | int | str, lease: Lease | None = None) -> EventLog:
    """The engine's event sink for a session: the event log, announcing what it stored to
    the session's live pages; with a lease, each of its writes fenced by it."""
    pk = session.pk if isinstance(session, Session) else int(session)
    return EventLog(pk, GroupSender(pk).announce, lease=lease)


def execute_session(session: Session, progress=None, lease: Lease | None = None,
                    summarizer: str | None = None,
                    patience: float = WORKER_PATIENCE_S) -> dict:
    """Run (or resume) a session through the engine in this process; return its report.

    With a lease, every write is fenced by it; losing it stops the run without touching the
    session row, which belongs to the new executor then. `summarizer` picks the simulated
    model's summary mode (faithful, lossy, hostile). `patience`: how long to keep trying
    to record a failure the database refuses (mark_failed), or to wait for a database
    server that went away before resuming the run from its last commit.
    """
    while True:
        report = _execute_once(session, progress, lease, summarizer, patience)
        if report.get("status") != RESUMING:
            return report
        session.refresh_from_db()


def _execute_once(session: Session, progress, lease: Lease | None, summarizer: str | None,
                  patience: float) -> dict:
    sink = event_sink(session, lease)
    try:
        running = {"status": Session.Status.RUNNING,
                   "started_at": session.started_at or timezone.now()}
        if lease is not None:
            lease.fenced_update(**running)
        else:
            Session.objects.filter(pk=session.pk).update(**running)
        # Looked up at every run, not bound at import: tests run a stand-in engine in its place.
        run_engine = agents.run_session
        if session.replay_of_id:  # feature E2: recorded decisions under this session's settings
            run_engine = replay_engine(session)
        store = DjangoStore(lease=lease)
        store.undo_uncommitted_anchors(session.pk)  # a resume starts from the last commit
        try:
            spec = SessionSpec.plan(
                goal=session.goal, scenario=session.scenario or None,
                profile=session.profile.to_engine(context_size=session.window),
                config=ContextConfig.from_dict(session.context_settings), summarizer=summarizer,
                max_input_chars=max_input_chars(), delegation=delegation.limits(),
                ask_first=approvals.ask_first_of(session))
            notice = session.profile.tools_off_notice() if spec.config.tools_off else ""
            if notice:  # why, beside the engine's own line on it (SESSION_STARTED)
                spec.profile.warnings.append(notice)
            # The MCP servers the person picked (T10), reconnected at every run, a resume too.
            spec.tool_sources = [source.to_engine() for source in session.tool_sources.all()]
        except agents.ConfigError as exc:
            result = cannot_run(session, sink, exc)
        else:
            with relaxed_commits():
                result = run_engine(spec, session_id=str(session.pk), store=store, events=sink,
                                    workspace=session.workspace, progress=progress)
    except LeaseLost as exc:
        log.warning("Session %s: stopped, %s.", session.pk, exc)
        return {"status": "lease_lost"}
    except Exception as exc:  # noqa: BLE001 - recorded on the session, never lost silently
        if lease_gone(lease):
            # Not this executor's session any more: its failure is not the session's.
            log.warning("Session %s: stopped after losing the lease (%s: %s).", session.pk,
                        type(exc).__name__, exc)
            return {"status": "lease_lost"}
        if lease is not None and server_gone(exc):
            waited = wait_for_database(session, lease, patience)
            if waited is not None:
                return waited
            raise  # gave up: it stays `running`, and a sweep resumes it once writes work
        mark_failed(session, sink, exc, lease=lease, patience=patience)
        raise
    report = dict(result.report or {})
    session.profile.learn_token_ratio(report)
    if result.status in WAITS:  # for sub-agents or a person's approval: no worker holds it
        values = {"status": result.status, "turns": result.turns}
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
    if status in ENDED_WITHOUT_ANSWER and not values["final_answer"]:
        values["error"] = failure_reason(session, report)
    if lease is not None:
        lease.fenced_update(**values)
    else:
        Session.objects.filter(pk=session.pk).update(**values)
    return report


def recordable(text: str) -> str:
    """An error's text as it may be stored and shown: no API key in it (redact), and no
    character the databases refuse (a NUL from an exception's message: agents/storable.py)."""
    return storable_text(redact(text))


def lease_gone(lease: Lease | None) -> bool:
    """Whether another executor holds the session now (False when that cannot be read:
    then the failure is recorded as this executor's)."""
    if lease is None:
        return False
    if lease.lost:
        return True
    try:
        return not lease.held()
    except Exception:  # noqa: BLE001 - the database itself may be what failed
        return False


def server_gone(exc: BaseException) -> bool:
    """A database server that stopped answering (restarted, crashed, failed over): unlike
    a full disk, nothing a person must do, and everything committed is still there."""
    problem = storage_problem(exc)
    return problem is not None and problem.kind == "unreachable"


def wait_for_database(session: Session, lease: Lease, patience: float) -> dict | None:
    """Wait, with backoff, until the database answers again and still names this executor
    as the session's; then the run resumes from its last committed turn (RESUMING), as a
    worker's sweep would resume it, without the lease's wait. None after `patience`.

    Failing the session instead (as for a full disk, issue 25 item 7) ended every session
    that was mid-turn when PostgreSQL restarted: the chaos run's PostgreSQL kills failed
    them all, although nothing they had committed was lost.
    """
    log.warning("Session %s: the database server went away; the run resumes from its last "
                "committed turn once it answers (waiting up to %.0f s).", session.pk, patience)
    try:
        held = keep_trying(lease.renew, patience)
    except Exception as failure:  # noqa: BLE001 - the caller raises the original error
        log.warning("Session %s: gave up waiting for the database (%s); it stays `running` "
                    "until a worker's sweep resumes it.", session.pk,
                    storage_problem(failure).what() if storage_problem(failure) else failure)
        return None
    if not held:  # a sweep gave the session to another worker during the outage
        return {"status": "lease_lost"}
    return {"status": RESUMING}


def cannot_run(session: Session, sink: EventLog, exc: agents.ConfigError) -> agents.SessionRun:
    """A session whose profile or settings cannot work (a row changed behind the admin's
    checks, issue 25 item 8) ends at once with the error's own code, not an internal error."""
    message = recordable(str(exc))
    sink.emit(error_event(exc.code, message, fatal=True))
    sink.emit(agents.SessionFinished(status="failed", final_answer="", turns=session.turns,
                                     error=message))
    return agents.SessionRun(
        result=agents.RunResult("failed", "", session.turns, message, exc.code),
        report={"status": "failed", "turns": session.turns, "error": message,
                "error_code": exc.code})


def failure_reason(session: Session, report: dict) -> str:
    """Why a run failed, for Session.error and the page: the engine's message and what to
    do about it, else the last fatal ERROR event the session stored."""
    message, code = report.get("error") or "", report.get("error_code") or ""
    if not message:
        fatal = (SessionEvent.objects.filter(session=session, type=EventType.ERROR,
                                             payload__fatal=True)
                 .order_by("-seq").values_list("payload", flat=True).first())
        if fatal:
            error = stored_event(EventType.ERROR, fatal)
            message, code = error.message, error.code
    if not message:
        return ("The engine stopped without a final answer and gave no reason; see the "
                "drawer's log and the worker log.")
    label = f"{code}: " if code else ""
    action = f" What to do: {advise(code).action}" if code else ""
    message = message.rstrip()
    end = "" if message.endswith((".", "!", "?", "。")) else "."
    return recordable(f"{label}{message}{end}{action}")


def mark_failed(session: Session, sink: EventLog | None, exc: BaseException,
                lease: Lease | None = None, patience: float = WORKER_PATIENCE_S) -> bool:
    """Record why the run stopped, as an ERROR event and on the row (`failed`); keep what
    was saved. True once recorded.

    A storage error (issue 25 item 7: a full disk, a read-only or locked database, a
    PostgreSQL that is gone) fails these writes too, and the session sat `running` with no
    reason. They are tried again with backoff for `patience` seconds, so the reason lands
    on the page as soon as the database takes writes again. Past that, or killed, the
    session stays `running` and a worker's sweep resumes it from its last committed turn
    once writes work again. Recording stops when another executor holds the session.
    """
    problem = storage_problem(exc)
    if problem is None:
        code = "internal_error"
        message = recordable(f"{type(exc).__name__}: {exc}")  # no API key on the row or event
        error = f"The run stopped because of an internal error: {message}"
        log.error("Session %s failed: %s\n%s", session.pk, message, traceback.format_exc())
    else:  # not a bug: the line says what and what to do, a traceback would add nothing
        code, message = "storage_error", recordable(problem.line())
        error = message
        log.warning("Session %s stopped: %s", session.pk, message)
    pending = {"event": sink is not None}

    def record() -> None:
        # The event first: whoever sees the row say "failed" finds the ERROR event stored too.
        if pending["event"]:
            try:
                sink.emit(error_event(code, message, fatal=True))
            except Exception as failure:  # noqa: BLE001 - a storage error is tried again
                if storage_problem(failure) is not None or isinstance(failure, LeaseLost):
                    raise
                log.exception("Could not store the ERROR event of session %s", session.pk)
            pending["event"] = False
        values = {"status": Session.Status.FAILED, "finished_at": timezone.now(),
                  "error": error}
        if lease is not None:
            lease.fenced_update(**values)
        else:
            Session.objects.filter(pk=session.pk).update(**values)

    def waiting(trouble: StorageProblem, delay: float) -> None:
        if trouble != pending.get("said"):  # once per kind of trouble, not every try
            pending["said"] = trouble
            log.warning("Session %s: could not record why it stopped (%s); trying again "
                        "with backoff for up to %.0f s", session.pk, trouble.what(), patience)

    try:
        keep_trying(record, patience, on_retry=waiting)
    except LeaseLost:
        log.warning("Session %s: another executor holds it now; its failure is not "
                    "recorded here.", session.pk)
        return False
    except Exception as failure:  # noqa: BLE001 - the original error is what the caller raises
        trouble = storage_problem(failure)
        if trouble is None:
            log.exception("Could not record the failure of session %s", session.pk)
        else:
            log.warning("Session %s: gave up recording why it stopped (%s); it stays "
                        "`running` until a worker's sweep resumes it from its last committed "
                        "turn.", session.pk, trouble.what())
        return False
    return True


def execute_tree(session: Session, progress=None, summarizer: str | None = None) -> dict:
    """Headless (runtask): run the session; whenever it waits, run its children here,
    one after another, then run it again. Returns the root's report."""
    def once() -> dict:
        # Leased like a worker's run: a worker's sweep must not take it for an orphan.
        with headless_lease(session.pk) as lease:
            return execute_session(session, progress=progress, summarizer=summarizer,
                                   lease=lease, patience=HEADLESS_PATIENCE_S)

    report = once()
    while report.get("status") == Session.Status.WAITING:
        queued = list(session.children.filter(status=Session.Status.QUEUED).order_by("id"))
        if not queued:
            raise RuntimeError(f"session {session.pk} waits for children that never ran")
        for child in queued:
            execute_tree(child, summarizer=summarizer)
        session.refresh_from_db()
        report = once()
    return report
