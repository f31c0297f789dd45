"""Text no database can store, made storable the same way everywhere (issue 25 item 4).

PostgreSQL refuses NUL (U+0000) in text columns and inside jsonb, and no database, file or
HTTP body takes a lone surrogate (U+D800–U+DFFF: not encodable as UTF-8). A model reply, a
tool's arguments, a person's message or a pasted sentence may still hold either. The
rule: each such code point becomes one visible character,

- NUL becomes NUL_MARK "␀" (U+2400, SYMBOL FOR NULL): the person and the model see that
  a NUL stood there;
- a lone surrogate becomes BAD_MARK "\ufffd" (U+FFFD, REPLACEMENT CHARACTER), what a
  UTF-8 decoder shows for bytes it cannot read.

One code point for one, so a text's length, the offsets read_ref pages by and every
character cap mean what they meant. The engine applies the rule where text enters it
(the model's reply, tool arguments, the goal, people's messages), so what it keeps in
memory, what it sends and what the store returns agree, and the compaction audit
compares like with like; the web side applies it again at the store boundary, for
whatever reaches a row some other way. Applying it twice changes nothing.

Tool output that is not clean text is another matter: it is kept as exact bytes
(agents/tools/render.py), and the model sees a description of them.
"""
from __future__ import annotations

import re
from typing import Any

NUL_MARK = "\u2400"
BAD_MARK = "\ufffd"

# A Python string holds code points, not UTF-16 units (json.loads joins an escaped pair
# into one), so every code point in the surrogate range is one no UTF-8 encoder takes.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _mark(found: re.Match) -> str:
    return NUL_MARK if found.group() == "\x00" else BAD_MARK


def _storable(text: str) -> bool:
    """The check every string written goes through, so the fast one: a NUL search, then
    ASCII (a flag CPython keeps) or a UTF-8 encoding (ten times faster than the regex)."""
    if "\x00" in text:
        return False
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def storable_text(text: str) -> str:
    """`text` with NUL shown as "␀" and each lone surrogate as "\ufffd"; the same object
    when it holds neither."""
    if _storable(text):
        return text
    return _UNSTORABLE.sub(_mark, text)


_PLAIN = frozenset({int, float, bool, type(None)})
_NESTED = frozenset({dict, list, tuple})


def _unstorable_inside(value: Any) -> bool:
    """Whether any string in `value` (dict keys included) breaks the rule. It runs on every
    payload the web side stores, so exact types are tried first (subclasses still count),
    and a stack, not recursion: tool arguments may be nested as deep as json.loads allows."""
    pending = [value]
    push = pending.append
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            for key in item:
                if isinstance(key, str) and not _storable(key):
                    return True
            item = item.values()
        elif isinstance(item, str):
            item = (item,)
        elif not isinstance(item, (list, tuple)):
            continue
        for inner in item:
            kind = type(inner)
            if kind is str:
                if not _storable(inner):
                    return True
            elif kind in _PLAIN:
                continue
            elif kind in _NESTED or isinstance(inner, (dict, list, tuple)):
                push(inner)
            elif isinstance(inner, str) and not _storable(inner):
                return True
    return False


def storable_value(value: Any) -> Any:
    """A JSON-like value with the rule applied to every string in it, keys included: the
    same object when nothing needs it (the common case costs one scan), else a copy
    (tuples come back as lists, as JSON has them)."""
    if isinstance(value, str):
        return storable_text(value)
    if not _unstorable_inside(value):
        return value
    if not isinstance(value, (dict, list, tuple)):
        return value
    root: Any = {} if isinstance(value, dict) else []
    pending = [(value, root)]
    while pending:
        source, target = pending.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in items:
            if isinstance(item, (dict, list, tuple)):
                copied: Any = {} if isinstance(item, dict) else []
                pending.append((item, copied))
            else:
                copied = storable_text(item) if isinstance(item, str) else item
            if isinstance(target, dict):
                target[storable_text(key) if isinstance(key, str) else key] = copied
            else:
                target.append(copied)
    return root
