"""One executor per session: a lease row-lock that lives in the Session table.

Celery with `acks_late` delivers a message again when the broker thinks its worker is gone
(visibility timeout, a lost connection, a killed worker). Without a lease the second
delivery would run the same session next to the first one: every turn called twice,
archived twice, paid twice. The lease is taken with one compare-and-set UPDATE, renewed by a
heartbeat thread while the session runs, and every state save is fenced by it, so an
executor that lost its lease cannot commit a turn over the new owner's.
"""
from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import uuid
from contextlib import contextmanager
from typing import Iterator

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import Q
from django.utils import timezone

from taskos.runs.models import Session
from taskos.store.storage_errors import storage_problem

log = logging.getLogger("taskos.runs")


class LeaseLost(RuntimeError):
    """Another executor owns the session now; this one must stop without writing."""


def lease_seconds() -> float:
    return float(getattr(settings, "TASKOS_LEASE_SECONDS", 60))


def new_owner(task_id: str | None = None) -> str:
    """host:pid:task:nonce, readable in the admin and unique per attempt."""
    return f"{socket.gethostname()}:{os.getpid()}:{task_id or '-'}:{uuid.uuid4().hex[:8]}"[:200]


class Lease:
    def __init__(self, session_pk: int, owner: str | None = None,
                 seconds: float | None = None) -> None:
        self.session_pk = session_pk
        self.owner = owner or new_owner()
        self.seconds = seconds or lease_seconds()
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def expiry(self) -> dt.datetime:
        return timezone.now() + dt.timedelta(seconds=self.seconds)

    def take(self) -> bool:
        """Take the lease if it is free, expired or already ours; True when we hold it."""
        now = timezone.now()
        free = Q(lease_owner="") | Q(lease_expires__isnull=True) | Q(lease_expires__lt=now)
        taken = Session.objects.filter(Q(pk=self.session_pk) & (free | Q(lease_owner=self.owner))).update(
            lease_owner=self.owner, lease_expires=self.expiry())
        return taken == 1

    def renew(self) -> bool:
        """Push the expiry on; False (and `lost`) when someone else holds the lease now."""
        if self.lost:
            return False
        renewed = Session.objects.filter(pk=self.session_pk, lease_owner=self.owner).update(
            lease_expires=self.expiry())
        if not renewed:
            self.lost = True
            log.warning("Session %s: lease of %s was taken over; this executor stops.",
                        self.session_pk, self.owner)
        return bool(renewed)

    def held(self) -> bool:
        """Whether the session row still names this executor (a read, no renewal)."""
        return Session.objects.filter(pk=self.session_pk, lease_owner=self.owner).exists()

    def check(self) -> None:
        if self.lost:
            raise self.lost_error()

    def lost_error(self) -> LeaseLost:
        return LeaseLost(f"session {self.session_pk} is run by another worker now")

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        Session.objects.filter(pk=self.session_pk, lease_owner=self.owner).update(
            lease_owner="", lease_expires=None)

    def start_heartbeat(self) -> None:
        """Renew every quarter of the lease: a single turn may wait on a slow model for
        longer than the lease, and the state save (the other renewal) comes only per turn."""
        self._thread = threading.Thread(target=self._beat, name=f"lease-{self.session_pk}",
                                        daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        said = None  # the storage problem last logged: a full disk is said once, not per beat
        try:
            while not self._stop.wait(self.seconds / 4):
                try:
                    if not self.renew():
                        return
                    said = None
                except Exception as exc:  # noqa: BLE001 - a database hiccup: try again next beat
                    problem = storage_problem(exc)
                    if problem is None:
                        log.exception("Session %s: lease heartbeat failed", self.session_pk)
                    elif problem != said:  # issue 25 item 7
                        said = problem
                        log.warning("Session %s: lease heartbeat failed (%s); trying again "
                                    "every %.0f s", self.session_pk, problem.what(),
                                    self.seconds / 4)
                    close_old_connections()
        finally:
            connection.close()

    def fenced_update(self, **values) -> None:
        """Update the session row only while we hold the lease (and renew it with the write)."""
        self.check()
        self.fence(bool(Session.objects.filter(pk=self.session_pk, lease_owner=self.owner)
                        .update(lease_expires=self.expiry(), **values)))

    def fence(self, written: bool) -> None:
        """After a write made only `WHERE lease_owner = self.owner`: no row written means
        another executor holds the session now; this one stops (LeaseLost)."""
        if not written:
            self.lost = True
            self.check()


@contextmanager
def headless_lease(session_pk: int) -> Iterator[Lease]:
    """The lease for a run outside the worker (`runtask`, `replay`, their sub-agents).

    Without it a worker's sweep takes the running session for an orphan (running, no
    lease, never sent) and runs it a second time next to this one. The heartbeat needs a
    connection that sees the row: inside an open transaction (a test's) the state saves,
    which renew the lease with each turn, keep it instead.
    """
    lease = Lease(session_pk, owner=new_owner("headless"))
    if not lease.take():
        raise LeaseLost(f"session {session_pk} is being run by a worker; wait for it to end")
    if not connection.in_atomic_block:
        lease.start_heartbeat()
    try:
        yield lease
    finally:
        lease.release()
