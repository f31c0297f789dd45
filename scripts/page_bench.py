"""The session page's server time, in parts, without a browser.

Renders /sessions/N/ with Django's test client (gzip asked for, as a browser does) and,
in the same rounds, the parts the page is made of: the transcript page, the drawer's event
reads (`panel_events`), each panel's context and template, the workspace listing. Prints
the median and least CPU time (this process's, less sensitive to a busy machine than
wall time) and the median wall time of each, over interleaved rounds.

    cp /tmp/drawer-bench-*/taskos.sqlite3 /tmp/long1000.sqlite3   # a finished run
    .venv/bin/python scripts/page_bench.py --db /tmp/long1000.sqlite3 [--session 1] [--runs 10]

A finished long-1000 session to read comes from `scripts/drawer_bench.py` (its stack's
folder, printed nowhere but kept under the system's temp folder as drawer-bench-*) or from
`manage.py runtask --scenario long-1000` into a SQLite DATABASE_URL. Work on a copy: the
page reads only, but opening the file in WAL mode writes beside it, and a session of no
one (runtask's) is given an owner to be shown to.

Numbers, not pass/fail (tests stay free of timing thresholds).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, help="a SQLite file (else DATABASE_URL as set)")
    parser.add_argument("--session", type=int, default=None,
                        help="the session's number (default: the one with most events)")
    parser.add_argument("--runs", type=int, default=10)
    options = parser.parse_args()
    if options.db is not None:
        os.environ["DATABASE_URL"] = f"sqlite:///{options.db.resolve()}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskos.settings")
    os.environ.setdefault("TASKOS_SECRET_KEY", "page-bench-only-" + "x" * 40)
    os.environ.setdefault("TASKOS_ALLOWED_HOSTS", "testserver")
    import django
    django.setup()
    print(run(options.session, options.runs))


def run(pk: int | None, runs: int) -> str:
    from django.db.models import Count
    from django.template.loader import render_to_string
    from django.test import Client

    from taskos.drawer import stream
    from taskos.drawer.base import panel_events
    from taskos.drawer.panels import PANELS
    from taskos.runs.models import Session
    from taskos.workspaces.page import workspace_context

    sessions = Session.objects.select_related("profile", "owner")
    session = (sessions.get(pk=pk) if pk is not None else
               sessions.annotate(n=Count("events")).order_by("-n").first())
    if session.owner is None:
        # `manage.py runtask` stores a session of no one, and the page shows a session to
        # its owner only: the copy's session is given one (the reason to work on a copy).
        from django.contrib.auth import get_user_model
        session.owner, _ = get_user_model().objects.get_or_create(username="page-bench")
        session.save(update_fields=["owner"])
    client = Client()
    client.force_login(session.owner)
    url = f"/sessions/{session.pk}/"

    cpu: dict[str, list[float]] = defaultdict(list)
    wall: dict[str, list[float]] = defaultdict(list)

    def timed(name: str, work):
        started, used = time.perf_counter(), time.process_time()
        result = work()
        cpu[name].append(1000 * (time.process_time() - used))
        wall[name].append(1000 * (time.perf_counter() - started))
        return result

    first = client.get(url, HTTP_ACCEPT_ENCODING="gzip")  # templates loaded, not timed
    assert first.status_code == 200, first.status_code
    for _ in range(runs):
        timed("the page (test client, gzip)", lambda: client.get(url, HTTP_ACCEPT_ENCODING="gzip"))
        timed("transcript page", lambda: stream.transcript_page(session, 10**12))
        events = timed("drawer event reads", lambda: panel_events(session, PANELS))
        for panel in PANELS:
            own = [ev for ev in events if panel.handles(ev.type) and panel.wants(ev)]
            context = timed(f"  {panel.name} context", lambda: panel.get_context(session, own))
            timed(f"  {panel.name} template", lambda: render_to_string(
                panel.template, {**context, "session": session, "on_page": True}))
        timed("workspace listing", lambda: workspace_context(session))
    turns, count = session.turns, session.events.count()
    lines = [f"session #{session.pk} ({session.scenario or 'no scenario'}, {session.status}, "
             f"{turns} turns, {count} events), {runs} rounds, load average "
             f"{' '.join(f'{n:.1f}' for n in os.getloadavg())}",
             f"page: {len(first.content) / 1024:.0f} KB sent "
             f"({first.get('Content-Encoding') or 'uncompressed'})",
             f"{'':34} {'CPU median':>10} {'CPU least':>10} {'wall median':>12}  (ms)"]
    for name, spent in cpu.items():
        lines.append(f"{name:34} {statistics.median(spent):10.1f} {min(spent):10.1f} "
                     f"{statistics.median(wall[name]):12.1f}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
