"""Rows of a discarded turn are never read as current (issue 25 item 2).

A worker killed inside a turn leaves that turn's committed events behind; the resume marks
them discarded and runs the turn again under the same call numbers. The discarded copy of
the interrupted call may hold a {"tools_of_call": N} marker where the live one holds the
schemas, so a reader that finds "call N" among every row, or remembers call N from before
the resume, shows the wrong call or fails. Here the real engine and store are killed in a
turn and resumed, then every page, inspector, export and a replay are read.
"""
from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest
from django.utils import timezone

from taskos.drawer.feed import EventFeed
from taskos.drawer.panels import PANELS
from taskos.drawer.stream import render_update
from taskos.ops.chaos.pages import check_pages
from taskos.replays.sessions import create_replay
from taskos.runs import services
from taskos.runs.models import ArchivedTurn, Session, SessionEvent
from taskos.store.django_store import DjangoStore
from taskos.worker.tasks import run_session

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("channels_redis_url")]

KILLED_TURN = 4  # its save: the turn has made a summary call and an agent call by then


class WorkerKilled(BaseException):
    """Stands in for SIGKILL: nothing catches it, nothing marks the session failed."""


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("ivy", password="ivy-secret-42")


@pytest.fixture
def killed(owner, sim_profile, monkeypatch):
    """A session whose worker died inside a turn, before the resume: (session, resume)."""
    # A small window: the run compacts, so summary calls are among the calls read.
    session = services.create_session(owner, "", "sales-report", sim_profile, 6000, {})
    original = DjangoStore.save_state

    def save_state(self, session_id, state):
        if state["turn"] == KILLED_TURN:
            raise WorkerKilled
        original(self, session_id, state)

    monkeypatch.setattr(DjangoStore, "save_state", save_state)
    with pytest.raises(WorkerKilled):
        run_session.apply(args=[session.pk], throw=True)
    monkeypatch.setattr(DjangoStore, "save_state", original)

    def resume():
        # What the dead worker leaves: a lease no longer renewed; the message comes again.
        Session.objects.filter(pk=session.pk).update(
            lease_expires=timezone.now() - dt.timedelta(seconds=1))
        run_session.apply(args=[session.pk])
        session.refresh_from_db()
        assert session.status == "finished"

    return session, resume


def calls(session, **flags):
    return list(SessionEvent.all_objects.filter(session=session, type="MODEL_CALL", **flags)
                .order_by("seq").values_list("seq", "payload__call", "payload__request__tools"))


def schema_names(tools) -> list[str]:
    tools = json.loads(tools) if isinstance(tools, str) else tools
    return [tool["function"]["name"] for tool in tools]


def test_every_page_inspector_and_export_of_a_resumed_session_reads_live_rows(killed, owner,
                                                                               client):
    session, resume = killed
    resume()
    live, discarded = calls(session, discarded=False), calls(session, discarded=True)
    # The case at hand: a number on two rows, the discarded copy holding only a marker.
    twice = {number for _, number, _ in live} & {number for _, number, _ in discarded}
    assert any(isinstance(tools, dict) for _, number, tools in discarded if number in twice)
    sent = schema_names(live[0][2])  # the first call stores the schemas whole
    assert "read_file" in sent

    client.force_login(owner)
    base = f"/sessions/{session.pk}"
    for url in (f"{base}/", f"{base}/events?after=0", f"{base}/transcript",
                f"{base}/inspect", f"{base}/archive"):
        response = client.get(url)
        assert response.status_code == 200, url
        assert b"tools_of_call" not in response.content, url
    for _, number, tools in live:
        inspector = client.get(f"{base}/inspect?call={number}")
        assert inspector.status_code == 200, number
        text = inspector.content.decode()
        assert f'data-call="{number}"' in text and "tools_of_call" not in text
        assert "tool schemas not found" not in text
        body = client.get(f"{base}/calls/{number}.json")
        assert body.status_code == 200, number
        if tools is not None:  # calls that offered tools: the schemas, not a marker
            assert schema_names(json.loads(body.content)["tools"]) == sent
            assert all(f"<b>{name}</b>" in text or name in text for name in sent)
        record = client.get(f"{base}/calls/{number}/record.json")
        assert record.status_code == 200 and json.loads(record.content)["seq"] in {
            seq for seq, n, _ in live if n == number}  # the live row, never the copy
    for row in ArchivedTurn.objects.filter(session=session)[:5]:
        assert client.get(f"{base}/refs/{row.ref}").status_code == 200

    # A replay of the resumed session plays its live calls only, and compares with it.
    replay = create_replay(session, owner)
    run_session.apply(args=[replay.pk])
    replay.refresh_from_db()
    assert replay.status == "finished", replay.error
    assert client.get(f"{base}/compare").status_code == 200


def test_the_inspector_never_shows_the_discarded_copy_of_a_call_it_showed_before(killed, owner,
                                                                                  client):
    """A web process that showed call N while its turn ran must show the call run again
    under that number after the resume, not the detail it kept of the copy."""
    session, resume = killed
    number = calls(session)[-1][1]  # the interrupted turn's last call, live for now
    client.force_login(owner)
    before = client.get(f"/sessions/{session.pk}/inspect?call={number}")
    assert before.status_code == 200 and "[resumed]" not in before.content.decode()
    resume()
    after = client.get(f"/sessions/{session.pk}/inspect?call={number}")
    assert after.status_code == 200
    # The call run again after the resume was sent the engine's resume note.
    assert "[resumed]" in after.content.decode()


def test_a_live_page_drops_the_events_a_resume_discarded(killed):
    """A page following the run held the interrupted turn's events: the update after the
    resume leaves none of them in its feed or on the page."""
    session, resume = killed
    feed = EventFeed(PANELS)
    held = render_update(session, 0, full=True, feed=feed).last_seq
    resume()
    gone = set(SessionEvent.all_objects.filter(session=session, discarded=True)
               .values_list("seq", flat=True))
    assert gone and max(gone) <= held  # the page had them
    update = render_update(session, held, feed=feed)
    assert not gone & {ev.seq for events in feed.by_type.values() for ev in events}
    # The transcript comes whole (the page's copy had the discarded entries) without them.
    assert re.search(r'<div id="transcript" [^>]*hx-swap-oob="true"', update.html)
    shown = {int(seq) for seq in re.findall(r'<article [^>]*id="ev-(\d+)"', update.html)}
    assert shown and not gone & shown
    fresh = render_update(session, 0, full=True)
    inspector = re.compile(r'<div class="inspector"[^>]*data-call="(\d+)"')
    assert inspector.findall(update.html) == inspector.findall(fresh.html)


def test_the_chaos_runs_page_check_opens_a_resumed_session_without_an_error(killed):
    """What the chaos run does after its kills (taskos/ops/chaos/pages.py), on the case
    that made it cry no wolf: every page of a resumed session opens."""
    session, resume = killed
    resume()
    found = check_pages(session)
    assert found["failed"] == [] and found["page_errors"] == 0
    live_calls = len(calls(session, discarded=False))
    assert found["requests"] == 6 + 3 * live_calls


# Readers take rows from SessionEvent.objects, which hides discarded events; these modules
# alone see every row, each for a reason that is not showing the session as it is now.
ALL_ROWS_ALLOWED = {
    "taskos/runs/models.py": "defines the managers",
    "taskos/store/event_log.py": "numbers events after every stored seq; marks discards",
    "taskos/store/django_store.py": "finds the last committed event's time to undo anchors",
    "taskos/store/call_messages.py": "a call's message parts, addressed by seq",
    "taskos/ops/chaos/compare.py": "counts discarded events and double executions",
}


def test_only_writers_and_the_chaos_audit_read_discarded_events():
    root = Path(__file__).resolve().parents[2]
    users = {str(path.relative_to(root)) for path in (root / "taskos").rglob("*.py")
             if re.search(r"\.all_objects\b", path.read_text(encoding="utf-8"))
             and "migrations" not in path.parts}
    assert users <= set(ALL_ROWS_ALLOWED), sorted(users - set(ALL_ROWS_ALLOWED))
