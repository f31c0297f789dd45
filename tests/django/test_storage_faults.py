"""A full disk and other storage errors (issue 25 item 7): the session ends `failed` with
the reason once the database takes writes again, nothing saved is lost, the sweeper backs
off, and the commands say it in one line.

The disk fills deterministically: a Django execute_wrapper fails writes with the very
error SQLite raises on a full disk ("database or disk is full") from a chosen write on,
until the test frees it. The waits between tries run on a fake clock.
"""
from __future__ import annotations

import errno
import logging
import socket

import pytest
from django.core.management import ManagementUtility
from django.db import InterfaceError, OperationalError, connection

from taskos.runs import services
from taskos.runs.models import Session, SessionEvent
from taskos.store import storage_errors
from taskos.store.storage_errors import storage_problem
from taskos.worker import sweeper
from taskos.worker.lease import Lease
from taskos.worker.tasks import run_session

WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


class FullDisk:
    """execute_wrapper: from write number `after` on, writes (or every statement, with
    `everything`) fail as on a full disk, until `free()`."""

    def __init__(self, after: int = 0, everything: bool = False,
                 error: str = "database or disk is full") -> None:
        self.after, self.everything, self.error = after, everything, error
        self.writes = self.refused = 0
        self.events_before: list[int] | None = None  # event seqs stored when it filled up
        self.freed = False

    def __call__(self, execute, sql, params, many, context):
        write = sql.lstrip().upper().startswith(WRITES)
        if not self.freed and (self.everything or write):
            if self.writes >= self.after:
                self.refused += 1
                raise OperationalError(self.error)
        if write:
            self.writes += 1
        return execute(sql, params, many, context)

    def free(self) -> None:
        self.freed = True


class FakeTime:
    """storage_errors' sleep and clock: the sleeps made, in order, on a fake clock."""

    def __init__(self) -> None:
        self.slept: list[float] = []
        self.now = 1000.0
        self.after_sleep = lambda: None

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        self.after_sleep()


@pytest.fixture
def fake_time(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(storage_errors, "sleep", fake.sleep)
    monkeypatch.setattr(storage_errors, "clock", lambda: fake.now)
    return fake


def test_storage_errors_are_told_apart_from_bugs():
    full = storage_problem(OperationalError("database or disk is full"))
    assert full.kind == "full" and "database or disk is full" in full.line()
    assert "Free disk space" in full.line()
    no_space = storage_problem(OSError(errno.ENOSPC, "No space left on device"))
    assert no_space.kind == "full" and "No space left on device" in no_space.line()
    assert storage_problem(OperationalError("attempt to write a readonly database")).kind \
        == "read_only"
    assert storage_problem(OperationalError("database is locked")).kind == "locked"
    assert storage_problem(InterfaceError("connection already closed")).kind == "unreachable"
    try:  # the error a caller sees is often raised from the storage error
        try:
            raise OperationalError("database or disk is full")
        except OperationalError as exc:
            raise RuntimeError("could not save the turn") from exc
    except RuntimeError as exc:
        assert storage_problem(exc).kind == "full"
    # SQLite reports programming errors as OperationalError too: those are bugs.
    assert storage_problem(OperationalError("no such column: runs_session.nope")) is None
    assert storage_problem(ValueError("database or disk is full")) is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channels_redis_url")
def test_a_disk_full_mid_session_ends_it_failed_with_the_reason(sim_profile, fake_time):
    session = services.create_session(None, "", "retrieval-6x1600", sim_profile, None, {})
    disk = FullDisk(after=60)
    # Someone frees space while the worker keeps trying to record why the run stopped.
    fake_time.after_sleep = lambda: disk.free() if len(fake_time.slept) == 3 else None
    with connection.execute_wrapper(disk):
        result = run_session.apply(args=[session.pk])
    assert disk.refused >= 4 and disk.freed  # it failed mid-run, and the record waited
    assert result.successful()
    session.refresh_from_db()
    assert session.status == "failed", session.status
    assert "database or disk is full" in session.error and "Free disk space" in session.error
    assert session.lease_owner == ""
    error = SessionEvent.objects.get(session=session, type="ERROR")
    assert error.payload["code"] == "storage_error" and error.payload["fatal"]
    assert "database or disk is full" in error.payload["message"]
    # Backoff between the tries to record it; what the run stored before the disk filled up
    # is all there (it had made model calls).
    assert fake_time.slept == [0.5, 1.0, 2.0]
    assert SessionEvent.objects.filter(session=session, type="MODEL_CALL").exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channels_redis_url")
def test_a_task_that_cannot_take_its_lease_for_a_full_disk_ends_quietly(sim_profile):
    session = services.create_session(None, "", "retrieval-6x1600", sim_profile, None, {})
    with connection.execute_wrapper(FullDisk(after=0)):
        result = run_session.apply(args=[session.pk])
    # No exception for Celery to log with a traceback; the sweep sends the session again.
    assert result.successful(), result.traceback
    assert result.result["status"] == "storage_error"
    assert "database or disk is full" in result.result["error"]
    assert Session.objects.get(pk=session.pk).status == "queued"


class Stop(Exception):
    pass


def test_the_sweeper_backs_off_while_sweeps_fail_and_logs_each_change_once(caplog):
    outcomes = [OperationalError("database or disk is full")] * 7 + [
        OperationalError("database is locked"), None, None, OperationalError("database is locked")]
    waits: list[float] = []

    def sweep_once():
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome

    def wait(seconds):
        waits.append(seconds)
        return not outcomes  # True: stop

    caplog.set_level(logging.INFO, logger="taskos.runs")
    sweeper.Sweeper(interval=2, cap=60, sweep_once=sweep_once, wait=wait)._run()
    assert waits == [4, 8, 16, 32, 60, 60, 60, 60, 2, 2, 4]
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert len(said) == 4, said  # full, locked, working again, locked
    assert "database or disk is full" in said[0] and "Free disk space" in said[0]
    assert "database is locked" in said[1]
    assert "works again after 8 failed round(s)" in said[2]
    assert "database is locked" in said[3]
    assert not any(r.exc_info for r in caplog.records)  # no traceback for a storage error


def test_a_lease_heartbeat_on_a_full_disk_says_so_once_not_every_beat(caplog):
    lease = Lease(1, owner="test:1", seconds=0.04)
    beats = []

    def renew():
        beats.append(1)
        if len(beats) == 6:
            lease._stop.set()  # the run ends: the heartbeat stops after this beat
        raise OperationalError("database or disk is full")

    lease.renew = renew
    caplog.set_level(logging.INFO, logger="taskos.runs")
    lease._beat()
    assert len(beats) == 6
    said = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert len(said) == 1 and "database or disk is full" in said[0].getMessage()
    assert not said[0].exc_info


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_command(argv: list[str]) -> int:
    """The command as `manage.py` runs it; its exit code."""
    with pytest.raises(SystemExit) as exited:
        ManagementUtility(["manage.py", *argv]).execute()
    return exited.value.code


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("channels_redis_url")
def test_runtask_on_a_full_disk_prints_one_line_and_exits_non_zero(sim_profile, fake_time,
                                                                  capsys, caplog):
    with connection.execute_wrapper(FullDisk(after=60)):
        code = run_command(["runtask", "--scenario", "retrieval-6x1600"])
    err = capsys.readouterr().err
    assert code == 1
    said = [line for line in err.splitlines() if line.startswith("CommandError")]
    assert len(said) == 1, err
    assert said[0].startswith("CommandError: Session #") and "stopped" in said[0]
    assert "database or disk is full" in said[0] and "Free disk space" in said[0]
    assert "Traceback" not in err
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()], \
        "a traceback went to the log"
    assert sum(fake_time.slept) <= 10  # a person waits at the terminal: it gave up soon


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("argv", [["runtask", "--scenario", "sales-report"], ["replay", "1"],
                                  ["bench", "--recall-rows", "100", "--db-runs", "0"],
                                  ["up", "--port", "PORT", "--redis-port", "PORT"]])
def test_commands_on_a_database_that_is_gone_print_one_line(argv, capsys, caplog):
    argv = [str(free_port()) if a == "PORT" else a for a in argv]
    gone = FullDisk(everything=True, error="unable to open database file")
    with connection.execute_wrapper(gone):
        code = run_command(argv)
    err = capsys.readouterr().err
    assert code == 1 and gone.refused
    assert err.strip().splitlines() == [err.strip()], err  # one line
    assert err.startswith("CommandError: Storage error: the database could not read or write")
    assert "unable to open database file" in err and "Traceback" not in err


@pytest.mark.django_db(transaction=True)
def test_a_saved_turn_lost_with_the_database_server_is_one_log_line(monkeypatch, caplog):
    # The chaos run with PostgreSQL kills found this the one traceback left in worker logs:
    # the server's own trouble, which the worker then reports and waits out.
    import psycopg

    from taskos.store import django_store
    from taskos.store.django_store import DjangoStore

    def server_gone(savepoint):
        try:
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        except psycopg.OperationalError as cause:
            raise OperationalError("server closed the connection unexpectedly") from cause

    store = DjangoStore()
    store.begin_batch()
    store.mark_turn_saved()
    monkeypatch.setattr(django_store.transaction, "savepoint_rollback", server_gone)
    with caplog.at_level("WARNING", logger="taskos.runs"):
        store.rollback_batch(RuntimeError("the turn failed"))
    [record] = [r for r in caplog.records if "last saved turn" in r.getMessage()]
    assert record.levelname == "WARNING" and record.exc_info is None
    assert "cannot be reached" in record.getMessage()
