"""Ask before a tool acts (feature T11): which calls ask, who decides, and the wake-up.

The engine records an ask-first call as a pending ToolApproval and its run ends
`waiting_for_approval`: no worker holds the session, everything is in the database, so a
worker restart changes nothing. A person (the session's owner or staff) approves or
denies it from the drawer; once no call of the session is pending, the session goes
back to `queued` (a compare-and-set on the status, as sub-agents wake their parent in
taskos/runs/delegation.py) and its next run hands each decision to the model. A decision
made while the run is still stopping is picked up when its task ends (`after_run`), and
the sweeper repeats both, and denies calls left undecided past TASKOS_APPROVAL_TIMEOUT_S.

Which tools ask first: the session's own `ask_first` names, the TASKOS_ASK_FIRST names
every session asks for, write_file and every destructive tool when TASKOS_ASK_FIRST_WRITES
is on, any tool whose object carries `ask_first` (the engine's hook for a tool source
marked ask-first as a whole), and the names each registered `ask_first_provider` gives
for a session (the Django side of the same hook).
"""
from __future__ import annotations

import datetime as dt
import logging
from typing import Callable, Iterable

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents import ApprovalRecord, AskFirst

from .delegation import _send
from .models import Session, ToolApproval

log = logging.getLogger("taskos.runs")

WAITING_FOR_APPROVAL = Session.Status.WAITING_FOR_APPROVAL
PENDING = ToolApproval.Decision.PENDING
TIMEOUT = "timeout"
MAX_REASON_CHARS = 2000

# Callables (session → tool names) that mark more tools ask-first for a session, such
# as every tool of a tool source a person marked ask-first.
ask_first_providers: list[Callable[[Session], Iterable[str]]] = []


class DecisionRefused(Exception):
    """A decision that cannot be recorded; the message says why, for the person."""


def ask_first_of(session: Session) -> AskFirst:
    """The session's ask-first rule, as the engine's spec takes it."""
    names = list(getattr(settings, "TASKOS_ASK_FIRST", ()) or ())
    names += [str(name) for name in session.ask_first or ()]
    for provider in ask_first_providers:
        names += [str(name) for name in provider(session)]
    return AskFirst.of(names, writes=bool(getattr(settings, "TASKOS_ASK_FIRST_WRITES", False)))


def record_of(row: ToolApproval) -> ApprovalRecord:
    """The engine's view of a row (agents.ApprovalRecord)."""
    by = row.decided_how or (row.decided_by.get_username() if row.decided_by_id else "")
    return ApprovalRecord(call_id=row.call_id, tool=row.tool, arguments=row.arguments,
                          preview=row.preview, turn=row.turn, status=row.status,
                          reason=row.reason, decided_by=by)


def can_decide(user, session: Session) -> bool:
    return bool(user.is_authenticated and (user.is_staff or session.owner_id == user.pk))


def decide(approval: ToolApproval, *, approve: bool, reason: str = "", user=None,
           how: str = "", send=None) -> None:
    """Record a decision on a pending call (once: a second decision is refused) and wake
    the session when nothing of it is pending any more."""
    reason = (reason or "").strip()
    if not approve and not reason and how != TIMEOUT:
        raise DecisionRefused("Say why you deny the call: the model reads the reason as "
                              "the tool's result.")
    if len(reason) > MAX_REASON_CHARS:
        raise DecisionRefused(f"The reason is {len(reason)} characters long; at most "
                              f"{MAX_REASON_CHARS} are kept.")
    status = ToolApproval.Decision.APPROVED if approve else ToolApproval.Decision.DENIED
    with transaction.atomic():
        changed = ToolApproval.objects.filter(pk=approval.pk, status=PENDING).update(
            status=status, reason=reason, decided_by=user if user is not None
            and user.is_authenticated else None, decided_how=how, decided_at=timezone.now())
    if changed != 1:
        approval.refresh_from_db()
        raise DecisionRefused(f"This call was already {approval.status}"
                              + (" (no decision came in time)." if approval.decided_how ==
                                 TIMEOUT else "."))
    approval.refresh_from_db()
    wake_if_decided(approval.session_id, send)


def wake_if_decided(pk: int, send=None) -> bool:
    """Queue a session waiting for approval again once none of its calls is pending."""
    if ToolApproval.objects.filter(session_id=pk, status=PENDING).exists():
        return False
    if Session.objects.filter(pk=pk, status=WAITING_FOR_APPROVAL).update(
            status=Session.Status.QUEUED, enqueued_at=timezone.now()) != 1:
        return False  # not waiting for approval (any more): running, or woken already
    _send(pk, send)
    return True


def approval_timeout() -> dt.timedelta | None:
    seconds = getattr(settings, "TASKOS_APPROVAL_TIMEOUT_S", None)
    return dt.timedelta(seconds=float(seconds)) if seconds else None


def deny_overdue(now: dt.datetime | None = None, send=None) -> list[int]:
    """Deny the calls left undecided past the timeout (none without one), with the
    reason the model reads; returns the ids of the approvals denied."""
    timeout = approval_timeout()
    if timeout is None:
        return []
    now = now or timezone.now()
    denied = []
    for approval in ToolApproval.objects.filter(status=PENDING,
                                                requested_at__lt=now - timeout):
        minutes = timeout.total_seconds() / 60
        try:
            decide(approval, approve=False, how=TIMEOUT, send=send, reason=(
                f"no decision came within {minutes:g} minutes (the approval timeout)"))
        except DecisionRefused:
            continue  # a person decided it meanwhile
        denied.append(approval.pk)
    return denied


def stranded_waits(send=None) -> list[int]:
    """Sessions waiting for approval with nothing pending (a wake-up lost between a
    decision and the end of the run that asked), queued again."""
    pks = Session.objects.filter(status=WAITING_FOR_APPROVAL).exclude(
        approvals__status=PENDING).values_list("pk", flat=True)
    return [pk for pk in pks if wake_if_decided(pk, send)]


def deny_for_cancel(session_pks: Iterable[int]) -> None:
    """A cancelled session stops asking: its pending calls are denied and it is woken,
    to stop at its next turn with the denials as their results."""
    for approval in ToolApproval.objects.filter(session_id__in=list(session_pks),
                                                status=PENDING):
        try:
            decide(approval, approve=False, how="cancelled",
                   reason="the session was cancelled")
        except DecisionRefused:
            continue
