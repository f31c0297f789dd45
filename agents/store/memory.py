"""An in-memory Store for engine tests, headless runs and the benchmark."""
from __future__ import annotations

import base64
import copy
import json
from collections import defaultdict
from typing import Any

from agents.storable import storable_text
from agents.store.interface import AnchorRecord, ApprovalRecord, ArchiveHit, ChildRecord, TaskRecord
from agents.store.search import excerpt_around, keywords


def _copied(anchor: AnchorRecord) -> AnchorRecord:
    """copy.copy(anchor) without copy's generic protocol: a quarter of its cost, and the
    book reads every active anchor twice a turn."""
    clone = object.__new__(type(anchor))
    clone.__dict__.update(anchor.__dict__)
    return clone


class MemoryStore:
    def __init__(self) -> None:
        self._archive: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._index: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
        # Rows are indexed when a search needs them, not when archived: most sessions
        # archive thousands of rows and search a few times (a database indexes on insert).
        self._indexed: dict[str, int] = defaultdict(int)  # rows 1..n are in the index
        # Every anchor by id, and the active ones by id: the working set stays small
        # however many anchors a long session retired, so a turn never scans them all.
        self._anchors: dict[str, dict[int, AnchorRecord]] = defaultdict(dict)
        self._active: dict[str, dict[int, AnchorRecord]] = defaultdict(dict)
        self._tasks: dict[str, list[TaskRecord]] = defaultdict(list)
        self._notes: dict[str, dict[str, Any]] = {}
        self._state: dict[str, dict[str, Any]] = {}
        self.user_messages: dict[str, list[str]] = defaultdict(list)
        self._taken: dict[str, list[tuple[int, str]]] = defaultdict(list)  # (turn, text)
        self.compaction_requests: dict[str, str] = {}
        # The person's files not told to the agent yet, and those taken, by turn (T9).
        self.new_files: dict[str, list[tuple[str, int]]] = defaultdict(list)
        self._files_taken: dict[str, list[tuple[int, tuple[str, int]]]] = defaultdict(list)
        self.cancelled: set[str] = set()
        self._next_anchor_id = 1
        # Sub-agent sessions (feature T6): id -> {"parent", "request", "record"}.
        self.sessions: dict[str, dict[str, Any]] = {}
        # Ask-first calls (feature T11): (session id, call id) -> record.
        self._approvals: dict[tuple[str, str], ApprovalRecord] = {}

    # archive
    def archive(self, session_id, turn, role, content, *, tool_name="", tool_args=None,
                tokens=0, raw_bytes=None) -> str:
        rows = self._archive[session_id]
        if raw_bytes is not None and not content:
            content = base64.b64encode(raw_bytes).decode("ascii")
        else:  # the rule a database store needs (agents/storable.py), so both read alike
            content = storable_text(content or "")
        rows.append({"turn": turn, "role": role, "content": content, "tool_name": tool_name,
                     "tool_args": tool_args or {}, "tokens": tokens})
        return f"arc:{session_id}:{len(rows)}"

    def _index_new_rows(self, session_id) -> dict[str, set[int]]:
        rows, index = self._archive[session_id], self._index[session_id]
        for number in range(self._indexed[session_id] + 1, len(rows) + 1):
            row = rows[number - 1]
            if not row.get("discarded"):
                for word in keywords(row["content"][:200_000]):
                    index[word].add(number)
        self._indexed[session_id] = len(rows)
        return index

    def read_ref(self, session_id, ref) -> str | None:
        try:
            prefix, sid, number = ref.split(":")
            # Its own archive, or a sub-agent's below it (T6): child ids extend the parent's.
            if prefix != "arc" or not (sid == str(session_id) or (
                    sid.startswith(f"{session_id}.") and sid in self.sessions)):
                return None
            row = self._archive[sid][int(number) - 1]
            return None if row.get("discarded") else row["content"]
        except (ValueError, IndexError):
            return None

    def search_archive(self, session_id, query, limit=5) -> list[ArchiveHit]:
        terms = keywords(query)
        if not terms:
            return []
        scores: dict[int, int] = defaultdict(int)
        index = self._index_new_rows(session_id)
        for term in terms:
            for row in index.get(term, ()):
                scores[row] += 1
        best = sorted(scores, key=lambda r: (-scores[r], -r))[:limit]
        rows = self._archive[session_id]
        return [ArchiveHit(ref=f"arc:{session_id}:{r}", turn=rows[r - 1]["turn"],
                           role=rows[r - 1]["role"], tool_name=rows[r - 1]["tool_name"],
                           excerpt=excerpt_around(rows[r - 1]["content"], terms))
                for r in best]

    def archived_rows(self, session_id) -> list[dict[str, Any]]:
        return [row for row in self._archive[session_id] if not row.get("discarded")]

    def discard_uncommitted(self, session_id, from_turn) -> dict[str, int]:
        # Rows become tombstones rather than disappearing: refs are list positions here.
        removed = 0
        for number, row in enumerate(self._archive[session_id], start=1):
            if row["turn"] >= from_turn and not row.get("discarded"):
                row["discarded"], removed = True, removed + 1
                if number <= self._indexed[session_id]:  # else never indexed
                    for word in keywords(row["content"][:200_000]):
                        self._index[session_id][word].discard(number)
        taken = self._taken[session_id]
        back = [text for turn, text in taken if turn >= from_turn]
        self._taken[session_id] = [(t, text) for t, text in taken if t < from_turn]
        self.user_messages[session_id][:0] = back
        files = self._files_taken[session_id]
        self.new_files[session_id][:0] = [entry for turn, entry in files if turn >= from_turn]
        self._files_taken[session_id] = [(t, entry) for t, entry in files if t < from_turn]
        for child_id, entry in list(self.sessions.items()):  # asked by the undone turn
            if (entry["parent"] == session_id and entry["request"].get("turn", 0) >= from_turn
                    and entry["record"].status == "queued"):
                del self.sessions[child_id]
        for key, approval in list(self._approvals.items()):  # asked by the undone turn
            if key[0] == session_id and approval.turn >= from_turn and not approval.decided:
                del self._approvals[key]
        return {"archive_rows": removed, "messages": len(back)}

    # anchors
    def load_anchors(self, session_id) -> list[AnchorRecord]:
        active = self._active[session_id]
        return [_copied(active[i]) for i in sorted(active)]

    def save_anchor(self, session_id, anchor) -> AnchorRecord:
        anchor = _copied(anchor)
        if anchor.id is None:
            anchor.id = self._next_anchor_id
            self._next_anchor_id += 1
        self._anchors[session_id][anchor.id] = anchor
        if anchor.active:
            self._active[session_id][anchor.id] = anchor
        else:
            self._active[session_id].pop(anchor.id, None)
        return _copied(anchor)

    # tasks and notes
    def load_tasks(self, session_id) -> list[TaskRecord]:
        return copy.deepcopy(self._tasks[session_id])

    def save_tasks(self, session_id, tasks) -> None:
        self._tasks[session_id] = copy.deepcopy(list(tasks))

    def load_notes(self, session_id) -> dict[str, Any]:
        return copy.deepcopy(self._notes.get(session_id, {}))

    def save_notes(self, session_id, notes) -> None:
        self._notes[session_id] = copy.deepcopy(notes)

    # state
    def load_state(self, session_id):
        state = self._state.get(session_id)
        # A JSON round trip, like a database: proves the saved state is plain JSON.
        return json.loads(json.dumps(state, ensure_ascii=False)) if state is not None else None

    def save_state(self, session_id, state) -> None:
        # The loop hands over a fresh dict every turn and never mutates it afterwards, so
        # keeping it as given is safe and keeps this store out of the per-turn cost.
        self._state[session_id] = state

    # requests from people
    def take_user_messages(self, session_id, turn=0) -> list[str]:
        texts = [storable_text(text) for text in self.user_messages.pop(session_id, [])]
        self._taken[session_id].extend((turn, text) for text in texts)
        return texts

    def add_workspace_file(self, session_id, path: str, size: int) -> None:
        """A person put a file into the workspace (what the dashboard's upload records)."""
        self.new_files[session_id].append((path, size))

    def take_new_files(self, session_id, turn=0) -> list[tuple[str, int]]:
        files = self.new_files.pop(session_id, [])
        self._files_taken[session_id].extend((turn, entry) for entry in files)
        return files

    def take_compaction_request(self, session_id):
        return self.compaction_requests.pop(session_id, None)

    def cancel_requested(self, session_id) -> bool:
        # Cancelling a parent cancels its children: any cancelled ancestor counts.
        while session_id is not None:
            if session_id in self.cancelled:
                return True
            session_id = self.sessions.get(session_id, {}).get("parent")
        return False

    # sub-agents
    def create_child(self, parent_id, request) -> str:
        siblings = sum(1 for e in self.sessions.values() if e["parent"] == parent_id)
        child_id = f"{parent_id}.{siblings + 1}"
        self.sessions[child_id] = {"parent": parent_id, "request": copy.deepcopy(request),
                                   "record": ChildRecord(id=child_id, goal=request["goal"],
                                                         status="queued")}
        for text in request.get("anchors", []):
            self.save_anchor(child_id, AnchorRecord(tier=1, text=text, source="user"))
        return child_id

    def list_children(self, parent_id) -> list[ChildRecord]:
        return [copy.copy(e["record"]) for e in self.sessions.values()
                if e["parent"] == parent_id]

    def delegation_depth(self, session_id) -> int:
        depth = 0
        while session_id in self.sessions:
            session_id, depth = self.sessions[session_id]["parent"], depth + 1
        return depth

    def child_request(self, session_id) -> dict[str, Any]:
        return copy.deepcopy(self.sessions[session_id]["request"])

    def set_outcome(self, session_id, status, *, final_answer="", error="",
                    report=None) -> None:
        """What the headless runner records when a child stops (the ORM's row update)."""
        record = self.sessions[session_id]["record"]
        report = report or {}
        record.status, record.final_answer, record.error = status, final_answer, error
        record.turns = int(report.get("turns") or 0)
        record.total_input_tokens = int(report.get("total_input_tokens") or 0)
        record.peak_input_tokens = int(report.get("peak_input_tokens") or 0)
        own = float((report.get("cost") or {}).get("profile", 0) or 0)
        record.cost = own + sum(c.cost for c in self.list_children(session_id))
        answers = [i for i, row in enumerate(self._archive[session_id], 1)
                   if row["role"] == "assistant" and row["content"] == final_answer
                   and not row.get("discarded")]
        record.answer_ref = f"arc:{session_id}:{answers[-1]}" if answers and final_answer else ""

    # ask before a tool acts (T11)
    def request_approval(self, session_id, request) -> None:
        self._approvals.setdefault((session_id, request.call_id), copy.copy(request))

    def approvals(self, session_id, call_ids) -> dict[str, ApprovalRecord]:
        return {call_id: copy.copy(self._approvals[(session_id, call_id)])
                for call_id in call_ids if (session_id, call_id) in self._approvals}

    def decide_approval(self, session_id, call_id, *, approve: bool, reason: str = "",
                        by: str = "") -> None:
        """What a person's decision records (the Django side's approve/deny views)."""
        record = self._approvals[(session_id, call_id)]
        if record.decided:
            raise ValueError(f"call {call_id} was already {record.status}")
        record.status = "approved" if approve else "denied"
        record.reason, record.decided_by = reason, by
