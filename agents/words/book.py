"""Anchors and tasks as the loop sees them, kept in step with the Store (features C8, W4).

At every turn the book reloads anchors and tasks from the Store; whatever differs from
what the engine itself last wrote was edited by a person in the admin, and is reported
as such. Changes to tier-1/2 anchors raise the anchor trigger (C3 b). A Store that counts
people's edits (`person_edits`, the database's) is reloaded only when that count moved:
otherwise the book's own lists are what is stored.
"""
from __future__ import annotations

from typing import Callable

from agents.events import AnchorChanged, Event, TasksChanged
from agents.store.interface import AnchorRecord, Store, TaskRecord
from agents.words.anchors import extract_anchors
from agents.words.conclusions import extract_conclusions
from agents.words.merge import AnchorChange, merge_anchors, roll_off
from agents.words.quoted import own_text

MAX_TOOL_CONCLUSIONS = 10  # active tier-2 anchors from tools; older ones are replaced
UNEDITED: dict = {}  # `_stored` when the edit count said nobody edited (compared by identity)
CONCLUSION_SCAN_CHARS = 1000  # findings lead a result; scoring every line costs milliseconds


def _anchor_sig(a: AnchorRecord) -> tuple:
    return (a.tier, a.text, a.active, a.source)


def _edit_source(source: str) -> str:
    """Who changed an anchor outside the engine: a pin from the drawer, else the admin."""
    return "pin" if source == "pin" else "admin"


def _tasks_sig(tasks: list[TaskRecord]) -> str:
    return repr(sorted((t.id, t.subject, t.state, t.owner, tuple(t.blocked_by)) for t in tasks))


class AnchorBook:
    def __init__(self, session_id: str, store: Store, emit: Callable[[Event], None]) -> None:
        self.session_id = session_id
        self.store = store
        self.emit = emit
        self.anchors: list[AnchorRecord] = store.load_anchors(session_id)
        self.tasks: list[TaskRecord] = store.load_tasks(session_id)
        self._known = {a.id: _anchor_sig(a) for a in self.anchors}
        self._tasks_known = _tasks_sig(self.tasks)
        self.trigger_pending = False  # a tier-1/2 change since the last snapshot rebuild
        self._stored: dict | None = None  # the Store's anchors, read lazily per batch
        self._edits_seen: int | None = None  # people's edit count the lists reflect
        self._counts_edits = callable(getattr(store, "person_edits", None))
        # People's edits not yet handed to the loop, which archives each as the person's
        # message (C19): (source, new text, the text it replaces or None).
        self.person_edits: list[tuple[str, str, str | None]] = []

    def _person_edits(self, fresh: bool = False) -> int | None:
        return self.store.person_edits(self.session_id, fresh=fresh) \
            if self._counts_edits else None

    # --- what people changed
    def sync(self, turn: int) -> None:
        """Reload from the Store and report admin edits (only after one, where counted)."""
        edits = self._person_edits()
        if edits is not None and edits == self._edits_seen:
            # Nothing but the engine wrote since the last read: the lists are the Store's,
            # in the Store's order (by id), as a reload would give them.
            self.anchors.sort(key=lambda a: (a.id is None, a.id or 0))
            return
        self.anchors = self.store.load_anchors(self.session_id)
        loaded = {a.id for a in self.anchors}
        for anchor in self.anchors:
            before = self._known.get(anchor.id)
            if before == _anchor_sig(anchor):
                continue
            old = before[1] if before else None
            self._report(turn, anchor, old, "added" if before is None else "changed",
                         _edit_source(anchor.source))
            if old != anchor.text:  # a tier or activity change says nothing new
                self.person_edits.append((_edit_source(anchor.source), anchor.text, old))
        for anchor_id, (tier, text, _active, source) in self._known.items():
            if anchor_id not in loaded:  # deactivated or deleted in the admin, or unpinned
                gone = AnchorRecord(tier=tier, text=text, active=False, id=anchor_id,
                                    source=source)
                self._report(turn, gone, text, "removed", _edit_source(source))
                self.person_edits.append((_edit_source(source), "", text))
        self._known = {a.id: _anchor_sig(a) for a in self.anchors}
        self.tasks = self.store.load_tasks(self.session_id)
        if _tasks_sig(self.tasks) != self._tasks_known:
            self._tasks_known = _tasks_sig(self.tasks)
            self.emit(TasksChanged(tasks=[t.to_dict() for t in self.tasks], source="admin",
                                   turn=turn))
        self._edits_seen = edits  # read before the lists: a later edit moves it again

    def take_person_edits(self) -> list[tuple[str, str, str | None]]:
        """People's edits since the last call, oldest first: (source, new text or "" for a
        removal, the replaced text or None)."""
        edits, self.person_edits = self.person_edits, []
        return edits

    def tasks_written_by_agent(self) -> None:
        """The agent's own task tools changed the list: not an admin edit."""
        self.tasks = self.store.load_tasks(self.session_id)
        self._tasks_known = _tasks_sig(self.tasks)

    # --- what the engine extracts
    def from_user(self, text: str, turn: int, source: str = "user") -> None:
        # Pasted material (an e-mail, a quote, a fenced block) is no constraint (C19).
        self._apply(merge_anchors(self.anchors, extract_anchors(own_text(text), source=source,
                                                                turn=turn)), turn, source)

    def from_tool(self, conclusions: list[str], text: str, turn: int, tool_name: str = "") -> None:
        """Key findings become tier-2 anchors: the tool's own, else the result's best lines."""
        if conclusions:
            candidates = [AnchorRecord(tier=2, text=line[:200], source="tool", turn=turn,
                                       key=f"fact:{tool_name}:{line.split(':')[0][:40].lower()}")
                          for line in conclusions[:2]]
        else:
            candidates = extract_conclusions(text[:CONCLUSION_SCAN_CHARS], source="tool",
                                             turn=turn, tool_name=tool_name, limit=2)
        self._apply(merge_anchors(self.anchors, candidates), turn, "tool")
        tool_anchors = [a for a in self.anchors if a.active and a.tier == 2 and a.source == "tool"]
        for old in tool_anchors[:-MAX_TOOL_CONCLUSIONS]:
            old.active = False
            self._save(old)
            self._report(turn, old, old.text, "removed", "tool", trigger=False)

    def roll(self, turn: int) -> None:
        self._apply(roll_off(self.anchors, turn), turn, "tool", trigger=False)

    def hard_constraints(self) -> list[str]:
        return [a.text for a in self.anchors if a.active and a.tier == 1]

    # --- internals
    def _apply(self, changes: list[AnchorChange], turn: int, source: str,
               trigger: bool = True) -> None:
        self._stored = None
        for change in changes:
            if change.old is not None and change.action in ("changed", "removed"):
                change.old.active = False
                self._save(change.old)
            if change.new is not None and change.action in ("added", "changed"):
                change.new.source = change.new.source or source
                self._save(change.new)
            shown = change.new or change.old
            old_text = change.old.text if change.old else None
            # Tool conclusions that merely add data refresh the snapshot quietly; changes
            # of what was concluded, and anything a person said, rebuild it at once.
            fires = trigger and shown.tier <= 2 and (source != "tool" or change.action == "changed")
            # A replaced constraint stays in the Store, inactive; the event names both.
            self._report(turn, shown, old_text, change.action, shown.source or source,
                         trigger=fires, old_id=change.old.id if change.old else None)

    def _edited_by_a_person(self, anchor: AnchorRecord) -> bool:
        """True when the stored anchor differs from what the engine last saw of it."""
        if anchor.id is None:
            return False
        if self._stored is None:  # one read per batch of changes, not one per anchor
            edits = self._person_edits(fresh=True)
            # Nobody edited since the lists were read: what is stored is what is known.
            self._stored = UNEDITED if edits is not None and edits == self._edits_seen else {
                a.id: _anchor_sig(a) for a in self.store.load_anchors(self.session_id)}
        if self._stored is UNEDITED:
            return False
        return self._stored.get(anchor.id) != self._known.get(anchor.id)

    def _save(self, anchor: AnchorRecord) -> None:
        if self._edited_by_a_person(anchor):
            # Edited in the admin since this turn began: the person's edit wins over the
            # engine's automatic update; the next sync reports it and rebuilds the snapshot.
            self.anchors = [a for a in self.anchors if a.id != anchor.id]
            return
        saved = self.store.save_anchor(self.session_id, anchor)
        anchor.id = saved.id
        self.anchors = [a for a in self.anchors if a is not anchor]
        if anchor.active:
            self.anchors.append(anchor)
            self._known[anchor.id] = _anchor_sig(anchor)
        else:
            self._known.pop(anchor.id, None)

    def _report(self, turn: int, anchor: AnchorRecord, old: str | None, action: str,
                source: str, trigger: bool = True, old_id: int | None = None) -> None:
        if trigger and anchor.tier <= 2:
            self.trigger_pending = True
        self.emit(AnchorChanged(id=anchor.id, tier=anchor.tier, old=old,
                                new=anchor.text if action != "removed" else None, source=source,
                                action=action, turn=turn,
                                old_id=old_id if old_id != anchor.id else None))
