"""A private PostgreSQL cluster the chaos run starts in its run folder, and kills.

Never the machine's own server: other people's databases live there, and a kill of it would
be theirs too. The cluster is initialised into the run folder with trust authentication on
127.0.0.1 only, fsync on (a kill must not lose what was committed), and run by an
unprivileged user, since initdb and postgres refuse to run as root: the `postgres` account
when this process is root, else this process's own user.

A kill is what a crash of the database machine does: every process of the cluster gets
SIGKILL at once. Killing only the postmaster is not that: each backend puts itself in a
session of its own (so that the postmaster can signal it), notices the postmaster's death
on its own time, and while one is still attached to the shared memory the next postmaster
refuses to start. Starting again runs crash recovery from the WAL.
"""
from __future__ import annotations

import ctypes
import glob
import os
import pwd
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psycopg

START_TIMEOUT_S = 120.0  # crash recovery of a busy cluster on a loaded machine
STOP_TIMEOUT_S = 30.0
BINARIES = ("initdb", "postgres")
PR_SET_CHILD_SUBREAPER = 36


def find_postgres_bin() -> Path | None:
    """The folder holding initdb and postgres: PATH, /usr/local/bin, or a Debian-style
    /usr/lib/postgresql/<version>/bin (newest first)."""
    found = shutil.which("initdb")
    folders = [Path(found).resolve().parent] if found else []
    folders.append(Path("/usr/local/bin"))
    versions = [Path(p) for p in glob.glob("/usr/lib/postgresql/*/bin")]
    folders += sorted(versions, key=lambda p: (len(p.parent.name), p.parent.name), reverse=True)
    for folder in folders:
        if all(os.access(folder / name, os.X_OK) for name in BINARIES):
            return folder
    return None


def cluster_user() -> pwd.struct_passwd:
    """Who runs the cluster: this process's user, or `postgres` when that is root."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid())
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise RuntimeError("PostgreSQL refuses to run as root and there is no `postgres` "
                           "user to run the private cluster as: create one (useradd -r "
                           "postgres) or run the chaos run as an unprivileged user.") from None


def _unreachable_folder(path: Path, user: pwd.struct_passwd) -> Path | None:
    """The first folder above `path` that `user` cannot pass through, if any."""
    groups = {user.pw_gid} | {g for g in os.getgrouplist(user.pw_name, user.pw_gid)}
    for folder in reversed(path.parents):
        info = folder.stat()
        if info.st_uid == user.pw_uid:
            allowed = info.st_mode & 0o100
        elif info.st_gid in groups:
            allowed = info.st_mode & 0o010
        else:
            allowed = info.st_mode & 0o001
        if not allowed:
            return folder
    return None


def _become_subreaper() -> None:
    """Adopt the cluster's orphans: a killed postmaster's backends are re-parented to this
    process, which reaps them, instead of staying zombies under an init that may not reap."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the backends' state is polled instead


def _children(pid: int) -> list[int]:
    found = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.split("/")[2]))
    return found


def gone(pid: int) -> bool:
    """Dead: reaped here when it is this process's child (or adopted), else a zombie or no
    process at all."""
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        if reaped:
            return True
    except ChildProcessError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


class PrivatePostgres:
    """One cluster in `folder`, on 127.0.0.1:`port`, killable like the other targets."""

    name = "postgres"
    superuser = "postgres"

    def __init__(self, folder: Path, port: int, log_path: Path) -> None:
        binaries = find_postgres_bin()
        if binaries is None:
            raise RuntimeError("A private PostgreSQL needs its server programs (initdb, "
                               "postgres), found neither on PATH nor in /usr/local/bin or "
                               "/usr/lib/postgresql/*/bin: install PostgreSQL's server "
                               "package (Debian: postgresql).")
        self.bin = binaries
        self.folder = folder.resolve()
        self.data = self.folder / "data"
        self.port = port
        self.log_path = log_path
        self.user = cluster_user()
        self.process: subprocess.Popen | None = None
        self.starts = 0

    def url(self, database: str) -> str:
        return f"postgres://{self.superuser}@127.0.0.1:{self.port}/{database}"

    def _as_user(self) -> dict:
        if os.geteuid() != 0:
            return {}
        return {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}

    def create(self, database: str) -> str:
        """initdb, start, create `database`; return its DATABASE_URL."""
        self.folder.mkdir(parents=True, exist_ok=True)
        # The run folder is this process's (a temporary folder is 0700): the cluster's
        # user must pass through it to reach its data folder.
        parent = self.folder.parent
        if parent.stat().st_uid == os.geteuid():
            parent.chmod(parent.stat().st_mode | 0o011)
        self.folder.chmod(0o700)
        os.chown(self.folder, self.user.pw_uid, self.user.pw_gid)
        blocked = _unreachable_folder(self.folder, self.user)
        if blocked is not None:
            raise RuntimeError(f"The user {self.user.pw_name} who runs the private "
                               f"PostgreSQL cannot enter {blocked}: choose a run folder it "
                               f"can reach (--run-dir), or chmod o+x {blocked}.")
        with self.log_path.open("ab") as log:
            done = subprocess.run(
                [str(self.bin / "initdb"), "-D", str(self.data), "-U", self.superuser,
                 "--auth=trust", "--encoding=UTF8", "--no-locale", "--no-instructions"],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.folder, **self._as_user())
        if done.returncode:
            raise RuntimeError(f"initdb failed (code {done.returncode}); see {self.log_path}")
        _become_subreaper()
        self.start()
        with psycopg.connect(self._dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{database}"')
        return self.url(database)

    def _dsn(self, database: str) -> str:
        return (f"host=127.0.0.1 port={self.port} user={self.superuser} dbname={database} "
                "connect_timeout=3")

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start the postmaster (crash recovery after a kill); return once it takes
        connections."""
        argv = [str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port),
                "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
                "-c", "fsync=on", "-c", "synchronous_commit=on", "-c", "full_page_writes=on",
                "-c", "max_connections=100", "-c", "logging_collector=off"]
        with self.log_path.open("ab") as log:
            log.write(f"\n=== start {self.starts + 1} at {time.time():.3f}\n".encode())
            log.flush()
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                            cwd=self.folder, start_new_session=True,
                                            **self._as_user())
        self.starts += 1
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                psycopg.connect(self._dsn("postgres")).close()
                return
            except psycopg.OperationalError:
                if not self.running or time.monotonic() > deadline:
                    raise RuntimeError(f"The private PostgreSQL did not start; see "
                                       f"{self.log_path}") from None
                time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL every process of the cluster at once, as a crash of its machine would."""
        if not self.running:
            return
        postmaster = self.process.pid
        os.kill(postmaster, signal.SIGSTOP)  # forks no backend while they are collected
        backends = _children(postmaster)
        for pid in backends:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        os.killpg(postmaster, signal.SIGKILL)
        self.process.wait()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while not all(gone(pid) for pid in backends):
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL backends {backends} outlived a SIGKILL")
            time.sleep(0.05)

    def stop(self) -> None:
        """A fast shutdown at the end of the run (SIGINT), else the kill."""
        if not self.running:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
