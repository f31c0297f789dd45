"""The run command as a person uses it: start `taskos`, log in, start sales-report from the
form, see it finish with its events stored, stop with Ctrl-C (features W6, W2, T1, W5)."""
from __future__ import annotations

import http.cookiejar
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from html.parser import HTMLParser
from pathlib import Path
from urllib.error import HTTPError
from urllib.parse import urlencode, urlsplit, urlunsplit
from urllib.request import HTTPCookieProcessor, HTTPRedirectHandler, Request, build_opener

import pytest
from django.conf import settings

pytestmark = pytest.mark.slow

BASE_DIR = Path(settings.BASE_DIR)
PASSWORD = "e2e-" + uuid.uuid4().hex


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class FormFields(HTMLParser):
    """The values a browser would submit for the first form holding a given field."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, str] = {}
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        name = a.get("name")
        if tag == "input" and name:
            if a.get("type") in ("checkbox", "radio") and "checked" not in a:
                return
            if a.get("type") not in ("submit", "button"):
                self.fields[name] = a.get("value") or ("on" if a.get("type") == "checkbox" else "")
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select:
            if self._select not in self.fields or "selected" in a:
                self.fields[self._select] = a.get("value", "")
        elif tag == "textarea" and name:
            self._textarea = name
            self.fields[name] = ""

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data):
        if self._textarea:
            self.fields[self._textarea] += data


class NoRedirect(HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class Browser:
    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = build_opener(HTTPCookieProcessor(self.jar), NoRedirect())

    def request(self, path: str, data: dict | None = None) -> tuple[int, dict, str]:
        body = urlencode(data).encode() if data is not None else None
        req = Request(self.base + path, data=body, headers={"Referer": self.base + path})
        try:
            with self.opener.open(req, timeout=30) as response:
                return response.status, dict(response.headers), response.read().decode()
        except HTTPError as error:  # 3xx/4xx arrive here with NoRedirect
            return error.code, dict(error.headers), error.read().decode()

    def form(self, path: str) -> dict[str, str]:
        status, _, html = self.request(path)
        assert status == 200, (path, status, html[:500])
        parser = FormFields()
        parser.feed(html)
        return parser.fields


class Database:
    """The server's database, read directly (it is not the test database)."""

    def __init__(self, tmp_path: Path) -> None:
        test_url = os.environ.get("DATABASE_URL", "")
        self.postgres = test_url.startswith(("postgres://", "postgresql://"))
        if self.postgres:
            import psycopg
            self.name = f"taskos_e2e_{uuid.uuid4().hex[:8]}"
            parts = urlsplit(test_url)
            self.admin_url = urlunsplit((parts.scheme, parts.netloc, "/postgres", "", ""))
            self.url = urlunsplit((parts.scheme, parts.netloc, f"/{self.name}", "", ""))
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{self.name}"')
        else:
            self.path = tmp_path / "e2e.sqlite3"
            self.url = f"sqlite:///{self.path}"

    def query(self, sql: str, params=()) -> list[tuple]:
        if self.postgres:
            import psycopg
            with psycopg.connect(self.url) as conn:
                return conn.execute(sql.replace("?", "%s"), params).fetchall()
        with sqlite3.connect(self.path, timeout=20) as conn:
            return conn.execute(sql, params).fetchall()

    def drop(self) -> None:
        if self.postgres:
            import psycopg
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def wait_for(predicate, what: str, timeout: float, server=None, log: Path | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if server is not None and server.poll() is not None:
            break
        time.sleep(0.5)
    output = log.read_text(errors="replace")[-4000:] if log else ""
    raise AssertionError(f"timed out waiting for {what}\n--- server output ---\n{output}")


def descendants(pid: int) -> list[int]:
    """Every process under `pid` (read from /proc): the launcher starts its children in
    sessions of their own, so killing the launcher's group would not reach them."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def running(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return False


def kill_all(process: subprocess.Popen) -> None:
    """The run command and everything it started, at once (a failed test leaves nothing)."""
    for pid in [*descendants(process.pid), process.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait()


def as_background_job() -> None:
    """What a shell does to a job started with `&` (or `nohup`): SIGINT ignored, which the
    run command inherits; and a session of its own, so the test's signals reach only it."""
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture
def server(tmp_path):
    database = Database(tmp_path)
    web_port, redis_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}  # use the bundled Redis
    env.update(DATABASE_URL=database.url, TASKOS_ADMIN_PASSWORD=PASSWORD,
               TASKOS_WORKSPACES=str(tmp_path / "workspaces"), PYTHONUNBUFFERED="1")
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "taskos.cli", "--port", str(web_port),
             "--redis-port", str(redis_port), "--concurrency", "1"],
            cwd=BASE_DIR, env=env, stdout=out, stderr=subprocess.STDOUT,
            preexec_fn=as_background_job)
    try:
        wait_for(lambda: "TaskOS is running: open" in log.read_text(errors="replace"),
                 "the run command to start", 180, process, log)
        yield {"process": process, "base": f"http://127.0.0.1:{web_port}", "db": database,
               "log": log, "web_port": web_port, "redis_port": redis_port}
    finally:
        if process.poll() is None:  # the test failed before stopping it: stop everything
            kill_all(process)
        database.drop()


def test_start_a_scenario_from_the_browser_form_and_stop_cleanly(server):
    browser, db, log = Browser(server["base"]), server["db"], server["log"]
    # Progress while it starts, in order, before the address to open.
    started = log.read_text(errors="replace")
    steps = ["migrating…", "starting Redis…", "web server ready", "worker ready",
             f"open {server['base']}/"]
    positions = [started.find(step) for step in steps]
    assert -1 not in positions and positions == sorted(positions), started

    login = browser.form("/accounts/login/")
    login.update(username="admin", password=PASSWORD)
    status, headers, body = browser.request("/accounts/login/", login)
    assert status == 302, body[:2000]

    sim_pk = db.query("SELECT id FROM runs_modelprofile WHERE name = ?", ("sim",))[0][0]
    form = browser.form("/sessions/new")
    form.update(scenario="sales-report", profile=str(sim_pk))
    status, headers, body = browser.request("/sessions/new", form)
    assert status == 302, body[:3000]
    session_pk = int(re.search(r"/sessions/(\d+)/", headers["Location"]).group(1))

    def finished():
        rows = db.query("SELECT status, error FROM runs_session WHERE id = ?", (session_pk,))
        return rows and rows[0][0] not in ("queued", "running") and rows[0]
    status_row = wait_for(finished, "the session to finish", 300, server["process"], log)
    assert status_row[0] == "finished", status_row

    types = {t for (t,) in db.query(
        "SELECT DISTINCT type FROM runs_sessionevent WHERE session_id = ?", (session_pk,))}
    assert {"SESSION_STARTED", "BUDGET", "MODEL_CALL", "TOOL_CALL", "SESSION_FINISHED"} <= types
    owner = db.query("SELECT u.username FROM runs_session s JOIN auth_user u "
                     "ON u.id = s.owner_id WHERE s.id = ?", (session_pk,))
    assert owner == [("admin",)]
    status, _, page = browser.request(f"/sessions/{session_pk}/")
    assert status == 200 and "sales" in page.lower()

    process = server["process"]
    children = descendants(process.pid)
    assert len(children) >= 3  # Redis, the worker and the web server (and theirs)
    # What Ctrl-C does; started as a background job, SIGINT was ignored when inherited.
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=90) == 0, log.read_text(errors="replace")[-3000:]
    output = log.read_text(errors="replace")
    assert "TaskOS stopped." in output
    for port in (server["web_port"], server["redis_port"]):
        with socket.socket() as sock:
            assert sock.connect_ex(("127.0.0.1", port)) != 0, f"port {port} still answers"
    assert not [pid for pid in children if running(pid)]
