"""The prompt a llama-cpp-python server builds from a chat request, rendered here so that
the server's own tokenizer can count it whole (issue 11: exact counting, not a fit).

llama-cpp-python turns a chat request into one prompt string with its chat format's
template and tokenizes that; `usage.prompt_tokens` is the length of the prompt it then
completes. Counting each message's text with the server (agents.counting.server_tokens) and
fitting the framing around it left 1–4 % errors where request kinds framed differently;
rendering the same string and counting it in one /extras/tokenize call leaves none.

The format TaskOS's local lane starts the server with, chatml-function-calling, renders
(llama_cpp/llama_chat_format.py, 0.3.x; described here, not copied):

- every message opens `<|im_start|>ROLE` and a newline, whatever the role ("tool" too);
- a system message holds its content and, when tools are rendered (tools given and
  tool_choice "auto" or a named function), the tool list — `functions.NAME:` and the
  parameters through Jinja's `tojson` — and the calling instructions; then `<|im_end|>`;
- a user message: content, `<|im_end|>`;
- an assistant message: its content when not empty (after `message:` when tools are
  rendered) and `<|im_end|>`; then, when it has a `tool_calls` key, each call as
  `functions.NAME:` + arguments and one more `<|im_end|>`;
- a "tool" message: nothing after its opening line;
- the prompt ends with the assistant's opening line.

Every text is escaped as Jinja's autoescape does (`&#34;` and `&#39;` for quotes, unlike
Python's html.escape). With tools and tool_choice "auto" the server first lets the model
choose how to start and then completes the prompt with that opening appended —
`message:` or `functions.NAME:` — and reports that longer prompt's length.
"""
from __future__ import annotations

import json
from typing import Any

CHATML_FUNCTION_CALLING = "chatml-function-calling"
# Every prompt of this template ends with the assistant's opening line; the server writes
# its opening (`message:` or `functions.NAME:`) right after it (agents.counting.llama_cpp.prompt_count).
PROMPT_END = "<|im_start|>assistant\n"
_ESCAPES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&#34;"), ("'", "&#39;"))
_TOJSON_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("'", "\\u0027"))
CALLING_INSTRUCTIONS = (
    "\n\nYou can respond to users messages with either a single message or one or more "
    "function calls.\n\nTo respond with a message begin the message with 'message:', use "
    "the following format:\n\nmessage:\n<message>\n\nTo respond with one or more function "
    "calls begin the message with 'functions.<function_name>:', use the following format:"
    "\n\nfunctions.<function_name>:\n{ \"arg1\": \"value1\", \"arg2\": \"value2\" }"
    "\nfunctions.<function_name>:\n{ \"arg1\": \"value1\", \"arg2\": \"value2\" }")


def escape(value: Any) -> str:
    """`value` as Jinja's autoescape writes it into a template."""
    text = "" if value is None else str(value)
    for raw, entity in _ESCAPES:
        text = text.replace(raw, entity)
    return text


def tojson(value: Any) -> str:
    """Jinja's `tojson` filter: sorted keys, ASCII, and <>&' as unicode escapes."""
    text = json.dumps(value, sort_keys=True)
    for raw, escaped in _TOJSON_ESCAPES:
        text = text.replace(raw, escaped)
    return text


def tools_rendered(tools: list[dict[str, Any]] | None, tool_choice: Any) -> bool:
    """Whether the template writes the tools: "auto" or a named function, never "none"."""
    return bool(tools) and tool_choice is not None and tool_choice != "none"


def _tool_list(tools: list[dict[str, Any]]) -> str:
    listed = "".join(f"\nfunctions.{escape(t['function']['name'])}:\n"
                     f"{tojson(t['function'].get('parameters'))}\n" for t in tools)
    return "\n\nYou have access to the following functions:\n" + listed + CALLING_INSTRUCTIONS


def render_chatml_function_calling(messages: list[dict[str, Any]],
                                   tools: list[dict[str, Any]] | None = None,
                                   tool_choice: Any = None) -> str:
    """The prompt string chatml-function-calling builds from a request (the messages as
    sent on the wire), up to the point where the model starts to write."""
    with_tools = tools_rendered(tools, tool_choice)
    parts: list[str] = []
    for message in messages:
        role = message.get("role")
        parts.append(f"<|im_start|>{escape(role)}\n")
        content = message.get("content")
        if role == "system":
            parts.append(escape(content) + (_tool_list(tools or []) if with_tools else "")
                         + "<|im_end|>\n")
        elif role == "user":
            parts.append(escape(content) + "<|im_end|>\n")
        elif role == "assistant":
            if content:
                parts.append(("message:\n" if with_tools else "") + escape(content)
                             + "<|im_end|>\n")
            if "tool_calls" in message:
                for call in message.get("tool_calls") or ():
                    function = call.get("function") or {}
                    parts.append(f"functions.{escape(function.get('name'))}:\n"
                                 f"{escape(function.get('arguments'))}")
                parts.append("<|im_end|>\n")
    parts.append(PROMPT_END)
    return "".join(parts)


def openings(tools: list[dict[str, Any]] | None, tool_choice: Any) -> list[str]:
    """What the server appends to the prompt before the reply it reports on: with tools
    and tool_choice "auto", `message:` or one `functions.NAME:` per tool; else nothing."""
    if tool_choice == "auto" and tools:
        return ["message:\n"] + [f"functions.{t['function']['name']}:\n" for t in tools]
    if isinstance(tool_choice, dict) and tools:
        return [f"functions.{tool_choice.get('function', {}).get('name', '')}:\n"]
    return [""]


RENDERERS = {CHATML_FUNCTION_CALLING: render_chatml_function_calling}
