"""The engine's Store protocol (agents/store/interface.py) over the ORM.

The worker only ever updates the Session columns it owns (never `session.save()` of the
whole row), so an admin edit or a cancel request made meanwhile is not overwritten.
"""
from __future__ import annotations

import base64
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from agents import AnchorRecord, ArchiveHit, TaskRecord
from taskos.runs.edits import engine_writes
from taskos.runs.models import Anchor, ArchivedTurn, EngineStateChunk, Session, Task, search_terms

from . import search, state_chunks, turn_sql
from .call_messages import remember_archived
from .row_ids import RowIds

# relaxed_commits is the worker's (tasks.py) to wrap a session's run in.
from .store_base import (  # noqa: F401
    UnknownSession,
    durable_commit,
    json_safe,
    relaxed_commits,
    session_pk,
    storable_text,
)
from .store_batches import Batches
from .store_children import SubAgents
from .store_recovery import RedoneTurns
from .store_requests import PeopleRequests

STALE_CHUNKS = 64  # state pieces no longer named that may wait before they are deleted


def _insert_chunks(pk: int, rows: list[tuple[str, str]]) -> None:
    """One INSERT … VALUES for a save's new pieces. Not bulk_create: on PostgreSQL it sends
    them as a text array, and psycopg escapes every quote of every JSON text one regex
    replacement at a time (seconds per long run)."""
    q = connection.ops.quote_name
    table, session, key, value = (q(EngineStateChunk._meta.db_table), q("session_id"),
                                  q("key"), q("value"))
    values = ", ".join(["(%s, %s, %s)"] * len(rows))
    params = [part for name, text in rows for part in (pk, name, text)]
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} ({session}, {key}, {value}) VALUES {values} "
                       f"ON CONFLICT ({session}, {key}) DO NOTHING", params)


class DjangoStore(Batches, PeopleRequests, SubAgents, RedoneTurns):
    """Every method of agents.store.interface.Store; session ids are Session primary keys as str.

    With a `lease` (taskos/runs/lease.py) every write of the loop is fenced: an executor
    that lost the session to another one raises LeaseLost instead of writing.
    """

    def __init__(self, lease=None) -> None:
        self.lease = lease
        self._batch = None  # the open transaction of a turn's batch (agents/loop/commits.py)
        self._saved_turn = None  # the savepoint after the batch's state save, if any
        # Ids ahead of the rows, so a batch's inserts wait for nothing (batch_writes.py)
        self._archive_ids = RowIds(ArchivedTurn._meta.db_table)
        self._anchor_ids = RowIds(Anchor._meta.db_table)
        self._chunks: dict[int, set[str]] = {}  # state pieces stored, per session
        self._memos: dict[int, state_chunks.MessageMemo] = {}  # history dumped, per session
        # (session pk, row): what cancel_requested read along with the cancel flag
        self._poll: tuple[int, dict[str, Any]] | None = None

    def _check_lease(self) -> None:
        if self.lease is not None:
            self.lease.check()

    # --- archive
    def archive(self, session_id, turn, role, content, *, tool_name="", tool_args=None,
                tokens=0, raw_bytes=None) -> str:
        self._check_lease()
        pk = session_pk(session_id)
        content = content or ""
        # A text row's words are indexed by the session's next search (search_pending);
        # base64 rows are indexed now, by what they held before the encoding.
        searchable, pending, is_binary = "", True, False
        if raw_bytes is not None:
            content, is_binary = base64.b64encode(raw_bytes).decode("ascii"), True
            searchable, pending = search_terms("", tool_name), None
        elif not storable_text(content):
            # Kept losslessly as base64 of its bytes; still findable by the words it had.
            searchable, pending = search_terms(content, tool_name), None
            content = base64.b64encode(content.encode("utf-8", "surrogatepass")).decode("ascii")
            is_binary = True
        row_id = self._archive_ids.next()
        with self._writes.writing():
            row_id = turn_sql.insert_archived(pk, {
                "turn": turn, "role": role, "content": content, "tool_name": tool_name or "",
                "tool_args": json_safe(tool_args or {}), "token_count": tokens or 0,
                "is_binary": is_binary, "search_text": searchable, "search_pending": pending},
                row_id)
        ref = ArchivedTurn(pk=row_id, session_id=pk).ref
        if not is_binary:  # a call that sends it again is stored by this ref
            remember_archived(ref, pk, row_id, content)
        return ref

    def read_ref(self, session_id, ref) -> str | None:
        try:
            prefix, sid, number = str(ref).split(":")
            if prefix != "arc" or not self._own_or_descendant(session_id, sid):
                return None
            return ArchivedTurn.objects.filter(
                pk=int(number), session_id=session_pk(sid)).values_list(
                    "content", flat=True).first()
        except (ValueError, UnknownSession):
            return None

    def read_refs(self, session_id, refs) -> dict[str, str | None]:
        """read_ref of each ref; the session's own rows in one statement (the audit reads
        every row archived since a compaction at once)."""
        own, out = {}, {}
        for ref in refs:
            parts = str(ref).split(":")
            if len(parts) == 3 and parts[0] == "arc" and parts[1] == str(session_id) \
                    and parts[2].isdigit():
                own[int(parts[2])] = ref
            else:
                out[ref] = self.read_ref(session_id, ref)
        if own:
            found = dict(ArchivedTurn.objects.filter(
                session_id=session_pk(session_id), pk__in=list(own)).values_list("pk", "content"))
            out.update({ref: found.get(pk) for pk, ref in own.items()})
        return out

    def _own_or_descendant(self, session_id, sid: str) -> bool:
        """A session reads its own archive and its sub-agents' (T6), nobody else's."""
        if sid == str(session_id):
            return True
        own, current = session_pk(session_id), session_pk(sid)
        for _ in range(32):  # far deeper than any delegation limit; stops a cycle
            current = Session.objects.filter(pk=current).values_list(
                "parent_id", flat=True).first()
            if current is None:
                return False
            if current == own:
                return True
        return False

    def search_archive(self, session_id, query, limit=5) -> list[ArchiveHit]:
        return search.search_archive(session_pk(session_id), query, limit)

    # --- anchors
    def load_anchors(self, session_id) -> list[AnchorRecord]:
        return [AnchorRecord(tier=a.tier, text=a.text, key=a.key, source=a.source,
                             active=a.active, turn=a.turn, id=a.pk)
                for a in Anchor.objects.filter(session_id=session_pk(session_id), active=True)
                .order_by("id")]

    def save_anchor(self, session_id, anchor) -> AnchorRecord:
        pk = session_pk(session_id)
        fields = {"tier": anchor.tier, "text": anchor.text, "key": anchor.key or "",
                  "source": anchor.source, "active": anchor.active, "turn": anchor.turn}
        # Plain SQL (turn_sql), so no post_save: the engine's own writes are not counted
        # as a person's edits (taskos/runs/edits.py).
        if anchor.id is not None:
            with self._writes.writing():
                turn_sql.upsert_anchor(pk, anchor.id, fields)
            return AnchorRecord(id=anchor.id, **fields)
        new_id = self._anchor_ids.next()
        with self._writes.writing():
            return AnchorRecord(id=turn_sql.insert_anchor(pk, fields, new_id), **fields)

    # --- tasks and notes
    def load_tasks(self, session_id) -> list[TaskRecord]:
        return [TaskRecord(id=t.task_id, subject=t.subject, description=t.description,
                           state=t.state, owner=t.owner, blocks=list(t.blocks),
                           blocked_by=list(t.blocked_by), metadata=dict(t.metadata),
                           created_at=t.created_at.isoformat())
                for t in Task.objects.filter(session_id=session_pk(session_id)).order_by("id")]

    def save_tasks(self, session_id, tasks) -> None:
        pk = session_pk(session_id)
        ids = [str(t.id) for t in tasks]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"Task ids must be unique in a session; repeated: {duplicates}")
        with transaction.atomic(), engine_writes():
            Task.objects.filter(session_id=pk).exclude(task_id__in=ids).delete()
            existing = {t.task_id: t for t in Task.objects.filter(session_id=pk)}
            for record in tasks:
                values = {"subject": record.subject, "description": record.description or "",
                          "state": record.state, "owner": record.owner or "",
                          "blocks": [str(b) for b in record.blocks],
                          "blocked_by": [str(b) for b in record.blocked_by],
                          "metadata": json_safe(record.metadata or {})}
                row = existing.get(str(record.id))
                if row is None:
                    created = parse_datetime(record.created_at or "") or timezone.now()
                    Task.objects.create(session_id=pk, task_id=str(record.id),
                                        created_at=created, **values)
                elif any(getattr(row, name) != value for name, value in values.items()):
                    for name, value in values.items():
                        setattr(row, name, value)
                    row.save()

    # --- loop state
    # Saved in pieces (taskos/store/state_chunks.py): the head on the session row, every
    # piece once in EngineStateChunk. `_chunks` is, per session, the keys stored.
    def load_state(self, session_id):
        pk = session_pk(session_id)
        head = Session.objects.filter(pk=pk).values_list("engine_state", flat=True).first()
        if not head or not head.get(state_chunks.MARK):
            return head

        def read(keys):
            rows = dict(EngineStateChunk.objects.filter(session_id=pk).values_list(
                "key", "value"))
            self._chunks[pk] = set(rows)
            return rows
        return state_chunks.join(head, read)

    def save_state(self, session_id, state) -> None:
        # Plain JSON or an error, as in MemoryStore: a state that does not serialise is an
        # engine bug, not something to paper over.
        # The state goes into the open batch, which the next wait commits durably: the
        # turn's last writes, its new state pieces and the head that names them are one
        # transaction. A worker that dies before that commit leaves nothing of the batch
        # and the old state: the re-run discards what the turn's earlier commit points
        # wrote (agents/loop/agent_loop.py).
        pk = session_pk(session_id)
        head, chunks = state_chunks.split(state, self._memos.setdefault(
            pk, state_chunks.MessageMemo()))
        stored = self._stored_chunks(pk)
        new = [key for key in chunks if key not in stored]
        # Pieces no head names any more (folded messages, old summaries) go now and then,
        # in the same commit as the head that stopped naming them.
        stale = stored - chunks.keys() if len(stored) - len(chunks) > STALE_CHUNKS else set()
        try:
            # In the batch without a savepoint of its own; alone, its own transaction.
            if self.lease is not None:
                self.lease.check()  # known lost: not a piece written
            with transaction.atomic(savepoint=False):
                if stale:
                    EngineStateChunk.objects.filter(session_id=pk, key__in=stale).delete()
                with self._writes.writing():
                    durable_commit()  # the whole transaction: the batch's writes with it
                    if new:
                        _insert_chunks(pk, [(key, chunks[key]) for key in new])
                    # The head's row count says whether the lease still holds: settled.
                    written = turn_sql.save_head(pk, head, self.lease,
                                                 settle=self._writes.flush)
                if self.lease is not None:
                    self.lease.fence(written)
                elif not written:
                    raise UnknownSession(f"No session {session_id} to save the engine state of")
        except BaseException:
            self._chunks.pop(pk, None)  # rolled back: read what is stored again next time
            raise
        stored.update(new)
        stored.difference_update(stale)

    def _stored_chunks(self, pk: int) -> set[str]:
        if pk not in self._chunks:
            self._chunks[pk] = set(EngineStateChunk.objects.filter(session_id=pk).values_list(
                "key", flat=True))
        return self._chunks[pk]

