"""Whether folding messages into the summary would tell it anything new.

A summary call costs a request and a new cached prefix; when the messages leaving the
window say nothing the current summary does not already hold, they are archived without
one. "Nothing new" is read the same way in every language and every run: every figure of
the messages is a value the summary holds (agents.compaction.numbers, archive refs aside),
and every word is one of the summary's words — a word being a run of letters and digits;
one of Latin or similar script counts from three characters and must be a whole word of
the summary, one with other letters (a run of CJK characters) must occur in its text.
Anything else the messages hold, however small, makes the summary worth asking for.
"""
from __future__ import annotations

import json
import re
from typing import Any, Iterable

from agents.compaction.numbers import summary_values, values_in, without_refs
from agents.context.history import Msg

_WORD = re.compile(r"\w+")
MIN_WORD_CHARS = 3  # "a", "of", "is": no fact is carried by these alone


def message_texts(messages: Iterable[Msg]) -> list[str]:
    """What a message says: its text and, for a tool call, the tool and its arguments'
    values (the parameter names are the tool's, not facts of the task)."""
    texts = []
    for msg in messages:
        if msg.text:
            texts.append(msg.text)
        for call in msg.data.get("tool_calls") or ():
            function = call.get("function") or {}
            texts.append(" ".join([str(function.get("name") or ""),
                                   *_values(function.get("arguments"))]))
    return texts


def _values(arguments: Any) -> list[str]:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return [arguments]  # not JSON: every word of it counts
    if isinstance(arguments, dict):
        return [text for value in arguments.values() for text in _values(value)]
    if isinstance(arguments, list):
        return [text for value in arguments for text in _values(value)]
    return [] if arguments is None else [str(arguments)]


def adds_nothing(messages: Iterable[Msg], summary_text: str) -> bool:
    """True when every figure and word of `messages` is already in `summary_text`."""
    if not summary_text:
        return False
    texts = message_texts(messages)
    known_values = summary_values(summary_text)
    # Figures first: most tool results bring a new one, and values_in is cached by content
    # (the compaction's audit reads the same texts).
    if any(not values_in(text) <= known_values for text in texts):
        return False
    folded = summary_text.casefold()
    known_words = set(_WORD.findall(folded))
    for text in texts:
        for word in set(_WORD.findall(without_refs(text).casefold())):
            if word.isdigit():
                continue  # a figure: compared by value above
            if word.isascii():
                if len(word) >= MIN_WORD_CHARS and word not in known_words:
                    return False
            elif word not in folded:
                return False
    return True
