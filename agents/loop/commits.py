"""Commit points: the engine's writes commit right before it waits, and never otherwise.

A turn used to cost a transaction (and a disk flush) per event and per archived row, then
four: before its model call, after it, before each tool, and with its state. Now the rule
is one: the batch open since the last wait commits right before the next wait — a model
call or a tool run — and when the run stops. What a wait follows is stored and streamed
while the model or the tool works, and no transaction (no SQLite write lock) stays open
meanwhile. So a tool turn commits twice and an answer turn once:

- before its model call: the previous turn's tool result, anchors and state, then this
  turn's user messages, anchors, compaction and BUDGET;
- before its tool: the MODEL_CALL, the reply and TOOL_CALL.

The state save goes into the open batch; the next wait commits it, durably
(taskos/store/django_store.py), with what the next turn prepared. Between a state save or a
model call's reply and that commit the engine only computes — it waits on nothing. An error
there rolls back only what came after the saved turn: the store marks the turn's end
(`mark_turn_saved`), rolls back to it and commits the turn. And the sink stores the
rolled-back model calls again on their own, so a paid call stays on record
(taskos/store/event_log.py, drop_held).

Only the commits before a wait announce the stored events to the live pages; the others
store theirs unannounced, and the next announcement (the next wait, the session's last
events, or any event stored outside a batch) carries a newer seq, up to which a page
reads every stored event from the database. Stores and sinks without `begin_batch` /
`hold` (MemoryStore, ListSink) are left as they are: nothing to batch.
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
        """After the state save: the turn's events are stored and the batch stays open
        until the next wait commits it; the store marks where the finished turn ends, so
        an error before that commit still commits the turn (abort)."""
        self.flush_events()
        if self.open and self._transactions:
            self.store.mark_turn_saved()

    def finish(self) -> None:
        """The run stops (an answer, a wait for sub-agents, a limit): commit what is open;
        events are written as they come from here on."""
        self.commit(announce=False)
        if self._holds_events:
            self.events.release()

    def abort(self, exc: BaseException) -> None:
        """Roll back what the open transaction wrote after the last saved turn (a store
        commits that turn), forget the held events (never stored) and have the sink store
        again the model calls that went with the rollback."""
        was_open, self.open = self.open, False
        try:
            if was_open and self._transactions:
                self.store.rollback_batch(exc)
        finally:
            if self._holds_events:
                self.events.drop_held()
