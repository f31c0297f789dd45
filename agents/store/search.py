"""Keyword search over archived text, the same for every Store (feature T4).

The in-memory store searches with these directly; the database store indexes the same
keywords, so a recall finds the same rows whichever store a session runs on.
"""
from __future__ import annotations

import re

_WORD = re.compile(r"[\w\u4e00-\u9fff]+", re.UNICODE)
_CJK = re.compile(r"[\u4e00-\u9fff]")


def keywords(text: str) -> set[str]:
    """Lower-cased words; each CJK character counts as a word so Chinese is searchable."""
    out: set[str] = set()
    for word in _WORD.findall(text.lower()):
        if not word.isascii() and _CJK.search(word):  # isascii: no regex for most words
            out.update(ch for ch in word if "\u4e00" <= ch <= "\u9fff")
            out.update(re.findall(r"[a-z0-9_]+", word))
        else:
            out.add(word)
    return out


def excerpt_around(text: str, terms: set[str], width: int = 240) -> str:
    """A window of `text` around the first matching term."""
    lower = text.lower()
    pos = min((p for p in (lower.find(t) for t in terms) if p >= 0), default=0)
    start = max(0, pos - width // 3)
    snippet = text[start:start + width]
    return ("…" if start else "") + snippet + ("…" if start + width < len(text) else "")
