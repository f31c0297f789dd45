"""The turn's batch of the Django Store: one transaction from one wait to the next
(agents/loop/commits.py), its writes sent together on PostgreSQL (taskos/store/batch_writes.py)."""
from __future__ import annotations

import logging

from django.db import IntegrityError, transaction

from . import batch_writes, sqlite_checkpoint

log = logging.getLogger("taskos.runs")


class Batches:
    """Mixed into DjangoStore, which owns `_batch`, `_saved_turn`, `_poll`, `_chunks` and
    `lease`."""

    @property
    def _writes(self) -> batch_writes.BatchWrites:
        return batch_writes.for_connection()

    def begin_batch(self) -> None:
        if self._batch is None:
            sqlite_checkpoint.take_over()
            self._batch = transaction.atomic()
            self._batch.__enter__()
            self._writes.start()

    def commit_batch(self, durable: bool = False) -> None:
        """Commit the open batch (durable or not as the connection is: see relaxed_commits;
        a batch holding a state save commits durably, and that flushes every earlier
        commit along). Its kept writes go out first (taskos/store/batch_writes.py)."""
        self._poll = None  # a model call or a tool starts: what people asked is read anew
        batch, self._batch, self._saved_turn = self._batch, None, None
        if batch is None:
            return
        try:
            self._writes.flush()
        except BaseException as exc:
            self._writes.stop()
            self._chunks.clear()
            batch.__exit__(type(exc), exc, exc.__traceback__)  # rolled back
            self._raise_lease_lost_for(exc)
            raise
        try:
            batch.__exit__(None, None, None)
        except BaseException as exc:
            self._chunks.clear()
            self._raise_lease_lost_for(exc)
            raise
        finally:
            self._writes.stop()

    def _raise_lease_lost_for(self, exc: BaseException) -> None:
        """A batch's events clash with stored ones when an executor that took the session
        over wrote those seqs: this one lost its lease and stops, marking nothing failed."""
        if isinstance(exc, IntegrityError) and self.lease is not None and not self.lease.held():
            self.lease.lost = True
            raise self.lease.lost_error() from exc

    def mark_turn_saved(self) -> None:
        """The batch holds a finished turn's state: a rollback goes back to here, no
        further (rollback_batch)."""
        if self._batch is not None:
            with self._writes.writing():
                self._saved_turn = transaction.savepoint()

    def rollback_batch(self, exc: BaseException) -> None:
        """Undo the batch; when it holds a saved turn, only what came after it, and commit
        that turn (it finished: only the next one's first steps failed)."""
        self._poll = None
        self._chunks.clear()  # which state pieces are stored is read again
        batch, self._batch = self._batch, None
        saved, self._saved_turn = self._saved_turn, None
        if batch is None:
            return
        try:
            if saved is not None:
                try:
                    self._writes.flush()  # up to the savepoint, and after it: undone next
                    transaction.savepoint_rollback(saved)
                except Exception:  # noqa: BLE001 - the connection broke: nothing can be kept
                    log.exception("Could not keep the last saved turn; rolling the batch back")
                else:
                    batch.__exit__(None, None, None)
                    return
            batch.__exit__(type(exc), exc, exc.__traceback__)
        finally:
            self._writes.stop()
