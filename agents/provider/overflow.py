"""Reading "your request is longer than my window" out of each server's error text (C16).

Every OpenAI-compatible server words it differently, and an unrecognised text is classed
as a bad request, which ends the session with a misleading hint instead of compacting.
Each pattern yields the window and the prompt tokens the server counted; a text that
names neither (Ollama's) still counts as an overflow with both figures unknown (0).
"""
from __future__ import annotations

import re

_NUM = r"(\d[\d,]*)"
# (pattern, group of the window, group of the prompt tokens) — first match wins.
_PATTERNS: tuple[tuple[re.Pattern[str], int, int], ...] = tuple(
    (re.compile(text, re.IGNORECASE | re.DOTALL), window, prompt) for text, window, prompt in (
        # OpenAI, DeepSeek, old vLLM, llama-cpp-python's server (which rewrites its own text
        # into this form): "... is 4096 tokens. However, you requested 4166 tokens (3654 in
        # the messages, 512 in the completion)" / "your messages resulted in 4166 tokens".
        (rf"maximum context length is {_NUM} tokens.*?(?:resulted in|requested)(?: over)? "
         rf"{_NUM} tokens", 1, 2),
        # vLLM ≥ 0.6: "... is 4096 tokens. However, your request has 4166 input tokens" and
        # "'max_tokens' ... is too large: 512. ... is 4096 tokens and your request has 3700
        # input tokens (512 > 4096 - 3700)".
        (rf"maximum context length is {_NUM} tokens.*?request has {_NUM} input tokens", 1, 2),
        # llama.cpp's llama-server: "request (4166 tokens) exceeds the available context
        # size (4096 tokens), try increasing it".
        (rf"request \({_NUM} tokens\) exceeds the available context size \({_NUM} tokens\)",
         2, 1),
        # llama-cpp-python's library text when it reaches the client unrewritten.
        (rf"Requested tokens \({_NUM}\) exceed context window of {_NUM}", 2, 1),
        # LM Studio: "Input length 6491 exceeds context length 1500".
        (rf"Input length {_NUM} exceeds context length {_NUM}", 2, 1),
        # Gemini-style gateways: "The input token count (582632) exceeds the maximum number
        # of tokens allowed (131072)".
        (rf"input token count \({_NUM}\) exceeds the maximum number of tokens allowed "
         rf"\({_NUM}\)", 2, 1),
    ))
# Texts that name no figures: Ollama ("the input length exceeds the context length"),
# generic gateways. Matched only after every pattern with numbers failed.
_NUMBERLESS = re.compile(r"input length exceeds the context length|context[_ ]length[_ ]exceeded"
                         r"|exceeds (?:the )?(?:available )?context (?:size|window|length)",
                         re.IGNORECASE)
# OpenAI-style servers split what was requested: "(P in the messages, C in the completion)".
# P is the prompt the provider counted; M = P + C also holds the output room asked for.
_PROMPT_PART = re.compile(rf"\(\s*{_NUM} in the messages", re.IGNORECASE)


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def parse_overflow(message: str) -> tuple[int, int] | None:
    """(window, prompt tokens) from an overflow error text, else None; (0, 0) when the text
    says the request was too long but gives no figures.

    When the text splits the request into messages and completion, the prompt part is
    returned: comparing prompt + completion with the engine's prompt count would inflate
    the correction for good (a 3 000-token prompt asking 900 out reads as 1.30).
    """
    for pattern, window_group, prompt_group in _PATTERNS:
        match = pattern.search(message or "")
        if match:
            prompt = _PROMPT_PART.search(message, match.end())
            requested = prompt.group(1) if prompt else match.group(prompt_group)
            return _int(match.group(window_group)), _int(requested)
    if _NUMBERLESS.search(message or ""):
        return 0, 0
    return None
