"""The websocket consumer on a real Redis channel layer: access, resync, live fragments."""
from __future__ import annotations

import asyncio
import json

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db import connections

from agents.events import event_from
from taskos.live.routing import websocket_urlpatterns
from taskos.live.sending import group_name
from taskos.worker.execute import event_sink

from .factories import add_events, budget

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("redis_layer")]

TIMEOUT = 20  # generous: a busy CI machine renders slowly, nothing here measures time


@pytest.fixture(autouse=True)
async def close_consumer_connections():
    """The consumer's queries run on asgiref's worker thread; close its connection after
    each test, or PostgreSQL refuses to drop the test database at the end."""
    yield
    await database_sync_to_async(connections.close_all)()


def communicator(session, user, query: str = "") -> WebsocketCommunicator:
    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns),
                                 f"/ws/sessions/{session.pk}/{query}")
    comm.scope["user"] = user
    return comm


async def expect_closed_forbidden(comm: WebsocketCommunicator) -> None:
    connected, _ = await comm.connect(timeout=TIMEOUT)
    assert connected  # accepted first so browsers see the code, then closed
    message = await comm.receive_output(timeout=TIMEOUT)
    assert message == {"type": "websocket.close", "code": 4403}
    await comm.wait()


async def test_anonymous_is_refused(session):
    await expect_closed_forbidden(communicator(session, AnonymousUser(), "?after=0"))


async def test_other_owner_is_refused(session, bob):
    await database_sync_to_async(add_events)(session, budget(history=1234))
    # Closed before anything of the session was sent.
    await expect_closed_forbidden(communicator(session, bob, "?after=0"))


async def test_connect_with_after_resyncs_from_the_database(session, ann):
    await database_sync_to_async(add_events)(
        session, ("USER_MESSAGE", {"text": "seen already", "source": "scenario"}),
        ("USER_MESSAGE", {"text": "missed while away", "source": "user"}), budget(history=2222))
    comm = communicator(session, ann, "?after=1")
    connected, _ = await comm.connect(timeout=TIMEOUT)
    assert connected
    html = await comm.receive_from(timeout=TIMEOUT)
    assert "missed while away" in html and "seen already" not in html
    assert "2,222" in html and 'id="panel-cost-body"' in html
    assert '<input type="hidden" id="last-seq" value="3" hx-swap-oob="true">' in html
    await comm.disconnect()


async def test_page_says_where_it_stands_then_follows_live_budget(session, ann, redis_layer):
    await database_sync_to_async(add_events)(session, budget(history=1000))
    comm = communicator(session, ann)
    connected, _ = await comm.connect(timeout=TIMEOUT)
    assert connected
    # Before the page said which seq it holds, nothing is sent: no duplicates later.
    assert await comm.receive_nothing(timeout=0.3)
    await comm.send_to(text_data=json.dumps({"after": 1}))
    first = await comm.receive_from(timeout=TIMEOUT)
    assert 'id="panel-budget-body"' in first and 'value="1"' in first

    [row] = await database_sync_to_async(add_events)(session, budget(history=1456))
    await redis_layer.group_send(group_name(session.pk),
                                 {"type": "session.event", "event": row.to_dict()})
    html = await comm.receive_from(timeout=TIMEOUT)
    # The budget's body as patches of what the page holds: the figure that changed.
    assert 'hx-swap-oob="text:panel-budget-body@' in html and "1,456" in html
    assert 'id="panel-budget-body"' not in html and "1,000" not in html
    # Only the panels a BUDGET touches are re-rendered.
    assert "panel-anchors" not in html
    assert 'id="last-seq" value="2"' in html
    await comm.disconnect()


async def test_a_burst_waits_for_the_refresh_interval_then_comes_as_one(session, ann,
                                                                        redis_layer,
                                                                        monkeypatch):
    """Events announced within TASKOS_DRAWER_REFRESH_S of the last sync are not sent one by
    one: they wait for the interval's end and arrive together."""
    from taskos.live.consumer import SessionConsumer

    monkeypatch.setattr(SessionConsumer, "IDLE_CHECK_S", 3600)  # no watchdog sync
    monkeypatch.setattr(settings, "TASKOS_DRAWER_REFRESH_S", 6)
    comm = communicator(session, ann, "?after=0")
    await comm.connect(timeout=TIMEOUT)
    await comm.receive_from(timeout=TIMEOUT)
    for text in ("first of a burst", "second of a burst"):
        [row] = await database_sync_to_async(add_events)(
            session, ("USER_MESSAGE", {"text": text, "source": "user"}))
        await redis_layer.group_send(group_name(session.pk),
                                     {"type": "session.event", "event": row.to_dict()})
    assert await comm.receive_nothing(timeout=1.0)  # the interval has not ended
    html = await comm.receive_from(timeout=TIMEOUT)
    assert "first of a burst" in html and "second of a burst" in html
    await comm.disconnect()


async def test_a_lost_message_leaves_no_gap(session, ann, redis_layer):
    comm = communicator(session, ann, "?after=0")
    await comm.connect(timeout=TIMEOUT)
    await comm.receive_from(timeout=TIMEOUT)
    rows = await database_sync_to_async(add_events)(
        session, ("USER_MESSAGE", {"text": "lost on the way", "source": "user"}),
        ("USER_MESSAGE", {"text": "arrived", "source": "user"}))
    # Only the second event's message is delivered; the first is rendered from the database.
    await redis_layer.group_send(group_name(session.pk),
                                 {"type": "session.event", "event": rows[1].to_dict()})
    html = await comm.receive_from(timeout=TIMEOUT)
    assert html.index("arrived") < html.index("lost on the way")  # both, newest first
    # A late duplicate of an event already sent produces nothing.
    await redis_layer.group_send(group_name(session.pk),
                                 {"type": "session.event", "event": rows[0].to_dict()})
    assert await comm.receive_nothing(timeout=0.3)
    await comm.disconnect()


async def test_the_publisher_reaches_the_page_through_redis(session, ann):
    comm = communicator(session, ann, "?after=0")
    await comm.connect(timeout=TIMEOUT)
    await comm.receive_from(timeout=TIMEOUT)

    def publish() -> None:
        event_sink(session).emit(event_from("BUDGET", payload=budget(history=4321)[1],
                                              turn=2))
    await database_sync_to_async(publish)()
    html = await comm.receive_from(timeout=TIMEOUT)
    assert "4,321" in html and 'data-turn="2"' in html
    await comm.disconnect()


async def test_messages_that_are_not_a_seq_are_ignored(session, ann):
    comm = communicator(session, ann)
    await comm.connect(timeout=TIMEOUT)
    await comm.send_to(text_data="hello")
    await comm.send_to(text_data=json.dumps({"after": "x"}))
    assert await comm.receive_nothing(timeout=0.3)
    await comm.disconnect()


@pytest.fixture
def ann_cookie(ann, client):
    client.force_login(ann)
    return client.cookies["sessionid"].value


async def test_full_asgi_stack_signs_in_from_the_session_cookie(session, ann_cookie):
    from taskos.asgi import application

    origin = (b"origin", b"http://127.0.0.1")
    signed_in = WebsocketCommunicator(application, f"/ws/sessions/{session.pk}/?after=0",
                                      headers=[origin, (b"cookie", f"sessionid={ann_cookie}".encode())])
    connected, _ = await signed_in.connect(timeout=TIMEOUT)
    assert connected and 'id="panel-budget-body"' in await signed_in.receive_from(timeout=TIMEOUT)
    await signed_in.disconnect()
    anonymous = WebsocketCommunicator(application, f"/ws/sessions/{session.pk}/?after=0",
                                      headers=[origin])
    await expect_closed_forbidden(anonymous)


async def test_events_whose_announcement_was_dropped_still_arrive(session, ann, monkeypatch):
    from taskos.live.consumer import SessionConsumer

    monkeypatch.setattr(SessionConsumer, "IDLE_CHECK_S", 0.1)
    comm = communicator(session, ann, "?after=0")
    await comm.connect(timeout=TIMEOUT)
    await comm.receive_from(timeout=TIMEOUT)
    # Stored, never published: as if the channel layer dropped the message at capacity.
    await database_sync_to_async(add_events)(
        session, ("USER_MESSAGE", {"text": "announcement dropped", "source": "user"}))
    html = await comm.receive_from(timeout=TIMEOUT)
    assert "announcement dropped" in html and 'id="last-seq" value="1"' in html
    await comm.disconnect()


@pytest.mark.slow
async def test_an_idle_socket_stays_open_past_two_blocking_reads(session, ann, caplog):
    """redis-py's default read timeout (5 s) equals channels_redis' blocking read: with it,
    every idle page lost its socket every few seconds with "Timeout reading". Idle for
    more than two such reads (the test ran 30 s before; the failure came within 5)."""
    import asyncio

    comm = communicator(session, ann, "?after=0")
    connected, _ = await comm.connect(timeout=TIMEOUT)
    assert connected
    await comm.receive_from(timeout=TIMEOUT)
    await asyncio.sleep(12)  # idle: no event, no message from the page
    assert await comm.receive_nothing(timeout=0.5)  # not closed, nothing pending

    def publish() -> None:
        event_sink(session).emit(event_from("BUDGET", payload=budget(history=5678)[1],
                                              turn=1))
    await database_sync_to_async(publish)()
    assert "5,678" in await comm.receive_from(timeout=TIMEOUT)  # the same socket, still live
    await comm.disconnect()
    assert "Timeout reading" not in caplog.text and "Traceback" not in caplog.text


async def test_a_sub_agent_changing_re_renders_the_parents_panel(session, ann, monkeypatch,
                                                                 make_session):
    from taskos.live.consumer import SessionConsumer
    from taskos.runs.models import Session

    monkeypatch.setattr(SessionConsumer, "IDLE_CHECK_S", 0.1)
    child = await database_sync_to_async(make_session)(owner=ann, goal="Research regions",
                                                       parent=session, status="running")
    comm = communicator(session, ann, "?after=0")
    await comm.connect(timeout=TIMEOUT)
    first = await comm.receive_from(timeout=TIMEOUT)
    assert "Research regions" in first and "status-running" in first
    # The child ends: a row update of the child, no event of the parent at all.
    await database_sync_to_async(
        Session.objects.filter(pk=child.pk).update)(status="finished", turns=3, cost=0.25)
    html = await comm.receive_from(timeout=TIMEOUT)
    assert 'panel-children-body' in html and "status-finished" in html
    assert "with sub-agents" in html  # the status header's cost includes the child's
    assert await comm.receive_nothing(timeout=0.5)  # sent once, not on every check
    await comm.disconnect()


async def test_folded_panels_wait_until_unfolded(session, ann, redis_layer):
    from .factories import model_call

    comm = communicator(session, ann, "?after=0")
    await comm.connect(timeout=TIMEOUT)
    await comm.receive_from(timeout=TIMEOUT)
    await comm.send_to(text_data=json.dumps({"open": ["budget"]}))  # the rest are folded
    rows = await database_sync_to_async(add_events)(session, budget(history=5678),
                                                    model_call(7, 6100))
    await redis_layer.group_send(group_name(session.pk),
                                 {"type": "session.event", "event": rows[1].to_dict()})
    html = await comm.receive_from(timeout=TIMEOUT)
    assert "5,678" in html and "panel-inspector-body" not in html
    await comm.send_to(text_data=json.dumps({"open": ["budget", "inspector"],
                                             "refresh": ["inspector"]}))
    unfolded = await comm.receive_from(timeout=TIMEOUT)
    # What changed while it was folded: the body as patches of what the page holds.
    assert "panel-inspector-body@" in unfolded and 'data-call="7"' in unfolded
    assert "panel-budget-body" not in unfolded
    # A page that skipped fragments of it meanwhile says so, and gets it whole.
    await comm.send_to(text_data=json.dumps({"open": ["budget", "inspector"],
                                             "refresh": ["inspector"], "stale": True}))
    whole = await comm.receive_from(timeout=TIMEOUT)
    assert 'id="panel-inspector-body" class="panel-body" hx-swap-oob="true"' in whole
    await comm.disconnect()


async def test_a_status_written_after_the_last_event_still_reaches_the_page(session, ann,
                                                                          monkeypatch):
    """The worker stores SESSION_FINISHED, then writes the final status on the row: a sync
    rendered in between showed "running" and nothing came after it to correct the page."""
    from taskos.live.consumer import SessionConsumer
    from taskos.runs.models import Session

    monkeypatch.setattr(SessionConsumer, "IDLE_CHECK_S", 0.1)
    await database_sync_to_async(add_events)(
        session, ("SESSION_FINISHED", {"status": "finished", "final_answer": "Done.", "turns": 1}))
    comm = communicator(session, ann, "?after=0")
    await comm.connect(timeout=TIMEOUT)
    first = await comm.receive_from(timeout=TIMEOUT)
    assert 'id="last-seq" value="1"' in first and 'data-status="running"' in first
    # No event follows: only the row changes, as the worker's last write.
    await database_sync_to_async(Session.objects.filter(pk=session.pk).update)(status="finished")
    html = await comm.receive_from(timeout=TIMEOUT)
    assert 'data-status="finished"' in html
    assert await comm.receive_nothing(timeout=0.5)  # sent once, not on every check
    await comm.disconnect()


async def test_a_sync_with_nothing_new_does_not_swallow_a_status_change(session, ann,
                                                                        monkeypatch):
    """The worker writes a waiting or final status on the row after its last event. A sync
    that fires after that write with no new event sends nothing; it used to note the new
    status as shown, so the watchdog never sent it and the page stayed at "running"."""
    from taskos.live.consumer import SessionConsumer
    from taskos.runs.models import Session

    checks_may_run = asyncio.Event()
    real_watch = SessionConsumer.watch

    async def held_watch(self):
        await checks_may_run.wait()
        await real_watch(self)

    monkeypatch.setattr(SessionConsumer, "watch", held_watch)
    monkeypatch.setattr(SessionConsumer, "IDLE_CHECK_S", 0.1)
    monkeypatch.setattr(settings, "TASKOS_DRAWER_REFRESH_S", 0)
    await database_sync_to_async(add_events)(session, budget())
    comm = communicator(session, ann, "?after=0")
    await comm.connect(timeout=TIMEOUT)
    first = await comm.receive_from(timeout=TIMEOUT)
    assert 'data-status="running"' in first
    await database_sync_to_async(Session.objects.filter(pk=session.pk).update)(
        status="waiting_for_approval")
    # An announcement with nothing new behind it: the consumer syncs and sends nothing.
    await get_channel_layer().group_send(group_name(session.pk),
                                         {"type": "session.event", "event": {}})
    assert await comm.receive_nothing(timeout=1.0)
    checks_may_run.set()
    html = await comm.receive_from(timeout=TIMEOUT)
    assert 'data-status="waiting_for_approval"' in html
    await comm.disconnect()
