"""Counting with the model server's own tokenizer (issue 11), where the server offers one.

llama.cpp's llama-server answers `POST /tokenize {"content": …}`, llama-cpp-python's
server `POST /extras/tokenize {"input": …}`, both with `{"tokens": […]}`; vLLM serves
`/tokenize` with a different body. Ollama offers none (its OpenAI-compatible API has no
tokenizer), so its profiles are calibrated from `usage` instead (agents.counting.calibration).

The text of each message is counted by the server once (counts are cached per text); the
chat framing around it still follows the engine's rules, and the calibration corrects
what the framing misses. On llama-cpp-python the whole request is also rendered as its
chat template renders it and counted in one call (agents.counting.llama_cpp.prompt_count): that figure is
exact, and the calibration learns the framing from it. Cutting text keeps using the engine's encoding: a cut is then
measured again with the server's count. When the server stops answering, counting goes
back to the engine's encoding for the rest of the session rather than failing a turn.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

import httpx2

from agents.counting.llama_cpp.prompt_count import ServedPromptCounter
from agents.counting.llama_cpp.served_prompt import escape
from agents.counting.tokens import TokenCounter

log = logging.getLogger(__name__)

# (path under the server root, body for a text, key of the token list in the answer,
# whether the server is llama-cpp-python: its prompt holds the text HTML-escaped, and its
# requests can be rendered whole). llama-cpp-python's tool-capable chat format
# (chatml-function-calling) autoescapes every message it renders — a quote becomes
# `&#39;`, three tokens instead of one — so its text is counted escaped: 5 % of a real
# request was quotes in tool arguments and results. Counting escaped text where a server
# does not escape only errs on the safe side (more, never fewer tokens).
ENDPOINTS: tuple[tuple[str, Callable[[str], dict[str, Any]], str, bool], ...] = (
    ("/tokenize", lambda text: {"content": text, "add_special": False}, "tokens", False),
    ("/extras/tokenize", lambda text: {"input": text}, "tokens", True),
)
CACHE_SIZE = 8192
PROBE_TIMEOUT = 5.0


def server_root(base_url: str) -> str:
    """The server's root URL: the OpenAI base without its trailing /v1."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


class ServerTokenCounter(TokenCounter):
    """A TokenCounter whose `text` is the server's count; everything else is inherited."""

    def __init__(self, endpoint: str, body: Callable[[str], dict[str, Any]], key: str,
                 model: str = "", encoding_name: str = "", client: Any = None,
                 escaped: bool = False) -> None:
        super().__init__(model, encoding_name)
        self.endpoint, self._body, self._key = endpoint, body, key
        self.escaped = escaped
        self._client = client or httpx2.Client(timeout=PROBE_TIMEOUT)
        self._cache: dict[str, int] = {}
        self.available = True
        self.stopped = ""  # why the tokenizer is no longer asked, once it is not
        # Whole requests rendered and counted exactly: llama-cpp-python only.
        self.served = ServedPromptCounter(self.count_whole) if escaped else None

    def _ask(self, text: str) -> int:
        """The server's token count of `text`, sent as it is; raises when it does not answer."""
        response = self._client.post(self.endpoint, json=self._body(text))
        response.raise_for_status()
        return len(response.json()[self._key])

    def count_whole(self, text: str) -> int | None:
        """The server's count of `text` as it stands (no escaping, no cache); None when
        the server does not answer."""
        if not self.available:
            return None
        try:
            return self._ask(text)
        except Exception as exc:  # noqa: BLE001 - the caller falls back to calibration
            self._stop(exc)
            return None

    def _stop(self, exc: Exception) -> None:
        """The tokenizer failed once: it is not asked again in this session (a single-slot
        server busy with a runaway answer would make every count wait its timeout)."""
        log.warning("tokenizer at %s stopped answering (%s); counting with %s from now on",
                    self.endpoint, exc, self.name)
        self.available = False
        self.stopped = (f"the server's tokenizer stopped answering "
                        f"({type(exc).__name__}: {str(exc)[:120]})")

    def text(self, text: str) -> int:
        if not text:
            return 0
        if not self.available:
            return super().text(text)
        sent = escape(text) if self.escaped else text
        hit = self._cache.get(sent)
        if hit is not None:
            return hit
        try:
            count = self._ask(sent)
        except Exception as exc:  # noqa: BLE001 - any failure: fall back, never fail a turn
            self._stop(exc)
            return super().text(text)
        if len(self._cache) >= CACHE_SIZE:
            self._cache.clear()
        self._cache[sent] = count
        return count

    def tools(self, schemas: list[dict[str, Any]] | None) -> int:
        """The schemas as the server writes them: with `tojson`, which keeps the quotes."""
        escaped, self.escaped = self.escaped, False
        try:
            return super().tools(schemas)
        finally:
            self.escaped = escaped


def make_counter(profile: Any) -> TokenCounter:
    """The server's tokenizer when the profile asks for it and the server has one, else
    the engine's encoding."""
    if profile.server_tokenizer and profile.base_url:
        counter = probe_server_counter(profile.base_url, profile.model, profile.encoding)
        if counter is not None:
            return counter
        log.warning("profile %s asks for the server's tokenizer but %s offers none; "
                    "counting with the engine's encoding, calibrated from usage",
                    profile.name, server_root(profile.base_url))
    return TokenCounter(profile.model, profile.encoding)


def probe_server_counter(base_url: str, model: str = "", encoding_name: str = "",
                         client: Any = None) -> ServerTokenCounter | None:
    """A counter on the first tokenize endpoint the server answers, else None."""
    client = client or httpx2.Client(timeout=PROBE_TIMEOUT)
    root = server_root(base_url)
    for path, body, key, escaped in ENDPOINTS:
        try:
            response = client.post(root + path, json=body("hello world"))
            if response.status_code == 200 and isinstance(response.json().get(key), list):
                return ServerTokenCounter(root + path, body, key, model, encoding_name, client,
                                          escaped=escaped)
        except Exception:  # noqa: BLE001 - a server without the endpoint, or unreachable
            continue
    return None
