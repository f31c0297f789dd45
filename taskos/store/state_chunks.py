"""The engine state saved in pieces, so a turn writes only what changed (issue 8).

The loop hands over its whole state every turn (agents/loop/agent_loop.py). Saved as one JSON value
that was ~100 kB by mid-session: the recent history, the summary (twice: as data and as
text), the audit's figures and the person's messages, rewritten by every turn although
a turn only appends a round to the history and the rest changes once per compaction.

`split` keeps the small, always-changing part as the head (`Session.engine_state`) and
turns each history message and each large part into a chunk named by the hash of its
text. A chunk's key is its content, so the store inserts only keys it has not written
before: a turn costs its new messages and the head. `join` puts the state back together
from the head and the chunk texts; the result equals what the loop saved.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Iterable

from agents import storable_text, storable_value

MARK = "chunked"  # in the head: which format it is
INNER = "chunked_inner"  # in the head: {prefix: key} of the parts inside another part
# Parts that change per compaction, not per turn: (path in the state, key prefix). A part
# inside another comes before it: the audit's figures ("known", thousands of values that
# grow once per compaction) are a piece of their own, so the audit's small part, which
# changes every turn, no longer copies them into a new piece every turn (24 kB a turn on
# long-200, three quarters of all the state written).
PARTS = ((("companions", "audit", "known"), "known"),
         # The tool results the audit has not read (it reads them when a question needs
         # them): moved there and read at compactions, so a piece of its own as well.
         (("companions", "audit", "deferred"), "deferred"),
         # Every figure a summary ever wrote (the report's, to check the final answer):
         # ~22 kB by the end of long-1000, which stayed in the head and was written anew
         # by every turn although it grows only when a compaction writes a summary.
         (("companions", "report", "summary_figures"), "figures"),
         (("context", "summary"), "summary"), (("context", "summary_text"), "summary_text"),
         (("context", "person"), "person"), (("companions", "audit"), "audit"),
         (("handoff",), "handoff"))
HISTORY = ("context", "history")
INNER_PARTS = frozenset(path for path, _ in PARTS if any(
    len(outer) < len(path) and path[:len(outer)] == outer for outer, _ in PARTS))


def _dump(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    # JSON text escapes a NUL ("\\u0000", which join would turn back into one) and leaves a
    # lone surrogate as it is (no database encodes it): dumped again by the storable rule
    # (agents/storable.py) when either is there, so a resumed state holds what the store does.
    if "\\u0000" in text or storable_text(text) is not text:
        text = json.dumps(storable_value(value), ensure_ascii=False, separators=(",", ":"))
    return text


def chunk_key(prefix: str, text: str) -> str:
    return f"{prefix}:{hashlib.sha1(text.encode('utf-8', 'surrogatepass')).hexdigest()[:32]}"


def _parent(state: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any] | None:
    """The dict holding path[-1], or None when the state has no such place."""
    node: Any = state
    for name in path[:-1]:
        node = node.get(name) if isinstance(node, dict) else None
    return node if isinstance(node, dict) and path[-1] in node else None


def _copied_along(state: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any] | None:
    """Shallow copies of the dicts along `path` (the loop's dicts stay untouched)."""
    node = state
    for name in path[:-1]:
        child = node.get(name)
        if not isinstance(child, dict):
            return None
        node[name] = dict(child)
        node = node[name]
    return node if path[-1] in node else None


class MessageMemo:
    """The text and key of each history message saved last time, by its message dict
    (and of each part, by its object: see `part`).

    A turn's state holds ~20 history messages of which one or two are new; dumping and
    hashing all of them was most of a state save's own time. A saved message is
    {"data", "tokens", "turn", "ref"} around the engine's message dict, which is never
    changed in place (agents/context/history.py: a changed message is a new Msg): the same dict
    object with the same other fields dumps to the same text. Entries of messages that
    left the history are dropped at each save, so an id is never mistaken for a new
    dict's (the entry holds its dict alive until then).
    """

    def __init__(self) -> None:
        self._entries: dict[int, tuple[Any, Any, str, str]] = {}
        self._parts: dict[str, tuple[Any, str, str]] = {}  # by prefix: (value, text, key)

    def dump(self, message: Any, kept: dict[int, tuple]) -> tuple[str, str]:
        data = message.get("data") if isinstance(message, dict) else None
        figures = [(k, v) for k, v in message.items() if k != "data"] \
            if data is not None else None
        entry = self._entries.get(id(data)) if data is not None else None
        if entry is None or entry[0] is not data or entry[1] != figures:
            text = _dump(message)
            entry = (data, figures, text, chunk_key("msg", text))
        if data is not None:
            kept[id(data)] = entry
        return entry[2], entry[3]

    def keep_only(self, kept: dict[int, tuple]) -> None:
        self._entries = kept

    def part(self, prefix: str, value: Any) -> tuple[str, str]:
        """(text, key) of a part. Parts are replaced by their owners, never changed in
        place (a summary, the audit's figures, a handoff): the object saved last time
        dumps to the same text, so only a new object is dumped and hashed (the summary
        alone was ~50 kB of JSON a turn)."""
        entry = self._parts.get(prefix)
        if entry is None or entry[0] is not value:
            text = _dump(value)
            entry = self._parts[prefix] = (value, text, chunk_key(prefix, text))
        return entry[1], entry[2]


def split(state: dict[str, Any], memo: MessageMemo | None = None
          ) -> tuple[dict[str, Any], dict[str, str]]:
    """(head, {key: text}): the head names every chunk it needs, in order."""
    head = dict(state)
    chunks: dict[str, str] = {}
    memo = memo or MessageMemo()
    history_at = _copied_along(head, HISTORY)
    if history_at is not None and isinstance(history_at[HISTORY[-1]], list):
        kept: dict[int, tuple] = {}
        keys = []
        for message in history_at[HISTORY[-1]]:
            text, key = memo.dump(message, kept)
            chunks[key] = text
            keys.append(key)
        memo.keep_only(kept)
        history_at[HISTORY[-1]] = {MARK: keys}
    for path, prefix in PARTS:
        holder = _copied_along(head, path)
        if holder is None or holder[path[-1]] in (None, "", [], {}):
            continue  # small or absent: stays in the head
        text, key = memo.part(prefix, holder[path[-1]])
        chunks[key] = text
        holder[path[-1]] = {MARK: key}
        if path in INNER_PARTS:
            head.setdefault(INNER, {})[prefix] = key  # its mark is inside the outer piece
    head[MARK] = 1
    return head, chunks


def needed(head: dict[str, Any]) -> list[str]:
    """Every chunk key the head names."""
    if not head or not head.get(MARK):
        return []
    keys: list[str] = []
    history_at = _parent(head, HISTORY)
    if history_at is not None and isinstance(history_at[HISTORY[-1]], dict):
        keys += history_at[HISTORY[-1]].get(MARK, [])
    for path, _ in PARTS:
        holder = _parent(head, path)
        if holder is not None and isinstance(holder[path[-1]], dict) and MARK in holder[path[-1]]:
            keys.append(holder[path[-1]][MARK])
    return keys + list((head.get(INNER) or {}).values())


def join(head: dict[str, Any] | None, read: Callable[[Iterable[str]], dict[str, str]]
         ) -> dict[str, Any] | None:
    """The state as saved: the head with each chunk put back (`read`: keys → texts)."""
    if not head or not head.get(MARK):
        return head  # saved whole (before this format) or nothing saved
    keys = needed(head)
    texts = read(keys)
    missing = [k for k in keys if k not in texts]
    if missing:
        raise LookupError(f"the saved engine state names {len(missing)} pieces that are not "
                          f"stored (first: {missing[0]}); it cannot be resumed")
    state = dict(head)
    state.pop(MARK)
    state.pop(INNER, None)
    history_at = _copied_along(state, HISTORY)
    if history_at is not None and isinstance(history_at[HISTORY[-1]], dict):
        history_at[HISTORY[-1]] = [json.loads(texts[k]) for k in history_at[HISTORY[-1]][MARK]]
    for path, _ in reversed(PARTS):  # an outer part first: an inner one's mark is in it
        holder = _copied_along(state, path)
        if holder is not None and isinstance(holder[path[-1]], dict) and MARK in holder[path[-1]]:
            holder[path[-1]] = json.loads(texts[holder[path[-1]][MARK]])
    return state
