"""The simulated provider's prompt cache, modelled on how providers bill repeated prefixes.

A request's cached part is its longest prefix — the tool list first, then the messages,
compared exactly — that an earlier request of the same session also began with. Providers
cache only from CACHE_MIN_TOKENS on and then in CACHE_BLOCK_TOKENS steps, so a shared
prefix of 1500 tokens bills 1408 as cached (1024 + 3 × 128) and one of 900 bills none.

The comparison is per part (the tool list, then each message) through a hash chain: the
n-th link hashes the (n-1)-th link with the n-th part's exact JSON, so one set lookup per
part answers "did an earlier request start with exactly these n parts?". A request costs
O(its own length), never O(session length).

Counting is by whole parts: a message that differs anywhere counts as not shared, which
is what a layout that keeps changing text at the end (feature C17) needs and never overstates
a hit. This module imports nothing from the engine.

The strict mode follows Anthropic's documented rule for what a request parameter voids:
the cache is laid out tools, then system, then messages, and a change of `tool_choice`
voids the message part while tools and system stay cached. So the request's tool_choice
is one more link of the chain, placed after the leading system messages: a request that
changes it shares at most the tool list and the system prompt with earlier ones. (A
change of tools or system text voids everything after it in either mode.) The default
mode, like OpenAI's automatic caching, compares the tools and messages only.

BreakpointCache is Anthropic's opt-in caching, priced by the Anthropic-like tables when a
request carries `cache_control` marks: only a marked prefix is written, a written prefix
is read only by a later mark on it or at most 20 blocks after it, at most 4 marks a
request, nothing under CACHE_MIN_TOKENS. The same run is billed under both models: the
automatic figure for the OpenAI-like tables, the marked one for the Anthropic-like.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Callable

CACHE_MIN_TOKENS = 1024
CACHE_BLOCK_TOKENS = 128
# Starts the strict mode's tool_choice link; no message's JSON (an object) starts with it.
_CHOICE = "tool_choice="


def billable_cached(shared_tokens: int) -> int:
    """Tokens a provider bills as cached for a shared prefix of `shared_tokens`."""
    if shared_tokens < CACHE_MIN_TOKENS:
        return 0
    return shared_tokens - (shared_tokens - CACHE_MIN_TOKENS) % CACHE_BLOCK_TOKENS


def _link(previous: bytes, part: str) -> bytes:
    return hashlib.blake2b(previous + part.encode("utf-8", "surrogatepass"),
                           digest_size=16).digest()


class PromptCache:
    """Remembers every prefix a session's requests began with; answers cached tokens."""

    def __init__(self, count_message: Callable[[dict[str, Any]], int],
                 count_tools: Callable[[list[dict[str, Any]] | None], int],
                 strict: bool = False) -> None:
        self.count_message = count_message
        self.strict = strict
        self.count_tools = count_tools
        self._seen: set[bytes] = set()
        self._tokens_of: dict[str, int] = {}  # exact part JSON -> tokens, counted once

    def _tokens(self, key: str, count: Callable[[], int]) -> int:
        found = self._tokens_of.get(key)
        if found is None:
            found = self._tokens_of[key] = count()
        return found

    def shared_prefix(self, messages: list[dict[str, Any]],
                      tools: list[dict[str, Any]] | None = None,
                      tool_choice: Any = None) -> int:
        """Tokens of the longest prefix shared with an earlier request; records this one."""
        parts: list[tuple[str, Callable[[], int]]] = []
        if tools:
            parts.append((json.dumps(tools, sort_keys=True, ensure_ascii=False),
                          lambda: self.count_tools(tools)))
        system = next((i for i, m in enumerate(messages) if m.get("role") != "system"),
                      len(messages))
        for index, message in enumerate(messages):
            if self.strict and index == system:
                parts.append((_CHOICE + json.dumps(tool_choice, sort_keys=True), lambda: 0))
            parts.append((json.dumps(message, sort_keys=True, ensure_ascii=False),
                          lambda m=message: self.count_message(m)))
        link, shared, matching = b"", 0, True
        for key, count in parts:
            link = _link(link, key)
            if matching and link in self._seen:
                shared += self._tokens(key, count)
            else:
                matching = False
                self._seen.add(link)
        return shared

    def cached_tokens(self, messages: list[dict[str, Any]],
                      tools: list[dict[str, Any]] | None = None, tool_choice: Any = None) -> int:
        """What the usage block reports as `prompt_tokens_details.cached_tokens`."""
        return billable_cached(self.shared_prefix(messages, tools, tool_choice))


# Anthropic's breakpoint caching (opt-in): a request marks up to MAX_BREAKPOINTS blocks
# with `cache_control`; the prefix up to a marked block is written (billed at the write
# price) unless an earlier request wrote it; a later request reads a written prefix only
# when one of its own marks sits on it or at most LOOKBACK_BLOCKS blocks after it; a
# prefix under CACHE_MIN_TOKENS is neither written nor read. Exact tokens, no blocks of
# 128: Anthropic reports what it read and wrote as such.
MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
EPHEMERAL = {"type": "ephemeral"}


def _marked(part: Any) -> bool:
    return isinstance(part, dict) and part.get("cache_control") is not None


def read_marks(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None, list[int], bool]:
    """A received request without its marks — content parts joined back into the text
    they carry, `cache_control` dropped from tools — with the indices of the marked
    messages and whether a tool was marked. The unmarked request is what every other
    part of the provider reads, so a mark never changes what is counted or compared."""
    plain, marked = [], []
    for index, message in enumerate(messages):
        content = message.get("content")
        if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text"
                                             for p in content):
            if any(_marked(p) for p in content):
                marked.append(index)
            message = {**message, "content": "".join(p.get("text") or "" for p in content)}
        plain.append(message)
    tools_marked = any(_marked(t) for t in tools or ())
    if tools_marked:
        tools = [{k: v for k, v in t.items() if k != "cache_control"} for t in tools or ()]
    return plain, tools, marked, tools_marked


def _blocks(message: dict[str, Any]) -> int:
    """Content blocks of a message as Anthropic lays it out: its text, each tool call."""
    return max(1, bool(message.get("content")) + len(message.get("tool_calls") or ()))


class BreakpointCache:
    """The prefixes a session's marks wrote; answers (read, written) tokens per request.

    `strict` places the request's tool_choice after the system messages, as PromptCache
    does: a change of it voids the message part."""

    def __init__(self, count_message: Callable[[dict[str, Any]], int],
                 count_tools: Callable[[list[dict[str, Any]] | None], int],
                 strict: bool = False) -> None:
        self.count_message, self.count_tools, self.strict = count_message, count_tools, strict
        self._written: set[bytes] = set()

    def usage(self, messages: list[dict[str, Any]], marked: list[int],
              tools: list[dict[str, Any]] | None = None, tools_marked: bool = False,
              tool_choice: Any = None) -> tuple[int, int]:
        """(tokens read from the cache, tokens written to it) for one request; records
        what it wrote. Unmarked: (0, 0), the whole request billed as plain input."""
        links: list[bytes] = []  # the chain's link after each part
        ends: list[int] = []  # the prefix's tokens after each part
        blocks: list[int] = []  # content blocks before each part's end, counted from the start
        marks: list[int] = []  # part indices of the breakpoints
        link, tokens, count = b"", 0, 0

        def add(key: str, size: int, block_count: int, mark: bool) -> None:
            nonlocal link, tokens, count
            link = _link(link, key)
            tokens += size
            count += block_count
            links.append(link)
            ends.append(tokens)
            blocks.append(count)
            if mark:
                marks.append(len(links) - 1)

        if tools:
            add(json.dumps(tools, sort_keys=True, ensure_ascii=False), self.count_tools(tools),
                len(tools), tools_marked)
        system = next((i for i, m in enumerate(messages) if m.get("role") != "system"),
                      len(messages))
        wanted = set(marked)
        for index, message in enumerate(messages):
            if self.strict and index == system:
                add(_CHOICE + json.dumps(tool_choice, sort_keys=True), 0, 0, False)
            add(json.dumps(message, sort_keys=True, ensure_ascii=False),
                self.count_message(message), _blocks(message), index in wanted)
        if not marks:
            return 0, 0
        hit = -1  # the longest written prefix a mark reaches back to
        for mark in marks:
            for at in range(mark, -1, -1):
                if blocks[mark] - blocks[at] >= LOOKBACK_BLOCKS:
                    break
                if links[at] in self._written:
                    hit = max(hit, at)
                    break
        read = ends[hit] if hit >= 0 else 0
        # A mark inside the part read back becomes an entry of its own at no charge (the
        # prefix is in the cache already); only what lies past the read part is written.
        cacheable = [m for m in marks if ends[m] >= CACHE_MIN_TOKENS]
        for mark in cacheable:
            self._written.add(links[mark])
        last = max(cacheable, default=-1)
        return read, (ends[last] - read if last > hit else 0)
