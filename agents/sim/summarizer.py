"""The simulated model's answer to a summary request (SPEC C6, T7).

It builds the structured summary extractively from exactly the messages of the request,
so what the simulated model "remembers" after a compaction is what the engine sent it:
a previous summary (`<system-info>` block) is read back and merged, user messages give the
goal and constraints, tool calls the progress, tool results the discoveries, errors the
ruled-out approaches. Every item is copied text, never an invented figure. Like a model
following SUMMARY_INSTRUCTIONS, it lists only new discoveries, context and ruled-out
approaches; the engine's `merge` keeps the earlier ones.

The engine labels compacted messages with a first line `[archive turn N, ref arc:S:K]`;
items cite "(archive turn N)" from it. Deterministic: same messages, same summary.
"""
from __future__ import annotations

import json
import re
from typing import Any

from agents.anchors import clip_text, extract_anchors, extract_conclusions
from agents.summary import StructuredSummary, merge, parse_rendered

ITEM_CHARS = 160
FINDINGS_PER_RESULT = 3
_LABEL = re.compile(r"^\s*\[(?:archive\s+)?turn\s+(\d+)(?:,\s*ref\s+([^\]\s]+))?\]\s*\n?", re.I)
_BLOCK = re.compile(r"<system-info>.*?</system-info>", re.S)
_CONSTRAINTS = re.compile(r"^hard constraints\b", re.I)
_ERROR = re.compile(r"^\s*(?:error|exception|traceback)\b|^\s*错误", re.I)
_PLAN = re.compile(r"\b(?:next|then|will|plan|going to|remaining)\b|接下来|下一步|然后|计划|准备", re.I)
_SENTENCE = re.compile(r"(?<=[。！？!?])|(?<=\.)\s+|\n+")


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # multi-part content: keep the text parts
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _cite(text: str, turn: int | None) -> str:
    text = clip_text(text, ITEM_CHARS)
    return f"{text} (archive turn {turn})" if turn is not None else text


def _call_text(call: dict[str, Any]) -> tuple[str, str]:
    """(tool name, "name(arg=value, …)") of an OpenAI tool call, arguments shortened."""
    function = call.get("function") or {}
    name = str(function.get("name") or "tool")
    try:
        args = json.loads(function.get("arguments") or "{}")
    except ValueError:
        args = function.get("arguments") or ""
    shown = (", ".join(f"{k}={v}" for k, v in args.items()) if isinstance(args, dict)
             else str(args))
    return name, f"{name}({clip_text(shown, 60)})"


def _is_request_tail(message: dict[str, Any]) -> bool:
    """The request's own closing instruction ("Write the summary JSON now."), not history."""
    text = _text(message)
    return (message.get("role") == "user" and not _LABEL.match(text)
            and re.search(r"summary|摘要", text, re.I) is not None)


class _Builder:
    def __init__(self) -> None:
        self.new = StructuredSummary()
        self.previous: StructuredSummary | None = None
        # tool_call_id -> (name, call text, turn); progress is written when the result
        # arrives, because an assistant message without text carries no archive label.
        self.calls: dict[str, tuple[str, str, int | None]] = {}
        self.outcomes: list[tuple[str, int | None, str]] = []  # (tool, turn, error or "")

    def add(self, message: dict[str, Any]) -> None:
        role, text = message.get("role"), _text(message)
        for block in _BLOCK.findall(text):
            found = parse_rendered(block)
            if found is not None:
                self.previous = merge(self.previous, found)
        text = _BLOCK.sub("", text)
        label = _LABEL.match(text)
        turn = int(label.group(1)) if label else None
        text = text[label.end():] if label else text
        if role == "system" and _CONSTRAINTS.match(text.strip()):
            self.new.task_overview.extend(
                line.strip()[2:] for line in text.splitlines() if line.strip().startswith("- "))
        elif role == "user":
            self._user(text, turn)
        elif role == "assistant":
            self._assistant(message, text, turn)
        elif role == "tool":
            self._tool(message, text, turn)

    def _user(self, text: str, turn: int | None) -> None:
        constraints = [a.text for a in extract_anchors(text) if a.tier == 1]
        self.new.task_overview.extend(constraints)
        rest = [s for s in (x.strip() for x in _SENTENCE.split(text))
                if s and not any(s.rstrip(".。") in c or c in s for c in constraints)]
        if not rest:
            return
        if self.previous is None and not any(i.startswith("User request") for i in
                                             self.new.task_overview):
            self.new.task_overview.append(_cite("User request: " + " ".join(rest), turn))
        else:
            self.new.context_to_preserve.append(_cite("User said: " + " ".join(rest), turn))

    def _assistant(self, message: dict[str, Any], text: str, turn: int | None) -> None:
        for call in message.get("tool_calls") or []:
            self.calls[str(call.get("id", ""))] = (*_call_text(call), turn)
        if not text.strip():
            return
        findings = extract_conclusions(text, source="assistant", limit=2)
        self.new.important_discoveries.extend(_cite(a.text, turn) for a in findings)
        plans = [s.strip() for s in _SENTENCE.split(text) if s.strip() and _PLAN.search(s)]
        if plans:
            self.new.next_steps = [clip_text(p, ITEM_CHARS) for p in plans[-3:]]
        elif not message.get("tool_calls"):
            self.new.current_state.append(_cite("replied: " + text.strip(), turn))

    def _tool(self, message: dict[str, Any], text: str, turn: int | None) -> None:
        name, shown, call_turn = self.calls.pop(
            str(message.get("tool_call_id", "")), (str(message.get("name") or "tool"), "", None))
        shown = shown or f"{name}(…)"
        turn = turn if turn is not None else call_turn
        if _ERROR.match(text):
            reason = clip_text(text.strip().splitlines()[0], ITEM_CHARS)
            evidence = f"archive turn {turn}" if turn is not None else "this tool result"
            self.new.ruled_out.append({"approach": f"calling {shown}", "reason": reason,
                                       "evidence": evidence})
            self.outcomes.append((name, turn, reason))
            return
        self.outcomes.append((name, turn, ""))
        self.new.current_state.append(_cite(f"called {shown}", turn))
        for anchor in extract_conclusions(text, tool_name=name, limit=FINDINGS_PER_RESULT):
            self.new.important_discoveries.append(_cite(f"{name}: {anchor.text}", turn))

    def result(self) -> dict[str, Any]:
        for _, shown, turn in self.calls.values():  # calls whose results were not given
            self.new.current_state.append(_cite(f"called {shown} (result not shown)", turn))
        for i, (name, turn, reason) in enumerate(self.outcomes):
            # A failure is still open when the same tool has not been called again since.
            if reason and all(n != name for n, _, _ in self.outcomes[i + 1:]):
                self.new.open_questions.append(
                    _cite(f"{name} still fails ({reason}); another way is needed", turn))
        # Answer as SUMMARY_INSTRUCTIONS ask: the short "as of now" sections in full, the
        # growing ones (discoveries, context, ruled out) with what this batch adds only.
        now = merge(self.previous, self.new)
        if self.previous is not None:
            for name in ("important_discoveries", "context_to_preserve", "ruled_out"):
                known = getattr(self.previous, name)
                setattr(now, name, [x for x in getattr(now, name) if x not in known])
        return now.to_dict()


def build_summary(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary JSON the simulated model answers with, built from `messages` only."""
    items = list(messages)
    if items and _is_request_tail(items[-1]):
        items.pop()
    builder = _Builder()
    for message in items:
        builder.add(message)
    return builder.result()
