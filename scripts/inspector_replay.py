"""The live inspector's websocket bytes over a finished session, replayed call by call.

Deterministic where drawer_bench.py is not (it depends on when the browser's refresh
falls): it renders the inspector's update for every `--every` consecutive calls of a
stored session, as a live page following it gets them (the panel's delta, then the
feed's patches of elements it was sent whole), and prints the bytes by the element each
fragment targets, grouped as drawer_bench.py groups them.

With --check it also applies each update's fragments to a model of the page's message
list (ids and HTML of its rows, in order) and compares it with a fresh render of the same
call after every update: a delta that leaves a row out of place, or one too many, fails.

    DATABASE_URL=sqlite:///run.sqlite3 .venv/bin/python manage.py runtask --scenario long-1000
    DATABASE_URL=sqlite:///run.sqlite3 .venv/bin/python scripts/inspector_replay.py [--session 1]
        [--every 3] [--check]
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskos.settings")

import django  # noqa: E402

django.setup()

from django.template.loader import render_to_string  # noqa: E402

from scripts.drawer_bench import TARGET, target_group  # noqa: E402
from taskos.drawer.base import render_panel  # noqa: E402
from taskos.drawer.events import load_events  # noqa: E402
from taskos.drawer.feed import EventFeed  # noqa: E402
from taskos.drawer.panels.inspector import InspectorPanel  # noqa: E402
from taskos.drawer.stream import fragments  # noqa: E402
from taskos.runs.models import Session  # noqa: E402

# The page's message list: the <ol id="inspector-messages"> of the panel's body.
LIST = re.compile(r'<ol class="messages" id="inspector-messages"[^>]*>(.*?)</ol>', re.S)
ROW = re.compile(r'<li\b[^>]*>.*?</li>', re.S)
ROW_ID = re.compile(r'<li\b[^>]*?\bid="([^"]+)"')
OPENING = re.compile(r'^<([a-z]+)\b([^>]*)>')
ELEMENT_ID = re.compile(r'\bid="([^"]+)"')
SWAP = re.compile(r'\bhx-swap-oob="([^"]+)"')
INSERT = re.compile(r'^(beforeend|afterbegin|beforebegin|afterend):#(.+)$')


def rows_of(html: str) -> list[tuple[str, str]]:
    """The rows of a message list (or of a fragment carrying rows): (id, HTML) in order,
    without the out-of-band attribute they arrive with, nor the mark that has the feed
    give them a revision (taskos/drawer/feed.py NOTED)."""
    return [(ROW_ID.match(row).group(1),
             row.replace(' hx-swap-oob="true"', "").replace(" data-noted", ""))
            for row in ROW.findall(html)]


class PageList:
    """What static/js/fragments.js makes of the message list, for the fragments the
    inspector's delta sends (before the feed turns elements sent whole into patches)."""

    def __init__(self, body: str) -> None:
        found = LIST.search(body)
        self.rows = rows_of(found.group(1)) if found else []

    def at(self, dom_id: str) -> int | None:
        return next((i for i, (row_id, _) in enumerate(self.rows) if row_id == dom_id), None)

    def apply(self, part: str) -> None:
        found = OPENING.match(part.strip())
        swap = found and SWAP.search(found.group(2))
        if not swap:
            return
        named = ELEMENT_ID.search(found.group(2))
        dom_id, how = named and named.group(1), swap.group(1)
        where = INSERT.match(how)
        if where:
            self.insert(where.group(1), where.group(2), rows_of(part.strip()[found.end():]))
            return
        index = self.at(dom_id) if dom_id else None
        if index is None or how == "attributes":
            return
        if how == "true":
            self.rows[index] = rows_of(part)[0]
        elif how == "delete":
            del self.rows[index]
        elif how == "delete-from":
            while index < len(self.rows) and "data-tail" not in self.rows[index][1]:
                del self.rows[index]
        elif how.startswith("delete-through:#"):
            last = self.at(how.split("#", 1)[1])
            if last is not None and last >= index:
                del self.rows[index:last + 1]
        else:
            raise ValueError(f"a fragment the page does not apply: {how}")

    def insert(self, how: str, target: str, rows: list[tuple[str, str]]) -> None:
        ids = {row_id for row_id, _ in rows}
        for i, (row_id, _) in enumerate(self.rows):  # a row shown already takes its place
            if row_id in ids:
                self.rows[i] = next(row for row in rows if row[0] == row_id)
        rows = [row for row in rows if self.at(row[0]) is None]
        if target == "inspector-messages":
            at = len(self.rows) if how == "beforeend" else 0
        else:
            index = self.at(target)
            if index is None:
                return
            at = index if how == "beforebegin" else index + 1
        self.rows[at:at] = rows


def kind_of(part: str) -> str:
    """What a fragment does to the message list: rows inserted, a row sent whole or
    patched in place, rows removed; or "figures" (the call's head, badge, list of calls)."""
    found = OPENING.match(part.strip())
    swap = found and SWAP.search(found.group(2))
    how = swap.group(1) if swap else ""
    named = found and ELEMENT_ID.search(found.group(2))
    target = how.split(":", 1)[1] if ":" in how else (named.group(1) if named else "")
    if not (target.startswith("#inspector-msg-") or target.startswith("inspector-msg-")
            or target.startswith("#inspector-part-")
            or target in ("#inspector-messages", "inspector-messages")) or how == "attributes":
        return "figures"
    if INSERT.match(how):
        return "rows inserted"
    if how.startswith("delete"):
        return "rows removed"
    return "row sent whole in place" if how == "true" else "row patched in place"


def fresh_body(panel: InspectorPanel, session: Session, events: list) -> str:
    context = panel.get_context(session, events)
    return render_to_string(panel.template, {**context, "session": session})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--session", type=int, help="session id (default: the newest)")
    parser.add_argument("--every", type=int, default=1,
                        help="calls per update (a live page refreshes at most once a second)")
    parser.add_argument("--check", action="store_true",
                        help="check the page's message list against a fresh render each time")
    args = parser.parse_args()
    session = (Session.objects.get(pk=args.session) if args.session
               else Session.objects.order_by("-pk").first())
    panel = InspectorPanel()
    events = load_events(session, panel.event_types)
    feed = EventFeed([panel])
    first = fragments(render_panel(panel, session, events[:1], oob=True))
    feed.not_sent(panel.name, first, skip=False)
    page = PageList(fresh_body(panel, session, events[:1])) if args.check else None
    by_target: dict[str, int] = {}
    by_kind: dict[str, int] = {}
    updates = mismatches = 0
    for start in range(1, len(events), args.every):
        end = min(start + args.every, len(events))
        shown, new = events[:end], events[start:end]
        html = render_panel(panel, session, shown, oob=True, new=new)
        parts = fragments(html)
        if page is not None:
            for part in parts:
                page.apply(part)
            expected = PageList(fresh_body(panel, session, shown)).rows
            if page.rows != expected:
                mismatches += 1
                if mismatches <= 3:
                    print(f"call {shown[-1].call}: the page's list differs from a fresh "
                          f"render ({len(page.rows)} rows vs {len(expected)})")
                page.rows = expected
        for part in feed.not_sent(panel.name, parts, skip=True):
            found = TARGET.match(part)
            target = target_group((found.group(1) or found.group(2)) if found else "other")
            by_target[target] = by_target.get(target, 0) + len(part.encode())
            by_kind[kind_of(part)] = by_kind.get(kind_of(part), 0) + len(part.encode())
        updates += 1
    total = sum(by_target.values())
    print(f"session {session.pk}: {len(events)} calls, {updates} updates of {args.every} "
          f"call(s): inspector {total / 1000:.0f} KB")
    print("by target: " + ", ".join(f"{target} {n / 1000:.1f} KB" for target, n in
                                    sorted(by_target.items(), key=lambda i: -i[1])))
    print("by kind: " + ", ".join(f"{kind} {n / 1000:.1f} KB" for kind, n in
                                  sorted(by_kind.items(), key=lambda i: -i[1])))
    if page is not None:
        print(f"page list equal to a fresh render after {updates - mismatches} of {updates} "
              "updates")


if __name__ == "__main__":
    main()
