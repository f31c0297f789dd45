"""`python manage.py up` (also the `taskos` command): run all of TaskOS on this machine."""
from __future__ import annotations

import os
import secrets
import signal

from django.conf import settings
from kombu.exceptions import OperationalError
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from taskos.celery import app
from taskos.ops.launcher import Launcher, LaunchError
from taskos.ops.management.storage import StorageErrorsInOneLine
from taskos.runs import queue
from taskos.runs.models import Session
from taskos.worker.sweeper import mark_enqueued

ADMIN_USERNAME = "admin"
# The simulated model's answer time on this command (TASKOS_SIM_LATENCY_MS overrides it):
# at 0 a whole demo run ends before a person has found the drawer.
DEMO_SIM_LATENCY_MS = "200"


def ensure_admin() -> str:
    """Make sure the local superuser exists; return how to log in."""
    users = get_user_model().objects
    wanted = os.environ.get("TASKOS_ADMIN_PASSWORD")
    user = users.filter(username=ADMIN_USERNAME).first()
    if user is None:
        password = wanted or secrets.token_urlsafe(12)
        users.create_superuser(ADMIN_USERNAME, "", password)
        if wanted:
            return f"{ADMIN_USERNAME} with the password from TASKOS_ADMIN_PASSWORD"
        return (f"{ADMIN_USERNAME} / {password}   (shown only now; change it with "
                f"`python manage.py changepassword {ADMIN_USERNAME}`)")
    if wanted:
        if not user.check_password(wanted):
            user.set_password(wanted)
            user.save(update_fields=["password"])
        return f"{ADMIN_USERNAME} with the password from TASKOS_ADMIN_PASSWORD"
    return (f"{ADMIN_USERNAME} with the password printed on the first start "
            f"(reset it with `python manage.py changepassword {ADMIN_USERNAME}`)")


def services_env(redis_url: str) -> dict[str, str]:
    """The worker's and web server's environment: this one, with the Redis in use and the
    demo's simulated-model pace unless TASKOS_SIM_LATENCY_MS is set."""
    return {"TASKOS_SIM_LATENCY_MS": DEMO_SIM_LATENCY_MS, **os.environ, "REDIS_URL": redis_url,
            "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE",
                                                     "taskos.settings")}


def resume_interrupted(redis_url: str) -> int:
    """Queue again the sessions a previous stop interrupted (their queue died with Redis)."""
    app.conf.broker_url = redis_url
    app.conf.result_backend = redis_url
    pending = list(Session.objects.filter(status__in=Session.ACTIVE_STATUSES)
                   .values_list("pk", flat=True))
    for pk in pending:
        queue.run_session(pk)
        mark_enqueued(pk)
    return len(pending)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


# Both stop signals, whatever the shell left them as: a background job (`taskos &`) or
# `nohup taskos` inherits SIGINT ignored, and Python then keeps it ignored, so Ctrl-C
# (or `kill -INT`) did nothing and the web server, worker and Redis ran on.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
WORKER_WAIT_S = 60.0  # how long the start waits for the worker's first answer


def worker_answers(redis_url: str) -> bool:
    """The Celery worker replies to a ping on the broker it serves."""
    app.conf.broker_url = redis_url
    try:
        return bool(app.control.ping(timeout=1.0))
    except (OSError, OperationalError):  # the broker's connection dropped: not ready yet
        return False


def boxed(lines: list[str]) -> str:
    width = max(len(line) for line in lines)
    rule = "+" + "-" * (width + 2) + "+"
    return "\n".join(["", rule, *(f"| {line.ljust(width)} |" for line in lines), rule, ""])


class Command(StorageErrorsInOneLine, BaseCommand):
    help = "Migrate, then run Redis, a Celery worker and the web server until Ctrl-C."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1", help="web address (127.0.0.1)")
        parser.add_argument("--port", type=int, default=8000, help="web port (8000)")
        parser.add_argument("--redis-port", type=int, default=6390,
                            help="port of the private Redis started when REDIS_URL "
                                 "does not answer (6390)")
        parser.add_argument("--concurrency", type=int, default=2,
                            help="sessions the worker runs at once (2)")

    def warn_about_hosts(self, host: str) -> None:
        allowed = settings.ALLOWED_HOSTS
        if host in ("127.0.0.1", "localhost") or host in allowed or "*" in allowed:
            return
        self.stdout.write(self.style.WARNING(
            f"Listening on {host}: requests are answered only for the host names in "
            f"TASKOS_ALLOWED_HOSTS (now {','.join(allowed) or 'empty'}); add the name or "
            "address people will use."))

    def handle(self, *args, **options):
        launcher = Launcher(host=options["host"], port=options["port"],
                            redis_port=options["redis_port"],
                            concurrency=options["concurrency"], base_dir=settings.BASE_DIR,
                            say=self.progress)
        previous = {signum: signal.signal(signum, _raise_interrupt) for signum in STOP_SIGNALS}
        say = self.progress
        try:
            launcher.check_ports()
            self.warn_about_hosts(options["host"])
            say("migrating…")
            call_command("migrate", interactive=False, verbosity=0)
            login = ensure_admin()
            redis_url = launcher.resolve_redis(os.environ.get("REDIS_URL"))
            say("starting the worker and the web server…")
            launcher.start_services(services_env(redis_url))
            say("web server ready")
            if launcher.ready_within(lambda: worker_answers(redis_url), WORKER_WAIT_S):
                say("worker ready")
            else:  # a slow machine: the page works, sessions wait in the queue meanwhile
                say(f"the worker has not answered in {WORKER_WAIT_S:.0f} s; sessions wait "
                    f"in the queue until it does (its log: {launcher.log_path('worker')})")
            if launcher.started_own_redis:
                resumed = resume_interrupted(redis_url)
                if resumed:
                    self.stdout.write(f"Resuming {resumed} session(s) interrupted by the "
                                      "last stop.")
            url = f"http://{options['host']}:{options['port']}/"
            self.stdout.write(f"Worker and web server logs: {launcher.log_path('*').parent}")
            # Last, in a box: what a person needs to open the dashboard.
            self.stdout.write(self.style.SUCCESS(boxed([f"TaskOS is running: open {url}",
                                                        f"Log in as {login}",
                                                        "Press Ctrl-C to stop."])))
            self.stdout.flush()
            launcher.supervise()
        except KeyboardInterrupt:
            self.stdout.write("\nStopping TaskOS…")
        except LaunchError as exc:
            raise CommandError(str(exc)) from None
        finally:
            launcher.stop()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        self.stdout.write("TaskOS stopped.")

    def progress(self, text: str) -> None:
        """One line of start-up progress, shown at once (the output may be a pipe or a file)."""
        self.stdout.write(text)
        self.stdout.flush()
