"""Exact counts of whole requests on llama-cpp-python (issue 11), checked on every call.

The server does not say which chat format it renders with. TaskOS's local lane starts it
with chatml-function-calling; a server answering /extras/tokenize (llama-cpp-python's) is
assumed to use that format until a call shows otherwise: before each call the request is
rendered as that template renders it (agents.counting.llama_cpp.served_prompt) and counted whole by the
server's tokenizer; after it, the figure the server must report for that reply is
worked out and compared with `usage.prompt_tokens`. The first mismatch ends the exact
counting for the session (a server started with another format, or another version's
template; a template that does not render tools at all is named as such); from then on the calibration (agents.counting.calibration) corrects the engine's
figures, as it does for servers without a tokenizer.

What a llama-cpp-python server reports with tools and tool_choice "auto" depends on the
reply: the prompt with `message:` appended for a text answer; for tool calls, the SUM of
one prompt per call, each the previous one plus the call before it and the next
`functions.NAME:` line. Before the call the engine takes the longest single opening —
the prompt the server may refuse — as its figure. While the reports confirm the
rendering, its escaping too, replies are read back unescaped (`read_back`).

What an opening adds to a prompt is counted once per session, not once per request (with
16 tools a request sent 18 texts to the tokenizer: the prompt, `message:`, 16 calls; now
the first request with those tools sends 18 and every later one 1). The figure is the
difference count(prompt + opening) − count(prompt) on the first request that offers the
opening, and it holds for every later prompt because each one ends with the same line,
PROMPT_END, and the opening follows it. llama-cpp-python tokenizes with special tokens
parsed (/extras/tokenize and the completion alike), and llama.cpp splits the text at each
special token before any merge: `assistant\n` + the opening, after the prompt's last
`<|im_start|>`, is tokenized on its own, however its pieces merge among themselves. A
tokenizer that reads `<|im_start|>` as plain text but splits words first (cl100k, the
fake server's, like the GPT-2 style of Llama 3 and Qwen) always starts a new piece at
`<|` after a newline, to the same effect. Not the opening counted alone: the newline
before it may merge with it, and a text of its own may get a BOS token or a leading
space. Each report still checks the figure of the opening the model took; a difference
that did not hold would end exact counting like any other mismatch.
"""
from __future__ import annotations

import html
import logging
from dataclasses import replace
from typing import Any, Callable

from agents.counting.llama_cpp.served_prompt import (CHATML_FUNCTION_CALLING, PROMPT_END, RENDERERS,
                                                     openings, tools_rendered)

log = logging.getLogger(__name__)


class PromptCount:
    """One request's exact figures: its rendered prompt and what the server will report."""

    def __init__(self, prompt: str, tools: list[dict[str, Any]] | None, tool_choice: Any,
                 count: Callable[[str], int], added: dict[str, int] | None = None,
                 without_tools: str = "") -> None:
        """`added`: the tokens each opening adds to a prompt, as counted on earlier requests
        of the session (see the module's note); filled in here for the openings it lacks.
        `without_tools`: the same request rendered without its tools, counted only when a
        report falls short (a template that drops the tools)."""
        self.prompt, self.tools, self.tool_choice = prompt, tools, tool_choice
        self.without_tools = without_tools
        self._counter = count
        # Each text is sent to the server's tokenizer once: the report of a text reply or a
        # single tool call is the prompt plus an opening already counted before the call.
        self._counted: dict[str, int] = {}
        self.prompt_tokens = self._count(prompt)
        if added is None or not prompt.endswith(PROMPT_END):
            added = {}  # no fixed end before the opening: each one is counted whole
        choices = openings(tools, tool_choice)
        for opening in choices:
            if opening not in added:
                added[opening] = self._count(prompt + opening) - self.prompt_tokens
            self._counted.setdefault(prompt + opening, self.prompt_tokens + added[opening])
        # The longest prompt the server completes for this request: what must fit.
        self.tokens = self.prompt_tokens + max(added[opening] for opening in choices)

    def _count(self, text: str) -> int:
        if text not in self._counted:
            self._counted[text] = self._counter(text)
        return self._counted[text]

    def reported(self, content: str, tool_calls: list[dict[str, Any]]) -> int:
        """What `usage.prompt_tokens` must say for a reply with these contents and calls."""
        if not (self.tools and self.tool_choice == "auto"):
            return self.prompt_tokens
        if not tool_calls:
            return self._count(self.prompt + "message:\n")
        total, prompt = 0, self.prompt
        for call in tool_calls:
            prompt += f"functions.{call['name']}:\n"
            total += self._count(prompt)
            prompt += f"{call.get('arguments') or ''}\n"
        return total


class ServedPromptCounter:
    """Renders and counts whole requests while the server's reports agree with it."""

    def __init__(self, count: Callable[[str], int | None],
                 chat_format: str = CHATML_FUNCTION_CALLING) -> None:
        self._count_or_none = count
        self.chat_format = chat_format
        self._render = RENDERERS[chat_format]
        self.active = True
        self.confirmed = 0  # calls whose report matched the figure exactly
        self.mismatch: str = ""  # why exact counting stopped, when it did
        # A report that disagreed with the rendering: the server renders another template,
        # so what it escapes is not known either (a tokenizer that stopped answering
        # leaves the template as it was confirmed).
        self.template_differs = False
        self.tools_dropped = False
        self.added: dict[str, int] = {}  # tokens each opening adds to a prompt

    def _count(self, text: str) -> int:
        count = self._count_or_none(text)
        if count is None:
            raise LookupError("the server's tokenizer stopped answering")
        return count

    def count(self, wire_messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
              tool_choice: Any) -> PromptCount | None:
        """The request's exact figures, or None when exact counting is off."""
        if not self.active:
            return None
        try:
            plain = self._render(wire_messages, None, None) if tools_rendered(
                tools, tool_choice) else ""
            return PromptCount(self._render(wire_messages, tools, tool_choice), tools,
                               tool_choice, self._count, self.added, without_tools=plain)
        except Exception as exc:  # noqa: BLE001 - counting must never fail a turn
            self.stop(f"the request could not be rendered or counted ({exc})")
            return None

    def check(self, figures: PromptCount, content: str, tool_calls: list[dict[str, Any]],
              reported: int) -> int | None:
        """Compare the server's report with the rendering's; None once they disagree."""
        try:
            expected = figures.reported(content, tool_calls)
        except Exception as exc:  # noqa: BLE001
            self.stop(f"the reply's prompt could not be counted ({exc})")
            return None
        if reported and expected != reported:
            self.template_differs = True
            self.stop(self._dropped(figures, reported) or (
                f"the server reported {reported} prompt tokens where the "
                f"{self.chat_format} rendering counts {expected}"))
            return None
        self.confirmed += 1
        return expected

    def _dropped(self, figures: PromptCount, reported: int) -> str:
        """The mismatch named when the server's count is that of the request without its
        tools, give or take its own framing (a quarter of what the tools add): its template
        does not render tools (a model's own GGUF template, llama-cpp-python's llama-2
        fallback), so the model never sees one. A template that words the tools otherwise
        still counts them, and is only another rendering."""
        if not figures.without_tools:
            return ""
        plain = self._count_or_none(figures.without_tools)
        if plain is None or abs(reported - plain) > (figures.prompt_tokens - plain) / 4:
            return ""
        self.tools_dropped = True
        return (f"the server's template does not render tools: it reported {reported} "
                f"prompt tokens for a request that counts {plain} without its tools and "
                f"{figures.prompt_tokens} with them")

    def stop(self, why: str) -> None:
        if self.active:
            log.warning("exact prompt counting stopped: %s; calibrating from usage instead", why)
        self.active, self.mismatch = False, why


def read_back(reply: Any) -> Any:
    """`reply` with the template's escaping undone. The model read every text escaped
    (`it&#39;s`), so it writes that way: SmolLM2 asked for `sales.csv&#39;` and wrote
    `&#39;` into its summaries, which the next request escaped again (`&amp;#39;`); a tool
    call written as text with `&#34;` for its quotes was no JSON. Only used while the
    server's counts confirm the rendering, escaping included."""
    calls = [{**call, "arguments": html.unescape(call.get("arguments") or "")}
             for call in reply.tool_calls]
    return replace(reply, content=html.unescape(reply.content), tool_calls=calls)
