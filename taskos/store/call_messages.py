"""MODEL_CALL rows store what is new in a request, not the whole prompt every time.

Between two compactions a request is the previous one plus a few messages (the layout
keeps the prefix stable for the provider's cache, agents/context/working.py), so storing every
request whole made event storage grow with calls × window. A stored MODEL_CALL payload
now holds in "messages" only the messages no earlier row holds (as sent, without the
engine's annotations, which "message_meta" keeps per message), and in "message_parts"
how to rebuild the exact list: `[seq, start, stop]` means `messages[start:stop]` *as
stored in the row of that seq* (the row itself included). Parts only ever point at a
row's own stored list, never through another row's parts, so rebuilding is one query
however long the session, and a row without "message_parts" (older rows, or one stored
whole) is read as before.

A new message whose text is an archived row's, as archived (a tool result or a person's
message that was not cut), is stored as {"content_ref": <row id>} in place of "content":
the text is in the archive already, and a tool result is most of what a call adds. The
rebuild reads those rows back. Which texts were archived as they are is known from the
store (`remember_archived`, this process's recent rows), never guessed from the text.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable

from agents import ANNOTATIONS
from taskos.runs.models import ArchivedTurn, SessionEvent

# A request shares its prefix with the previous one; after this many parts (one per
# call since the last whole row) the next row is stored whole, so a rebuild reads at
# most this many rows.
MAX_PARTS = 64


META = ANNOTATIONS  # the engine's annotations of a message, not sent to the model
# The texts this process archived lately, by ref, exactly as stored: a call made soon
# after sends them again (a tool result the turn before, the person's new message).
RECENT_ARCHIVED = 256
# ref -> (session pk, row id, text)
_archived: OrderedDict[str, tuple[str, int, str]] = OrderedDict()


def remember_archived(ref: str, session_pk: int, row_id: int, text: str) -> None:
    """The store archived `text` as it is, as row `row_id` of the session (taskos/store/
    django_store.py). A ref names one new row, so insertion order is age order: the oldest go."""
    _archived[ref] = (str(session_pk), row_id, text)
    while len(_archived) > RECENT_ARCHIVED:
        _archived.popitem(last=False)


def _swapped(message: dict[str, Any], old: str, new: str, value: Any) -> dict[str, Any]:
    """`message` with key `old` replaced by `new` holding `value`, in the same place (the
    stored key order is how the body is rebuilt byte for byte)."""
    return {(new if key == old else key): (value if key == old else kept)
            for key, kept in message.items()}


def _by_ref(message: dict[str, Any], ref: str, session: str) -> dict[str, Any]:
    """The message with its text replaced by the row of the session's own archive holding
    it, when it is one (the rebuild reads only that archive)."""
    text = message.get("content")
    found = _archived.get(ref) if ref and isinstance(text, str) else None
    if found is None or found[0] != session or not (found[2] is text or found[2] == text):
        return message
    return _swapped(message, "content", "content_ref", found[1])


class CallCompactor:
    """Turns each MODEL_CALL payload of one session into its stored form, in seq order.

    Messages are compared as sent (without the drawer's zone and token annotations, kept
    apart in "message_meta"), so a summary request that repeats the agent's prefix shares
    it with the agent call before it.
    """

    def __init__(self, session_pk: int | str = "") -> None:
        self.session = str(session_pk)  # only its own archive rows stand in for texts
        self._parts: list[list[int]] = []  # the previous stored call's parts
        self._sent: list[dict[str, Any]] = []  # and its whole message list, as sent

    def stored(self, seq: int, payload: dict[str, Any]) -> dict[str, Any]:
        messages = payload.get("messages")
        if not isinstance(messages, list) or not messages:
            return payload
        sent = [{k: v for k, v in m.items() if k not in META} for m in messages]
        meta = [[m.get("zone", ""), m.get("tokens", 0)] + ([m["ref"]] if m.get("ref") else [])
                for m in messages]
        shared = common_prefix(self._sent, sent)
        parts = take(self._parts, shared)
        if len(sent) > shared:
            parts.append([seq, 0, len(sent) - shared])
        self._sent = sent
        if not shared or len(parts) > MAX_PARTS:  # stored whole
            shared, parts = 0, [[seq, 0, len(sent)]]
        self._parts = parts
        new = [_by_ref(m, str(messages[shared + i].get("ref") or ""), self.session)
               for i, m in enumerate(sent[shared:])]
        return {**payload, "messages": new, "message_parts": parts, "message_meta": meta}

    def state(self) -> tuple[list[list[int]], list[dict[str, Any]]]:
        return self._parts, self._sent

    def restore(self, state: tuple[list[list[int]], list[dict[str, Any]]]) -> None:
        self._parts, self._sent = state

    def forget(self) -> None:
        """After a rollback the previous row may not exist: the next call is stored whole."""
        self._parts, self._sent = [], []


def common_prefix(old: list[Any], new: list[Any]) -> int:
    n, limit = 0, min(len(old), len(new))
    while n < limit and (old[n] is new[n] or old[n] == new[n]):
        n += 1
    return n


def take(parts: list[list[int]], count: int) -> list[list[int]]:
    """The parts that make up the first `count` messages."""
    out: list[list[int]] = []
    for seq, start, stop in parts:
        if count <= 0:
            break
        size = min(stop - start, count)
        out.append([seq, start, start + size])
        count -= size
    return out


class MessageResolver:
    """Rebuilds stored MODEL_CALL message lists; keeps the rows it read for the next call."""

    def __init__(self, session_pk: int) -> None:
        self.session_pk = session_pk
        self._stored: dict[int, list[dict[str, Any]]] = {}
        self._texts: dict[int, str] = {}  # archive rows read, by id

    def remember(self, seq: int, payload: dict[str, Any]) -> None:
        self._stored[seq] = payload.get("messages") or []

    def messages(self, seq: int, payload: dict[str, Any]) -> list[dict[str, Any]]:
        """The call's messages as the engine emitted them (zone and tokens included)."""
        parts = payload.get("message_parts")
        self.remember(seq, payload)
        if not parts:  # a row stored before parts existed: whole, as emitted
            return self._with_texts(list(payload.get("messages") or []))
        self._load(p[0] for p in parts)
        out: list[dict[str, Any]] = []
        for part_seq, start, stop in parts:
            out.extend(self._stored.get(part_seq, [])[start:stop])
        out = self._with_texts(out)
        meta = payload.get("message_meta") or []
        return [{**m, **dict(zip(META, meta[i]))} if i < len(meta) else dict(m)
                for i, m in enumerate(out)]

    def _with_texts(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Messages stored by archive row get their text back, in the same place."""
        refs = {m["content_ref"] for m in messages if "content_ref" in m}
        if not refs:
            return messages
        if wanted := refs - self._texts.keys():
            self._texts.update(ArchivedTurn.objects.filter(
                session_id=self.session_pk, pk__in=wanted).values_list("id", "content"))
        return [_swapped(m, "content_ref", "content", self._texts.get(
                    m["content_ref"], f"[archive row {m['content_ref']} is no longer stored]"))
                if "content_ref" in m else m for m in messages]

    def _load(self, seqs: Iterable[int]) -> None:
        missing = {s for s in seqs if s not in self._stored}
        if missing:  # discarded rows too: a later call may share their messages
            rows = SessionEvent.all_objects.filter(session_id=self.session_pk, seq__in=missing)
            for seq, messages in rows.values_list("seq", "payload__messages"):
                self._stored[seq] = messages or []


def full_payload(session_pk: int, seq: int, payload: dict[str, Any]) -> dict[str, Any]:
    """A stored MODEL_CALL payload with its whole message list, as the engine emitted it."""
    if not payload.get("message_parts"):
        return payload
    out = {k: v for k, v in payload.items() if k not in ("message_parts", "message_meta")}
    out["messages"] = MessageResolver(session_pk).messages(seq, payload)
    return out
