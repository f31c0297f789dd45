"""GroupSender: a session's announcements, at most one per ANNOUNCE_INTERVAL_S, newest wins.

The layer here is a recording stand-in (no Redis): what is checked is which messages the
sender hands to group_send and when, not the transport.
"""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

from taskos.live import sending


class RecordingLayer:
    def __init__(self) -> None:
        self.sent: list[tuple[float, str, int]] = []
        self.arrived = threading.Event()

    async def group_send(self, group: str, message: dict) -> None:
        self.sent.append((time.monotonic(), group, message["event"]["seq"]))
        self.arrived.set()


@pytest.fixture
def sender(monkeypatch):
    layer = RecordingLayer()
    monkeypatch.setattr(sending, "get_channel_layer", lambda: layer)
    return sending.GroupSender(42), layer


def announce(seq: int) -> list[dict]:
    return [{"type": "session.event", "event": {"seq": seq}}]


def test_a_burst_of_announcements_sends_at_most_two_the_last_the_newest(sender):
    group_sender, layer = sender
    started = time.monotonic()
    for seq in range(1, 51):  # a fast run: fifty commits within a few milliseconds
        group_sender.send(announce(seq), wait=False)
    group_sender.drain()
    seqs = [seq for _, _, seq in layer.sent]
    assert seqs[-1] == 50 and seqs == sorted(seqs)  # the page learns of the newest
    assert len(seqs) <= 2  # not fifty: the first send (or the one after the interval)
    if len(seqs) == 2:  # the burst outran the first send: the rest waited for the interval
        assert layer.sent[1][0] - started >= sending.ANNOUNCE_INTERVAL_S * 0.9
    assert {group for _, group, _ in layer.sent} == {"session.42"}


def test_announcements_further_apart_than_the_interval_all_go_out(sender, monkeypatch):
    monkeypatch.setattr(sending, "ANNOUNCE_INTERVAL_S", 0.02)
    group_sender, layer = sender
    for seq in (1, 2, 3):
        group_sender.send(announce(seq), wait=False)
        group_sender.drain()
        time.sleep(0.03)
    assert [seq for _, _, seq in layer.sent] == [1, 2, 3]


def test_a_waited_send_goes_out_at_once_and_carries_what_was_waiting(sender, monkeypatch):
    monkeypatch.setattr(sending, "ANNOUNCE_INTERVAL_S", 30.0)  # nothing leaves on its own
    group_sender, layer = sender
    group_sender.send(announce(1), wait=False)  # sent: the first of the interval
    assert layer.arrived.wait(5)
    group_sender.send(announce(2), wait=False)  # waits for the interval's end
    started = time.monotonic()
    group_sender.send(announce(3), wait=True)  # the session's last events
    assert time.monotonic() - started < 5
    assert [seq for _, _, seq in layer.sent] == [1, 3]  # 2 is covered by 3, never sent alone


def test_a_message_arriving_while_the_previous_is_on_the_wire_is_sent_too(sender, monkeypatch):
    """The previous send took its message and is still in group_send: the newer one must not
    count on it (it waited, unsent, for the session's next announcement)."""
    monkeypatch.setattr(sending, "ANNOUNCE_INTERVAL_S", 0.02)
    group_sender, layer = sender
    on_the_wire, release = threading.Event(), threading.Event()
    recorded = layer.group_send

    async def slow_group_send(group: str, message: dict) -> None:
        on_the_wire.set()
        while not release.is_set():
            await asyncio.sleep(0.005)
        await recorded(group, message)

    layer.group_send = slow_group_send
    group_sender.send(announce(1), wait=False)
    assert on_the_wire.wait(5)
    group_sender.send(announce(2), wait=False)  # 1 is taken and still sending
    release.set()
    group_sender.drain()
    deadline = time.monotonic() + 5
    while len(layer.sent) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [seq for _, _, seq in layer.sent] == [1, 2]
