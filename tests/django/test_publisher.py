"""The worker's event sink (the event log, announcing to the live pages): every event is
stored, then sent to the session's group (feature W5)."""
import logging
import socket

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.db import connection

from agents.events import EventType, event_from
from taskos.live.sending import group_name
from taskos.runs.models import Session, SessionEvent
from taskos.worker.execute import event_sink

pytestmark = pytest.mark.django_db


def _event(event_type, turn=1, **payload):
    return event_from(event_type, payload=payload, turn=turn)


@pytest.mark.django_db(transaction=True)  # the send runs in another thread: it sees commits
def test_event_is_stored_before_it_is_sent_and_arrives_in_the_group(
        channels_redis_url, make_session, monkeypatch):
    session = make_session()
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(group_name(session.pk), channel)
    stored_at_send = []
    real_send = layer.group_send

    def row_exists(seq):
        try:
            return SessionEvent.objects.filter(session=session, seq=seq).exists()
        finally:
            connection.close()  # this helper thread's connection must not outlive the test

    async def recording_send(group, message):
        stored_at_send.append(await sync_to_async(row_exists)(message["event"]["seq"]))
        await real_send(group, message)

    monkeypatch.setattr(layer, "group_send", recording_send)
    publisher = event_sink(session)
    publisher.emit(_event(EventType.BUDGET, window=8000, zones={"system": 300}))
    message = async_to_sync(layer.receive)(channel)
    assert stored_at_send == [True]
    assert message["type"] == "session.event"
    assert group_name(session.pk) == f"session.{session.pk}"
    event = message["event"]
    assert (event["type"], event["seq"], event["session_id"]) == ("BUDGET", 1, str(session.pk))
    assert event["payload"]["zones"] == {"system": 300}
    row = SessionEvent.objects.get(session=session, seq=1)
    assert row.type == "BUDGET" and row.payload == event["payload"] and row.turn == 1


def test_seq_continues_from_what_is_stored(make_session, channels_redis_url):
    session = make_session()
    first = event_sink(session)
    first.emit(_event(EventType.SESSION_STARTED))
    first.emit(_event(EventType.TURN_STARTED))
    event_sink(session.pk).emit(_event(EventType.TURN_STARTED, turn=2))
    assert list(session.events.values_list("seq", flat=True)) == [1, 2, 3]


def test_two_publishers_on_one_session_never_clash(make_session, channels_redis_url):
    session = make_session()
    old, new = event_sink(session), event_sink(session)
    for _ in range(3):
        old.emit(_event(EventType.TURN_STARTED))
        new.emit(_event(EventType.TURN_STARTED))
    assert list(session.events.values_list("seq", flat=True)) == [1, 2, 3, 4, 5, 6]


def test_session_counters_follow_the_events(make_session, channels_redis_url):
    session = make_session()
    publisher = event_sink(session)
    publisher.emit(_event(EventType.SESSION_STARTED))
    session.refresh_from_db()
    assert session.status == "running" and session.started_at is not None
    publisher.emit(_event(EventType.MODEL_CALL, turn=1, input_tokens=1500, cost=0.002))
    publisher.emit(_event(EventType.MODEL_CALL, turn=2, input_tokens=4200, cost=0.003))
    publisher.emit(_event(EventType.MODEL_CALL, turn=2, input_tokens=900, kind="summary"))
    publisher.emit(_event(EventType.COMPACTION, turn=2, trigger="rolling"))
    publisher.emit(_event(EventType.COMPACTION, turn=2, trigger="manual", noop=True))
    session.refresh_from_db()
    assert (session.turns, session.total_input_tokens, session.peak_input_tokens,
            session.compactions) == (2, 6600, 4200, 1)
    assert session.cost == pytest.approx(0.005)
    publisher.emit(_event(EventType.SESSION_FINISHED, turn=3, status="finished",
                          final_answer="| region | sales |", turns=3))
    session.refresh_from_db()
    assert session.status == "finished" and session.finished_at is not None
    assert session.final_answer == "| region | sales |" and session.turns == 3
    assert session.total_input_tokens == 6600  # the calls' own figures, kept as they came


def test_unreachable_redis_warns_once_and_keeps_storing(settings, make_session, caplog):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    settings.CHANNEL_LAYERS = {"default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [{"address": f"redis://127.0.0.1:{closed_port}/0",
                              "socket_connect_timeout": 1}]}}}
    session = make_session()
    publisher = event_sink(session)
    with caplog.at_level(logging.WARNING, logger="taskos.live"):
        for turn in range(1, 5):
            publisher.emit(_event(EventType.TURN_STARTED, turn=turn))
    assert session.events.count() == 4
    warnings = [r for r in caplog.records if r.name == "taskos.live"]
    assert len(warnings) == 1 and "still stored" in warnings[0].getMessage()


def test_publisher_accepts_a_session_id_string(make_session, channels_redis_url):
    session = make_session()
    event_sink(str(session.pk)).emit(_event(EventType.SESSION_STARTED))
    assert Session.objects.get(pk=session.pk).events.count() == 1


def test_a_held_batch_whose_seqs_were_taken_is_numbered_after_them(make_session,
                                                                    channels_redis_url):
    """Two executors on one session (one lost its lease): the batch stored second clashes on
    every seq and goes in after the first, with no row of it lost or doubled."""
    from django.db import transaction
    session = make_session()
    first, second = event_sink(session), event_sink(session)
    first.hold(), second.hold()
    mine = [_event(EventType.TURN_STARTED, turn=t) for t in (1, 2, 3)]
    theirs = [_event(EventType.TURN_STARTED, turn=t) for t in (7, 8)]
    for event in mine:
        first.emit(event)
    for event in theirs:
        second.emit(event)
    assert [e.seq for e in theirs] == [1, 2]  # both numbered from the same stored max
    with transaction.atomic():
        first.flush()
    with transaction.atomic():
        second.flush()
    assert [e.seq for e in theirs] == [4, 5]
    rows = list(session.events.values_list("seq", "turn"))
    assert rows == [(1, 1), (2, 2), (3, 3), (4, 7), (5, 8)]


@pytest.mark.django_db(transaction=True)  # announcing waits for the commit
def test_an_unannounced_batch_is_announced_by_the_next_wait(make_session, channels_redis_url,
                                                             monkeypatch):
    """flush(announce=False) stores without a send; the next announcing flush sends the
    newest seq even with no event of its own; a batch with the session's last events is
    always sent."""
    from django.db import transaction

    from taskos.live import sending
    sent: list[int] = []
    monkeypatch.setattr(sending.GroupSender, "send",
                        lambda self, messages, wait=True: sent.extend(
                            m["event"]["seq"] for m in messages))
    session = make_session()
    publisher = event_sink(session)
    publisher.hold()
    publisher.emit(_event(EventType.TURN_STARTED))
    publisher.emit(_event(EventType.MODEL_CALL, input_tokens=10))
    with transaction.atomic():
        publisher.flush(announce=False)
    assert sent == [] and session.events.count() == 2
    publisher.flush(announce=True)  # nothing held: the stored newest is told
    assert sent == [2]
    publisher.emit(_event(EventType.SESSION_WAITING))
    with transaction.atomic():
        publisher.flush(announce=False)
    assert sent == [2, 3]
