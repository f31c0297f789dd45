"""Commit points of a turn: the writes between two waits go to the database together.

A turn used to cost a transaction (and a disk flush) per event and per archived row. Now
the loop opens a batch when a turn starts; the store's writes and the sink's events join
it, and it commits at two kinds of points:

1. right before each model call and each tool run — what the turn prepared (its user
   messages, anchors, BUDGET, the previous call's MODEL_CALL) is stored and streamed
   while the model or the tool works, and no transaction (no SQLite write lock) stays open
   meanwhile;
2. at the end of the turn, with the state save — the database store writes the state into
   the open batch and commits it durably: the turn's last writes and its state are one
   transaction.

A MODEL_CALL therefore commits at the next wait or with the state save, whichever comes
first: between the reply and that commit the turn only computes (it waits on nothing).
When the batch rolls back instead (an error, a kill the process survives), the sink
stores the batch's model calls again on their own: a paid call stays on record
(taskos/live/publisher.py drop_held). Only the commits before a wait announce the stored
events to the live pages; the state save stores its events unannounced, and the next
announcement (the next wait, the session's last events, or any event stored outside a
batch) carries a newer seq, up to which a page reads every stored event from the database.

The database store does not wait for the disk at points 1 (taskos/runs/store.py
relaxed_commits); they cannot be lost alone: the state save's durable commit flushes every
earlier commit with it, and until then the saved state says the turn did not happen, so
a crash redoes it (agents/loop.py discards what it left). Stores and sinks without
`begin_batch` / `hold` (MemoryStore, ListSink) are left as they are: nothing to batch.
"""
from __future__ import annotations

from typing import Any


class CommitPoints:
    def __init__(self, store: Any, events: Any) -> None:
        self.store, self.events = store, events
        self._transactions = callable(getattr(store, "begin_batch", None))
        self._holds_events = callable(getattr(events, "hold", None))
        self.open = False

    def begin(self) -> None:
        """Open a batch: a transaction where the store has them, events held."""
        if self.open:
            return
        self.open = True
        if self._holds_events:
            self.events.hold()
        if self._transactions:
            self.store.begin_batch()

    def flush_events(self, announce: bool = False) -> None:
        """Store the held events now, in the open transaction (their seqs are final);
        announced to live pages after the commit only when `announce`."""
        if self.open and self._holds_events:
            self.events.flush(announce=announce)

    def commit(self, announce: bool = True) -> None:
        """Flush the events and commit the open batch; nothing stays open (a model call
        never runs inside a transaction). Called bare before a model call or a tool run,
        it announces what it stored: the wait comes next."""
        if not self.open:
            return
        self.flush_events(announce)
        self.open = False
        if self._transactions:
            self.store.commit_batch()

    def end(self) -> None:
        """After the state save (a database store committed the batch with it): events
        are written as they come until the next turn."""
        self.commit(announce=False)
        if self._holds_events:
            self.events.release()

    def abort(self, exc: BaseException) -> None:
        """Roll back the open transaction and forget the held events (never stored), but
        for its model calls, which the sink stores again."""
        was_open, self.open = self.open, False
        try:
            if was_open and self._transactions:
                self.store.rollback_batch(exc)
        finally:
            if self._holds_events:
                self.events.drop_held()
