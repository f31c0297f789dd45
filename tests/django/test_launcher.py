"""The run command supervises its parts (issue 25 item 10): a child that dies is started
again with backoff and logged, the others keep running, Ctrl-C still stops all in order.

Needs neither a database nor Redis: the supervision runs on fake processes and a fake
clock, and once on real sleeper processes standing in for the web server and the worker.
"""
from __future__ import annotations

import itertools
import os
import signal
import sys
import threading
import time

import pytest

from taskos.ops import launcher
from taskos.ops.launcher import Launcher

_pids = itertools.count(1000)
_ticks = itertools.count()


class FakeProcess:
    """What the launcher uses of a Popen; `die(code)` ends it."""

    def __init__(self, argv, **kwargs) -> None:
        self.argv, self.pid, self.code = argv, next(_pids), None
        self.signals: list[int] = []
        self.signalled_at = -1  # a tick of _ticks: the order children were stopped in

    def poll(self):
        return self.code

    def die(self, code: int) -> None:
        self.code = code

    def send_signal(self, signum: int) -> None:
        self.signals.append(signum)
        self.signalled_at = next(_ticks)
        self.code = -signum

    def wait(self, timeout=None):
        return self.code


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def fake(tmp_path):
    clock, said = FakeClock(), []
    run = Launcher(base_dir=tmp_path, say=said.append, popen=FakeProcess, clock=clock,
                   sleep=clock.sleep)
    for name in ("redis", "worker", "web"):
        run.spawn(name, [name], {})
    return run, clock, said


def child(run: Launcher, name: str):
    return next(c for c in run.children if c.name == name)


def test_a_dead_child_is_started_again_alone_with_growing_backoff(fake):
    run, clock, said = fake
    redis, worker = child(run, "redis").process, child(run, "worker").process
    restart_waits = []
    for _ in range(8):  # the web server dies at once every time it is started
        web = child(run, "web")
        web.process.die(-signal.SIGKILL)
        died_at = clock.now
        first = web.process
        while web.process is first:
            run.tend()
            clock.sleep(0.5)
        restart_waits.append(web.started - died_at)
    assert restart_waits == [1, 2, 4, 8, 16, 30, 30, 30]
    assert child(run, "redis").process is redis and child(run, "worker").process is worker
    assert "The web process" in said[0] and "signal SIGKILL" in said[0]
    assert "starting it again in 1 s" in said[0] and "The others keep running" in said[0]
    assert "Started the web process again" in said[1]
    # Up for a minute before dying: the next start waits 1 s again.
    clock.sleep(launcher.RESTART_RESET_AFTER_S)
    web = child(run, "web")
    web.process.die(1)
    run.tend()
    assert web.restart_at == clock.now + 1 and "exited with code 1" in said[-1]


def test_ctrl_c_still_stops_every_child_in_order_after_restarts(fake):
    run, clock, said = fake
    child(run, "worker").process.die(-signal.SIGKILL)
    run.tend()
    clock.sleep(1)
    run.tend()
    processes = {c.name: c.process for c in run.children}
    assert child(run, "worker").restarts == 1

    def interrupted():  # what SIGTERM / Ctrl-C raise in the run command
        if clock.now > 10:
            raise KeyboardInterrupt
        return True

    with pytest.raises(KeyboardInterrupt):
        run.supervise(running=interrupted)
    run.stop()
    assert sorted(processes, key=lambda name: processes[name].signalled_at) == [
        "web", "worker", "redis"]
    assert run.children == []
    assert processes["worker"].signals == [signal.SIGTERM]  # spawn's default stop signal


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_for(condition, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} did not happen within {timeout:.0f} s")


def test_a_killed_real_child_is_started_again_and_the_other_keeps_its_pid(tmp_path):
    said: list[str] = []
    run = Launcher(base_dir=tmp_path, say=said.append)
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    run.spawn("worker", sleeper, dict(os.environ))
    run.spawn("web", sleeper, dict(os.environ))
    worker, web = run.children
    worker_pid, web_pid = worker.process.pid, web.process.pid
    done = threading.Event()
    supervising = threading.Thread(target=run.supervise,
                                   kwargs={"running": lambda: not done.is_set()})
    supervising.start()
    try:
        os.kill(web_pid, signal.SIGKILL)
        wait_for(lambda: web.process.pid != web_pid and web.process.poll() is None,
                 "the web stand-in's restart")
        assert worker.process.pid == worker_pid and worker.process.poll() is None
        assert alive(web.process.pid) and alive(worker_pid)
        assert any("The web process" in line and "SIGKILL" in line for line in said)
        assert (tmp_path / "var" / "log" / "web.log").exists()
    finally:
        done.set()
        supervising.join(timeout=30)
        processes = [c.process for c in run.children]
        run.stop()
    assert all(p.poll() is not None for p in processes)


def test_a_second_interrupt_while_stopping_kills_the_rest_instead_of_leaving_it(tmp_path):
    """A service manager's second SIGTERM (or a second Ctrl-C) during the orderly stop used
    to end the command with a traceback and leave the slower children running."""
    said: list[str] = []
    run = Launcher(base_dir=tmp_path, say=said.append)
    stubborn = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                "signal.SIG_IGN); print('ready', flush=True); time.sleep(600)"]
    run.spawn("redis", stubborn, dict(os.environ))  # stopped last, and it ignores SIGTERM
    run.spawn("web", [sys.executable, "-c", "import time; time.sleep(600)"], dict(os.environ))
    processes = [c.process for c in run.children]
    wait_for(lambda: "ready" in run.log_path("redis").read_text(), "the stubborn child's start")

    def second_interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, second_interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0)  # arrives while stop() waits for "redis"
    try:
        run.stop()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert all(p.poll() is not None for p in processes) and run.children == []
    assert any("Interrupted again" in line for line in said)
