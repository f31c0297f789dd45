"""Where a request marks its cache breakpoints (Anthropic-style, opt-in caching).

A provider that caches only what a request marks writes each marked prefix at 1.25× the
input price and reads it back at 0.1× from a later request that marks the same prefix or
a point at most 20 blocks after it. A mark pays off only on a prefix a later request
repeats, so the engine marks:

- the system prompt (with the tools before it), which no compaction changes, and the
  stable head (snapshot, the person's words, summary): it starts every request until the
  next compaction or freeze, and every summary request too;
- the last message an earlier request marked that this one still starts with: without
  a mark on or shortly after it, what that request wrote cannot be read;
- the end of the history, when the next request is expected to extend it (the keeper's
  forecast, ContextKeeper.next_request_extends); before a clear or a summary the history
  is rewritten, and a mark there would write what nothing reads, so the mark goes on the
  last message a clear is expected to leave as it is;
- in a summary request that repeats the agent's prefix, the head and the last folded
  message: the part earlier agent requests wrote, read back.

The unmanaged baseline marks as a plain client does: its last message (its history only
ever grows, so that prefix is always the next request's).

Nothing reaches the wire unless the profile says the provider takes marks
(ModelProfile.cache_marks, agents/provider/client.py).
"""
from __future__ import annotations

from typing import Any

from agents.compaction.compactor import FOLDED, INSTRUCTIONS
from agents.context.working import Request

HEAD_ZONES = frozenset({"system", "snapshot", "words", "summary"})


def agent_marks(request: Request, extends: bool, earlier: int = -1,
                kept: int = -1) -> tuple[int, ...]:
    """The breakpoints of an agent request (four at most, the providers' limit): the
    system prompt and the head's last message; `earlier`, the last message an earlier
    request marked that this one still starts with (read back, never written again); the
    history's last one when the next request will extend it, else `kept`, the last
    message the coming rewrite is expected to leave as it is."""
    zones = request.zones_of
    head = -1
    while head + 1 < len(zones) and zones[head + 1] in HEAD_ZONES:
        head += 1
    marks = {0, head} if head >= 0 else set()
    if earlier > head:
        marks.add(earlier)
    # The history's last message: read from the end (only the tail comes after it).
    end = next((i for i in range(len(zones) - 1, -1, -1) if zones[i] == "history"), -1)
    if extends and end > head:
        marks.add(end)
    elif not extends and head < kept <= end:
        marks.add(kept)
    return tuple(sorted(marks))


def summary_marks(messages: list[dict[str, Any]], parts: list[tuple[str, int]] | None
                  ) -> tuple[int, ...]:
    """A summary request that repeats the agent's prefix (head, folded messages, then the
    instruction): the system prompt, the head's last message and the last folded one. A
    fresh summary request (instruction first, material after) shares nothing with the
    agent's: none."""
    if (not parts or len(parts) != len(messages) or parts[0][0] != "system"
            or parts[-1][0] != INSTRUCTIONS):
        return ()
    names = [name for name, _ in parts]
    if FOLDED not in names:
        return ()
    first = names.index(FOLDED)
    last = len(names) - 1 - names[::-1].index(FOLDED)
    return tuple(sorted({i for i in (0, first - 1, last) if i >= 0}))


def plain_marks(messages: list[dict[str, Any]]) -> tuple[int, ...]:
    """The usual client's one breakpoint: the last message."""
    return (len(messages) - 1,) if messages else ()
