"""The model client (SPEC T7): one chat-completion call through the `openai` SDK.

This is the only module that imports `openai`. The simulated model is reached through
the same SDK with an in-process HTTP transport, so every run exercises this code path.
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

import openai

from agents.config import ModelProfile

_OVERFLOW = re.compile(
    r"maximum context length is (\d[\d,]*) tokens.*?(?:resulted in|requested) (\d[\d,]*) tokens",
    re.IGNORECASE | re.DOTALL)


class ModelError(RuntimeError):
    """A model call failed; `code` classifies it for the error reference (W8)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class ContextOverflow(ModelError):
    """The provider refused the request as longer than its window (SPEC C16)."""

    def __init__(self, limit: int, requested: int, message: str) -> None:
        super().__init__("context_length_exceeded", message)
        self.limit = limit
        self.requested = requested


def parse_overflow(message: str) -> tuple[int, int] | None:
    """(window, requested) from a "maximum context length" error text, else None."""
    match = _OVERFLOW.search(message)
    if not match:
        return None
    return int(match.group(1).replace(",", "")), int(match.group(2).replace(",", ""))


@dataclass
class ModelReply:
    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {"id", "name", "arguments"}
    finish_reason: str = "stop"
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    latency_ms: float = 0.0


class ModelClient:
    """Chat completions against an OpenAI-compatible endpoint or the simulated model."""

    def __init__(self, profile: ModelProfile, *, http_client: Any = None,
                 base_url: str | None = None, api_key: str | None = None) -> None:
        self.profile = profile
        key = api_key or os.environ.get(profile.api_key_env or "OPENAI_API_KEY") or "not-needed"
        self._client = openai.OpenAI(
            api_key=key, base_url=base_url or profile.base_url or None,
            http_client=http_client, max_retries=0 if http_client else 2, timeout=120)

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 max_tokens: int, model: str | None = None,
                 tool_choice: str | None = None) -> ModelReply:
        kwargs: dict[str, Any] = {"model": model or self.profile.model, "messages": messages,
                                  "max_tokens": max_tokens}
        if tools:
            kwargs["tools"] = tools
            if tool_choice:
                kwargs["tool_choice"] = tool_choice
        if self.profile.num_ctx:
            kwargs["extra_body"] = {"options": {"num_ctx": self.profile.num_ctx}}
        started = time.perf_counter()
        try:
            response = self._client.chat.completions.create(**kwargs)
        except openai.APIStatusError as exc:
            text = _error_text(exc)
            window = parse_overflow(text)
            if window:
                raise ContextOverflow(window[0], window[1], text) from exc
            raise ModelError(_classify_status(exc.status_code, text), text) from exc
        except openai.APITimeoutError as exc:
            raise ModelError("deadline_exceeded", f"context deadline exceeded: {exc}") from exc
        except openai.APIConnectionError as exc:
            raise ModelError("connection", f"cannot reach the model endpoint: {exc}") from exc
        latency = (time.perf_counter() - started) * 1000
        return _to_reply(response, latency)


def _error_text(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(exc)


def _classify_status(status: int, text: str) -> str:
    lowered = text.lower()
    if "kv cache" in lowered or "failed to allocate" in lowered or "out of memory" in lowered:
        return "kv_cache_allocation"
    if status in (401, 403):
        return "auth"
    if status == 429:
        return "rate_limited"
    if status >= 500:
        return "provider_error"
    return "bad_request"


def _to_reply(response: Any, latency_ms: float) -> ModelReply:
    if not getattr(response, "choices", None):
        raise ModelError("bad_response", "the model returned no choices")
    choice = response.choices[0]
    message = choice.message
    calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments or "{}"}
             for c in (message.tool_calls or []) if getattr(c, "function", None)]
    usage = response.usage
    cached = 0
    if usage is not None and getattr(usage, "prompt_tokens_details", None) is not None:
        cached = usage.prompt_tokens_details.cached_tokens or 0
    return ModelReply(
        content=message.content or "", tool_calls=calls,
        finish_reason=choice.finish_reason or "stop",
        input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        output_tokens=getattr(usage, "completion_tokens", 0) or 0,
        cached_tokens=cached, latency_ms=latency_ms)
