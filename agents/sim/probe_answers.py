"""The simulated model's answers to probe questions, from the request's messages only.

Like the summarizer, this shares no code with the engine: it reads the numbered questions
of the last message and looks for each one's cue (the quoted label, or the words after
"mentions:") in the conversation before it, as a model scanning its context would. The
newest line holding every cue word is the answer; without one it says "unknown". So what
a summarizer dropped cannot be answered, and the engine's grading sees the loss.
"""
from __future__ import annotations

import re
from typing import Any

from agents.protocol import PROBE_MARKER

_QUESTION = re.compile(r"^\s*(\d{1,2})\.\s+(.*)$")
_QUOTED = re.compile(r'"([^"]+)"')
_MENTIONS = re.compile(r"mentions:\s*([^?]+)\?", re.I)
_TOKEN = re.compile(r"[\w.:/-]*\w", re.U)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+")
ANSWER_CHARS = 200


def is_probe_request(messages: list[dict[str, Any]]) -> bool:
    last = messages[-1] if messages else {}
    return isinstance(last.get("content"), str) and last["content"].startswith(PROBE_MARKER)


def _cue_words(question: str) -> list[str]:
    quoted = _QUOTED.search(question)
    mentioned = _MENTIONS.search(question)
    source = quoted.group(1) if quoted else mentioned.group(1) if mentioned else question
    # Every token of three characters or more, dates and codes included ("2025-01-31").
    return [t.casefold() for t in _TOKEN.findall(source) if len(t) >= 3]


def _lines(messages: list[dict[str, Any]]) -> list[str]:
    """The context's lines, and the sentences of long ones (a goal is one long line)."""
    out = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, str):
            continue
        for line in content.splitlines():
            line = line.strip()
            if line:
                out.append(line)
                out.extend(s for s in _SENTENCE.split(line) if s != line)
    return out


def answer(messages: list[dict[str, Any]]) -> str:
    """One numbered answer line per numbered question of the last message."""
    context = _lines(messages[:-1])
    folded = [line.casefold() for line in context]
    replies = []
    for line in messages[-1]["content"].splitlines():
        match = _QUESTION.match(line)
        if not match:
            continue
        words = _cue_words(match.group(2))
        # The shortest of the newest matches: a sentence rather than the line it is in.
        matches = [context[i] for i in range(len(context) - 1, -1, -1)
                   if words and all(w in folded[i] for w in words)][:3]
        found = min(matches, key=len) if matches else None
        replies.append(f"{match.group(1)}. {found[:ANSWER_CHARS] if found else 'unknown'}")
    return "\n".join(replies)
