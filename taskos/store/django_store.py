"""The engine's Store protocol (agents/store/interface.py) over the ORM: DjangoStore.

One class, grouped by what the engine asks of it: the turn's batch, the archive, anchors,
tasks and notes, what people ask of a running session, the loop state, undoing a turn its
worker did not finish, and sub-agents. The SQL a turn runs every time is in turn_sql.py,
the state's pieces in state_chunks.py, archive search in search.py.

The worker only ever updates the Session columns it owns (never `session.save()` of the
whole row), so an admin edit or a cancel request made meanwhile is not overwritten.
"""
from __future__ import annotations

import base64
import json
import logging
from contextlib import contextmanager
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from agents import (AnchorRecord, ArchiveHit, ChildRecord, TaskRecord, storable_text,
                    storable_value)
from taskos.runs import approvals
from taskos.runs.edits import engine_writes
from taskos.runs.models import (Anchor, ArchivedTurn, EngineStateChunk, ModelProfile,
                                PendingMessage, Session, SessionEvent, Task, ToolApproval,
                                WorkspaceFile, search_terms)

from . import batch_writes, search, sqlite_checkpoint, state_chunks, turn_sql
from .call_messages import remember_archived
from .row_ids import RowIds
from .storage_errors import storage_problem

log = logging.getLogger("taskos.runs")

STALE_CHUNKS = 64  # state pieces no longer named that may wait before they are deleted


class UnknownSession(LookupError):
    """The engine was given a session id that has no row."""


def session_pk(session_id: str | int) -> int:
    try:
        return int(session_id)
    except (TypeError, ValueError):
        raise UnknownSession(f"Session id must be a number, got {session_id!r}") from None


def json_safe(value: Any) -> Any:
    """Plain JSON, every string in it storable (PostgreSQL's jsonb refuses "\\u0000")."""
    return storable_value(json.loads(json.dumps(value, default=str)))


# --- how the store's commits reach the disk
@contextmanager
def relaxed_commits():
    """While a session runs in this connection, its commits do not wait for the disk flush
    (PostgreSQL synchronous_commit off; SQLite in WAL mode with synchronous=NORMAL behaves
    so anyway) except the one of a batch holding a state save, which flushes every
    earlier commit with it: a crash of the database server loses at most the turn in
    flight, which the engine redoes (agents/loop/agent_loop.py)."""
    relaxed = connection.vendor == "postgresql"
    if relaxed:
        with connection.cursor() as cursor:
            cursor.execute("SET synchronous_commit TO OFF")
    try:
        yield
    finally:
        if relaxed and connection.connection is not None and not connection.in_atomic_block:
            with connection.cursor() as cursor:
                cursor.execute("SET synchronous_commit TO DEFAULT")


def durable_commit() -> None:
    """Inside a transaction: its commit waits for the disk, whatever relaxed_commits set."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO ON")


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


class DjangoStore:
    """Every method of agents.store.interface.Store; session ids are Session primary keys as str.

    With a `lease` (taskos/worker/lease.py) every write of the loop is fenced: an executor
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
        # (session pk, row): what cancel_requested read along with the cancel flag; cleared
        # at every commit point
        self._poll: tuple[int, dict[str, Any]] | None = None

    def _check_lease(self) -> None:
        if self.lease is not None:
            self.lease.check()

    @contextmanager
    def _fenced(self):
        """A write of the engine's: inside the batch, fenced when the batch commits;
        outside it, its own transaction, fenced first (turn_sql.hold_lease)."""
        if self._batch is not None or self.lease is None:
            yield
            return
        with transaction.atomic():
            turn_sql.hold_lease(self.lease)
            yield

    # --- the turn's batch: one transaction from one wait to the next (agents/loop/
    # commits.py), its writes sent together on PostgreSQL (batch_writes.py)
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
        commit along). Its kept writes go out first (batch_writes.py)."""
        self._poll = None  # a model call or a tool starts: what people asked is read anew
        batch, self._batch, self._saved_turn = self._batch, None, None
        if batch is None:
            return
        try:
            if self.lease is not None:
                # The batch's last statement, sent with its kept writes: it commits only
                # while this executor holds the session (issue 25 item 3).
                with self._writes.writing():
                    turn_sql.hold_lease(self.lease, settle=self._writes.flush)
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
                except Exception as failure:  # noqa: BLE001 - the connection broke
                    problem = storage_problem(failure)
                    if problem is None:
                        log.exception("Could not keep the last saved turn; rolling the batch "
                                      "back")
                    else:  # the database's own trouble: one line, the worker says the rest
                        log.warning("Could not keep the last saved turn (%s); rolling the "
                                    "batch back", problem.what())
                else:
                    batch.__exit__(None, None, None)
                    return
            batch.__exit__(type(exc), exc, exc.__traceback__)
        finally:
            self._writes.stop()

    # --- archive
    def archive(self, session_id, turn, role, content, *, tool_name="", tool_args=None,
                tokens=0, raw_bytes=None) -> str:
        self._check_lease()
        pk = session_pk(session_id)
        # Text no database stores (NUL, lone surrogates) gets the visible marks the engine
        # gave it already (agents/storable.py), so it reads back as the engine has it.
        content, tool_name = storable_text(content or ""), storable_text(tool_name or "")
        # A text row's words are indexed by the session's next search (search_pending);
        # base64 rows (a tool's bytes) are indexed now, by their tool's name.
        searchable, pending, is_binary = "", True, False
        if raw_bytes is not None:
            content, is_binary = base64.b64encode(raw_bytes).decode("ascii"), True
            searchable, pending = search_terms("", tool_name), None
        row_id = self._archive_ids.next()
        with self._fenced(), self._writes.writing():
            row_id = turn_sql.insert_archived(pk, {
                "turn": turn, "role": role, "content": content, "tool_name": tool_name,
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
        fields = {"tier": anchor.tier, "text": storable_text(anchor.text),
                  "key": storable_text(anchor.key or ""),
                  "source": anchor.source, "active": anchor.active, "turn": anchor.turn}
        # Plain SQL (turn_sql), so no post_save: the engine's own writes are not counted
        # as a person's edits (taskos/runs/edits.py).
        if anchor.id is not None:
            with self._fenced(), self._writes.writing():
                turn_sql.upsert_anchor(pk, anchor.id, fields)
            return AnchorRecord(id=anchor.id, **fields)
        new_id = self._anchor_ids.next()
        with self._fenced(), self._writes.writing():
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
        with self._fenced(), transaction.atomic(), engine_writes():
            Task.objects.filter(session_id=pk).exclude(task_id__in=ids).delete()
            existing = {t.task_id: t for t in Task.objects.filter(session_id=pk)}
            for record in tasks:
                values = {"subject": storable_text(record.subject),
                          "description": storable_text(record.description or ""),
                          "state": record.state, "owner": storable_text(record.owner or ""),
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

    def load_notes(self, session_id) -> dict[str, Any]:
        notes = self._polled(session_id, "notes", lambda: Session.objects.filter(
            pk=session_pk(session_id)).values_list("notes", flat=True).first())
        return json.loads(json.dumps(notes or {}))  # a copy: the poll's stays as read

    def save_notes(self, session_id, notes) -> None:
        self._poll = None
        with self._fenced():
            Session.objects.filter(pk=session_pk(session_id)).update(
                notes=storable_value(notes))

    # --- what people ask of a running session (cancel, messages, Compact now, edits), read
    # once a turn (features W4, C13)
    # Both take_* run every turn and nearly always find nothing: a plain read first, and the
    # locking transaction (a commit, so a disk flush on PostgreSQL) only when there is work.
    def take_user_messages(self, session_id, turn=0) -> list[str]:
        def untaken():
            return PendingMessage.objects.filter(session_id=session_pk(session_id), taken=False)
        if not self._polled(session_id, "pending", lambda: untaken().exists()):
            return []
        waiting = untaken()
        with self._fenced(), transaction.atomic():
            pending = list(waiting.select_for_update().order_by("id").values_list("id", "text"))
            PendingMessage.objects.filter(pk__in=[pk for pk, _ in pending]).update(
                taken=True, taken_turn=turn)
        # The web's forms write them storable already; a shell or the admin may not have.
        return [storable_text(text) for _, text in pending]

    def take_new_files(self, session_id, turn=0) -> list[tuple[str, int]]:
        """The person's files the agent has not been told of (feature T9), marked told at
        `turn`; known from the turn's poll, so a turn without new files reads nothing."""
        def untold():
            return WorkspaceFile.objects.filter(session_id=session_pk(session_id),
                                                announced_turn__isnull=True)
        if not self._polled(session_id, "files", lambda: untold().exists()):
            return []
        with self._fenced(), transaction.atomic():
            rows = list(untold().select_for_update().order_by("id").values_list(
                "id", "path", "size"))
            WorkspaceFile.objects.filter(pk__in=[pk for pk, _, _ in rows]).update(
                announced_turn=turn)
        return [(path, size) for _, path, size in rows]

    def take_compaction_request(self, session_id) -> str | None:
        if not self._polled(session_id, "compact", lambda: Session.objects.filter(
                pk=session_pk(session_id), compact_request__isnull=False).exists()):
            return None
        sessions = Session.objects.filter(pk=session_pk(session_id))
        with self._fenced(), transaction.atomic():
            request = sessions.select_for_update().values_list("compact_request",
                                                               flat=True).first()
            if request is not None:
                sessions.update(compact_request=None)
        return request

    def cancel_requested(self, session_id) -> bool:
        """Read fresh, every time; with it, in the same statement, whether people left a
        message or a compaction request and the notes: the loop asks for those right after,
        before the turn's first model call, and finds the answers here (one read a turn
        instead of four)."""
        pk = session_pk(session_id)
        row = turn_sql.poll(pk)
        self._poll = (pk, row) if row is not None else None
        return bool(row and row["cancel_requested"])

    def person_edits(self, session_id, fresh: bool = False) -> int | None:
        """How many times people edited this session's anchors and tasks (taskos/runs/
        edits.py): from the turn's poll, or `fresh` (one column of one row) mid-turn."""
        if fresh:
            return turn_sql.person_edits(session_pk(session_id))
        return self._polled(session_id, "person_edits", lambda: self.person_edits(
            session_id, fresh=True))

    def _polled(self, session_id, name: str, read):
        """`name` from this turn's poll when it is still current, else read(). The poll
        lasts until the next commit point (a model call starts there) or notes write."""
        poll = self._poll
        if poll is not None and poll[0] == session_pk(session_id):
            return poll[1][name]
        return read()

    # --- loop state
    # Saved in pieces (state_chunks.py): the head on the session row, every piece once in
    # EngineStateChunk. `_chunks` is, per session, the keys stored.
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

    # --- redoing a turn whose worker died: the store's part of exactly-once (feature T1)
    def discard_uncommitted(self, session_id, from_turn) -> dict[str, int]:
        """Undo what turns >= from_turn wrote before their worker died: the turn is run again.

        Their archive rows go (the re-run writes them anew, so a ref never points at a
        half-done attempt) and the people's messages they took wait again for the re-run.
        Their anchor changes are undone before the engine starts (undo_uncommitted_anchors).
        """
        self._check_lease()
        pk = session_pk(session_id)
        with self._fenced(), transaction.atomic():
            removed, _ = ArchivedTurn.objects.filter(session_id=pk, turn__gte=from_turn).delete()
            returned = PendingMessage.objects.filter(
                session_id=pk, taken=True, taken_turn__gte=from_turn).update(
                    taken=False, taken_turn=None)
            # The person's files it told the agent of: told again by the re-run (T9).
            WorkspaceFile.objects.filter(session_id=pk, announced_turn__gte=from_turn).update(
                announced_turn=None)
            # Sub-agents the undone turn asked for and that never started: asked again.
            Session.objects.filter(parent_id=pk, parent_turn__gte=from_turn,
                                   status=Session.Status.QUEUED, enqueued_at__isnull=True
                                   ).delete()
            # Approvals the undone turn asked for and nobody decided: asked again.
            ToolApproval.objects.filter(session_id=pk, turn__gte=from_turn,
                                        status=ToolApproval.Decision.PENDING).delete()
        return {"archive_rows": removed, "messages": returned}

    def undo_uncommitted_anchors(self, session_id) -> None:
        """Anchors the engine added in an uncommitted turn go, those it retired come back.

        Called before the engine is built (it reads the anchors once when built, and would
        report the undo as admin edits). Found by time: the engine saves an anchor before it
        emits the event that reports it, so every anchor it touched up to the commit is
        older than the last committed event (the state's `events_seq`); a newer one was
        touched by the dying turn. Without
        this the re-run found them already there and reported nothing (the chaos run's
        ANCHOR_CHANGED events went missing). Edits made in the admin are left alone.
        """
        pk = session_pk(session_id)
        state = Session.objects.filter(pk=pk).values_list("engine_state", flat=True).first()
        from_turn, seq = (state or {}).get("turn", 0), (state or {}).get("events_seq")
        events = SessionEvent.all_objects.filter(session_id=pk)
        committed_at = events.filter(seq=seq).values_list("at", flat=True).first() \
            if seq else None
        # Before any commit, only what came after the run's first event is the engine's:
        # anchors that were there before it (a sub-agent's inherited ones) stay.
        since = committed_at or events.order_by("seq").values_list("at", flat=True).first()
        if since is None:
            return  # the engine never ran: nothing of it to undo
        engine_made = Anchor.objects.filter(session_id=pk).exclude(source=Anchor.Source.ADMIN)
        added = engine_made.filter(turn__gte=from_turn)
        added = added.filter(updated_at__gt=committed_at) if committed_at is not None \
            else added.filter(updated_at__gte=since)
        with transaction.atomic(), engine_writes():
            dropped, _ = added.delete()
            revived = 0
            if committed_at is not None:
                revived = engine_made.filter(active=False, turn__lt=from_turn,
                                             updated_at__gt=committed_at).update(active=True)
        if dropped or revived:
            log.info("Session %s: undid the anchor changes of uncommitted turn %s (%d added, "
                     "%d retired)", pk, from_turn, dropped, revived)

    # --- sub-agents (feature T6)
    def create_child(self, parent_id, request) -> str:
        """A queued child row; the worker sends it to the queue once the parent waits."""
        self._check_lease()
        parent = Session.objects.select_related("profile").get(pk=session_pk(parent_id))
        profile = parent.profile
        if request.get("profile") and request["profile"] != profile.name:
            profile = ModelProfile.objects.filter(name=request["profile"]).first()
            if profile is None:
                names = ", ".join(ModelProfile.objects.values_list("name", flat=True))
                raise LookupError(f"No model profile {request['profile']!r}; profiles: "
                                  f"{names}. Leave 'profile' out to use this session's.")
        window = min(int(request.get("window") or parent.window), profile.effective_window)
        settings = {**(parent.context_settings or {}),
                    "max_turns": int(request.get("max_turns") or
                                     (parent.context_settings or {}).get("max_turns", 400))}
        with self._fenced(), transaction.atomic():
            child = Session.objects.create(
                owner_id=parent.owner_id, goal=storable_text(request["goal"]),
                scenario=request.get("scenario") or "", profile=profile, window=window,
                context_settings=settings, parent=parent,
                parent_turn=int(request.get("turn") or 0),
                ask_first=list(parent.ask_first or []))  # asks before what its parent does (T11)
            child.tool_sources.set(parent.tool_sources.all())  # its parent's MCP tools (T10)
            Anchor.objects.bulk_create([
                Anchor(session=child, tier=1, text=storable_text(text),
                       source=Anchor.Source.USER)
                for text in request.get("anchors", [])])
        return str(child.pk)

    def list_children(self, parent_id) -> list[ChildRecord]:
        out = []
        for child in Session.objects.filter(parent_id=session_pk(parent_id)).order_by("id"):
            answer = ArchivedTurn.objects.filter(
                session=child, role="assistant", content=child.final_answer).order_by(
                    "-id").values_list("pk", flat=True).first() if child.final_answer else None
            out.append(ChildRecord(
                id=str(child.pk), goal=child.goal, status=child.status,
                final_answer=child.final_answer, error=child.error,
                answer_ref=f"arc:{child.pk}:{answer}" if answer else "", turns=child.turns,
                total_input_tokens=child.total_input_tokens,
                peak_input_tokens=child.peak_input_tokens,
                cost=child.cost_with_children()))
        return out

    # --- ask before a tool acts (feature T11; taskos/runs/approvals.py)
    def request_approval(self, session_id, request) -> None:
        self._check_lease()
        with self._fenced():
            ToolApproval.objects.get_or_create(
                session_id=session_pk(session_id), call_id=request.call_id[:200],
                defaults={"tool": request.tool[:200], "turn": request.turn,
                          "arguments": storable_text(request.arguments),
                          "preview": storable_text(request.preview)})

    def approvals(self, session_id, call_ids) -> dict[str, Any]:
        rows = ToolApproval.objects.filter(session_id=session_pk(session_id),
                                           call_id__in=list(call_ids)).select_related(
                                               "decided_by")
        return {row.call_id: approvals.record_of(row) for row in rows}

    def delegation_depth(self, session_id) -> int:
        depth, parent = 0, Session.objects.filter(pk=session_pk(session_id)).values_list(
            "parent_id", flat=True).first()
        while parent is not None:
            depth += 1
            parent = Session.objects.filter(pk=parent).values_list("parent_id", flat=True).first()
        return depth
