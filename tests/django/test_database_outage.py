"""A database server that goes away mid-session (a PostgreSQL restart) does not end the
session: the worker waits for it and resumes the run from its last committed turn, which
then ends exactly like an uninterrupted run.

The chaos run's PostgreSQL kills (issue 25's Done when) failed every session that was
mid-turn, with a storage_error, once the server was back: the failure path of a full disk
(issue 25 item 7) took a restart for a fault a person must mend. Here the server "goes
away" deterministically: a Django execute_wrapper fails every statement of the worker's
connection, from a chosen write on, with the error psycopg raises for a closed server
connection, until the test brings it back; the waits run on a fake clock.
"""
from __future__ import annotations

import psycopg
import pytest
from django.db import OperationalError, connection

from taskos.ops.chaos.compare import compare, fingerprint
from taskos.runs import services
from taskos.runs.models import Session, SessionEvent
from taskos.store import storage_errors
from taskos.worker.execute import WORKER_PATIENCE_S
from taskos.worker.lease import Lease
from taskos.worker.tasks import run_session

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("channels_redis_url")]

SCENARIO = "retrieval-6x1600"
WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


class ServerGone:
    """execute_wrapper: from write number `after` on, every statement fails as on a server
    connection that closed, until `back()`."""

    def __init__(self, after: int) -> None:
        self.after = after
        self.writes = self.refused = 0
        self.returned = False

    def __call__(self, execute, sql, params, many, context):
        if self.writes >= self.after and not self.returned:
            self.refused += 1
            raise OperationalError("server closed the connection unexpectedly") from (
                psycopg.OperationalError("server closed the connection unexpectedly"))
        if sql.lstrip().upper().startswith(WRITES):
            self.writes += 1
        return execute(sql, params, many, context)

    def back(self) -> None:
        self.returned = True


@pytest.fixture
def fake_sleeps(monkeypatch):
    slept: list[float] = []
    clock = {"now": 1000.0, "after_sleep": lambda: None}

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock["now"] += seconds
        clock["after_sleep"]()

    monkeypatch.setattr(storage_errors, "sleep", sleep)
    monkeypatch.setattr(storage_errors, "clock", lambda: clock["now"])
    return slept, clock


def test_a_session_cut_by_a_database_restart_resumes_and_ends_as_uninterrupted(
        sim_profile, fake_sleeps):
    baseline = services.create_session(None, "", SCENARIO, sim_profile, None, {})
    run_session.apply(args=[baseline.pk])
    baseline.refresh_from_db()
    assert baseline.status == "finished"

    session = services.create_session(None, "", SCENARIO, sim_profile, None, {})
    server = ServerGone(after=60)
    slept, clock = fake_sleeps
    clock["after_sleep"] = lambda: server.back() if len(slept) == 3 else None
    with connection.execute_wrapper(server):
        result = run_session.apply(args=[session.pk])
    assert server.returned and server.refused >= 3  # cut mid-run, waited for
    assert slept == [0.5, 1.0, 2.0]  # backoff while the server was away
    assert result.successful()
    session.refresh_from_db()
    assert session.status == "finished", (session.status, session.error)
    assert session.error == "" and session.lease_owner == ""
    assert not SessionEvent.objects.filter(session=session, type="ERROR",
                                           payload__code="storage_error").exists()
    found = compare(session, fingerprint(baseline))
    assert found["resumes"] == 1 and found["differs_in"] == []
    # The resume note only adds tokens: every context hint of the uninterrupted run is sent.
    uninterrupted_hints, resumed_hints = found["context_hints"]
    assert set(uninterrupted_hints) <= set(resumed_hints)
    assert not found["lost_turns"] and not found["duplicated_turns"]
    assert found["double_executions"] == 0 and found["call_numbers_ok"]


def test_a_session_another_worker_took_during_the_outage_is_left_to_it(
        sim_profile, fake_sleeps):
    """The outage outlived the lease and a sweep gave the session to another worker: this
    one stops without a write once the database is back."""
    session = services.create_session(None, "", SCENARIO, sim_profile, None, {})
    server = ServerGone(after=60)
    slept, clock = fake_sleeps
    other = Lease(session.pk, owner="other-worker")

    def back_with_another_owner() -> None:
        if len(slept) == 2:
            server.back()
            Session.objects.filter(pk=session.pk).update(lease_owner=other.owner)

    clock["after_sleep"] = back_with_another_owner
    with connection.execute_wrapper(server):
        result = run_session.apply(args=[session.pk])
    assert result.get()["status"] == "lease_lost"
    session.refresh_from_db()
    assert session.status == "running" and session.lease_owner == other.owner
    assert not SessionEvent.objects.filter(session=session, type="ERROR",
                                           payload__code="storage_error").exists()


def test_a_worker_that_gives_up_waiting_leaves_the_session_to_the_sweep(
        sim_profile, fake_sleeps):
    """The server stays away for the worker's whole patience: the session is not failed
    (nothing a person must mend); it stays `running` for a sweep to resume."""
    session = services.create_session(None, "", SCENARIO, sim_profile, None, {})
    server = ServerGone(after=60)
    slept, _ = fake_sleeps
    with connection.execute_wrapper(server):
        result = run_session.apply(args=[session.pk])
    server.back()
    assert result.successful() and sum(slept) >= WORKER_PATIENCE_S - 15
    session.refresh_from_db()
    assert session.status == "running" and session.error == ""
    assert not SessionEvent.objects.filter(session=session, type="ERROR",
                                           payload__code="storage_error").exists()
