"""Anchors and Tasks: the current rows from the database plus the changes, by source."""
from __future__ import annotations

from typing import Any

from django.db.models import Q
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

from agents import AnchorChanged, Event, EventType
from taskos.drawer.base import Panel

CHANGES_SHOWN = 30
# Changes people made (the admin, a pin from the drawer): listed apart, newest first, so a
# busy run's tool changes never push them out of the recent ones before anyone sees them.
PERSON_SOURCES = ("admin", "pin")
PERSON_CHANGES_SHOWN = 10
INACTIVE_SHOWN = 20
# Tool conclusions (tier 2) listed among the active anchors; the earlier ones are a folded
# list under them (drawer/panels/_anchors_state.html data-part). A tool's conclusions
# replace each other every turn or two: listed live, each one was a row inserted and
# removed again (long-1000: ~2 000 inserts, 0.9 MB of the websocket); folded, they are
# not sent until a person opens the list, and their count says how many there are.
LIVE_CONCLUSIONS = 1
# The change log's id: the folded list (drawer/panels/anchors.html data-part) it fills.
CHANGES_PART = "anchor-changes"


def _change(ev: AnchorChanged) -> dict[str, Any]:
    return {"seq": ev.seq, "turn": ev.turn, "tier": ev.tier, "old": ev.old or "",
            "new": ev.new or "", "source": ev.source, "action": ev.action}


class AnchorsPanel(Panel):
    name = "anchors"
    title = "Anchors"
    template = "drawer/panels/anchors.html"
    event_types = (EventType.ANCHOR_CHANGED,)
    # The recent changes and every change people made: a long run's thousands of tool
    # changes before those are not read.
    newest_read = {EventType.ANCHOR_CHANGED: CHANGES_SHOWN}

    def older_read(self, event_type: str) -> Q:
        return Q(payload__source__in=PERSON_SOURCES)

    def get_context(self, session, events: list[Event]) -> dict[str, Any]:
        def row(a) -> dict[str, Any]:
            return {"pk": a.pk, "tier": a.tier, "text": a.text, "source": a.source,
                    "active": a.active, "turn": a.turn}

        # Long runs retire hundreds of anchors: only the newest retired ones are read.
        active = [row(a) for a in session.anchors.filter(active=True).order_by("tier", "-pk")]
        # Newest first (by tier, then newest pk): a person's edits and the user's are
        # never among the earlier ones.
        earlier_pks = {a["pk"] for a in [a for a in active if a["tier"] == 2
                                          and a["source"] == "tool"][LIVE_CONCLUSIONS:]}
        retired = session.anchors.filter(active=False)
        inactive = sorted((row(a) for a in retired.order_by("-pk")[:INACTIVE_SHOWN]),
                          key=lambda a: (a["tier"], -a["pk"]))
        inactive_count = retired.count() if len(inactive) == INACTIVE_SHOWN else len(inactive)
        # AnchorChanged events: the panel reads no other type.
        by_people = [ev for ev in events if ev.source in PERSON_SOURCES]
        return {"anchors": active, "inactive": inactive, "inactive_count": inactive_count,
                "listed": [a for a in active if a["pk"] not in earlier_pks],
                "earlier": [a for a in active if a["pk"] in earlier_pks],
                "changes": [_change(ev) for ev in reversed(events[-CHANGES_SHOWN:])],
                "person_changes": [_change(ev) for ev in reversed(by_people[-PERSON_CHANGES_SHOWN:])],
                "active": len(active), "changes_shown": CHANGES_SHOWN,
                "admin_changes": sum(1 for ev in by_people if ev.source == "admin")}

    def badge(self, context: dict[str, Any]) -> str:
        return str(context["active"]) if context["active"] else ""

    def delta(self, session, context: dict[str, Any], events: list[Event],
              new: list[Event]) -> str | None:
        """The anchor rows (merged on the page row by row), the count, and the new changes
        on top of their turn's group; whole when the page has no change list yet. Not the
        changes while the page has their list folded: it asks for the panel whole when it
        opens it (static/js/taskos.js)."""
        held = [ev for ev in events if ev.seq < new[0].seq]
        shown = context.get("open_parts")
        folded = shown is not None and CHANGES_PART not in shown
        if not held or (len(new) > CHANGES_SHOWN and not folded):
            return None
        page_turn = held[-1].turn  # the page's newest group
        fresh = [c for c in context["changes"] if c["seq"] >= new[0].seq]
        same = [c for c in fresh if c["turn"] == page_turn]
        later = [c for c in fresh if c["turn"] != page_turn]
        oob = {**context, "session": session, "oob": True}
        parts = [render_to_string("drawer/panels/_anchors_state.html", oob),
                 render_to_string("drawer/panels/_anchor_changes_count.html", oob)]
        if folded:
            return mark_safe("\n".join(parts))
        if same:
            rows = render_to_string("drawer/panels/_anchor_change_rows.html", {"changes": same})
            parts.append(f'<div hx-swap-oob="afterbegin:#anchor-changes-turn-{page_turn}">'
                         f'{rows}</div>')
        if later:
            groups = render_to_string("drawer/panels/_anchor_changes.html", {"changes": later})
            parts.append(f'<div hx-swap-oob="afterbegin:#anchor-changes">{groups}</div>')
        return mark_safe("\n".join(parts))


class TasksPanel(Panel):
    name = "tasks"
    title = "Tasks"
    template = "drawer/panels/tasks.html"
    event_types = (EventType.TASKS_CHANGED,)

    def get_context(self, session, events: list[Event]) -> dict[str, Any]:
        tasks = list(session.tasks.order_by("created_at", "pk"))
        changes = []
        previous: dict[str, str] = {}
        # Each TASKS_CHANGED carries the whole list; the change is the difference.
        for ev in events:
            current = {str(t.get("id")): t.get("state", "") for t in ev.tasks}
            diff = [f"#{tid} {state}" for tid, state in current.items()
                    if previous.get(tid) != state]
            diff += [f"#{tid} deleted" for tid in previous if tid not in current]
            changes.append({"seq": ev.seq, "turn": ev.turn, "diff": diff,
                            "source": ev.source})
            previous = current
        done = sum(1 for t in tasks if t.state == "completed")
        return {"tasks": tasks, "done": done, "total": len(tasks),
                "changes": changes[::-1][:CHANGES_SHOWN]}

    def badge(self, context: dict[str, Any]) -> str:
        return f"{context['done']}/{context['total']}" if context["total"] else ""
