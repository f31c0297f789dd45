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
