"""The simulated model's answer to a summary request, in three modes (features C6, T7, issue 13).

The simulated provider shares no code with the engine: it reads the request as any model
would (role, text, tool calls, the "[archive turn N, ref …]" labels and a previous
`<system-info>` block) and answers with the summary JSON the instructions ask for.

- faithful: simple extraction. The person's sentences are copied verbatim, each tool call
  becomes a "called name(args)" line, error results become ruled-out approaches, and up to
  three lines holding figures per tool result become discoveries. Nothing is invented.
- lossy: the faithful answer with about a third of its items dropped, chosen by a hash of
  the item so the same request always loses the same items, constraints included.
- hostile: drops every constraint it was given or read, and adds discoveries whose figures
  and names appear nowhere in the request. The invented figures are recorded so tests can
  check that the engine's audit flagged every one of them.

Like a model following the instructions, the growing sections (discoveries, context,
ruled out) list only what this batch adds; the short "as of now" sections are whole.

The answer's length follows what the messages hold, as a real model's does, never the room
it is given (the answer does not even see max_tokens): a few findings make a few lines,
many make more. A finding is a line with a figure; a title's label ("#3") or an id
("a7319809") is not one, so a result of titles and boilerplate adds no discovery, and a
finding already listed (earlier in the batch or in the previous summary, whichever turn
it came from) is not listed again. When the request states a section's budget ("- name: at
most N tokens"), the answer keeps that section's newest items within it, as a model told a
limit roughly keeps to it.
"""
from __future__ import annotations

import json
import re
import zlib
from typing import Any

MODES = ("faithful", "lossy", "hostile")
ITEM_CHARS = 200
FIGURE_LINES_PER_RESULT = 3
LOSSY_SHARE = 3  # lossy drops the items whose hash is divisible by this
SECTIONS = {"task overview": "task_overview", "current state": "current_state",
            "important discoveries": "important_discoveries", "ruled out": "ruled_out",
            "open questions": "open_questions", "next steps": "next_steps",
            "context to preserve": "context_to_preserve"}
GROWING = ("important_discoveries", "context_to_preserve", "ruled_out")
_LABEL = re.compile(r"^\s*\[(?:archive\s+)?turn\s+(\d+)(?:,\s*ref\s+[^\]\s]+)?\]\s*\n?", re.I)
_BLOCK = re.compile(r"<system-info>(.*?)</system-info>", re.S)
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])|\n+")
_ERROR = re.compile(r"^\s*(?:error|exception|traceback)\b|^\s*错误", re.I)
# A figure: a number standing on its own. Not a label's number ("#3", "Q1") nor digits
# inside an id ("a7319809"); ASCII-only look-arounds, so "比例2.5%" still has one.
_FIGURE = re.compile(r"(?<![A-Za-z0-9_#.])[-+]?\d+(?:[.,]\d+)*(?![A-Za-z0-9_])")
_CITED = re.compile(r"\s*\(archive turn \d+\)$")
_HARD_HEADING = re.compile(r"^\s*hard constraints\b", re.I)
_RULED_LINE = re.compile(r"^(.*?) \| reason:\s?(.*?) \| evidence:\s?(.*)$")
# "- important_discoveries: at most 800 tokens (about 20 lines)", read wherever it is stated.
_BUDGET = re.compile(r"^\s*-\s*\"?(\w+)\"?:\s*at most (\d+) tokens\b", re.M)
# A model told a limit aims under it: it reckons three characters a token (figures and
# names run nearer 3.4 than prose's 4), so what it writes fits the budget as counted.
CHARS_PER_TOKEN = 3
_INVENTED_NAMES = ("Zorvath Logistics", "Quillmere Analytics", "Brannock Holdings",
                   "Ostrava-Keel Partners", "Velmont Dynamics")


class SummaryPlayer:
    """Answers summary requests in one mode; `invented` lists what hostile made up."""

    def __init__(self, mode: str = "faithful") -> None:
        if mode not in MODES:
            raise ValueError(f"unknown summarizer mode {mode!r}; choose one of {', '.join(MODES)}")
        self.mode = mode
        self.invented: list[str] = []  # figures the hostile mode made up, in order

    def answer(self, messages: list[dict[str, Any]],
               instructions: dict[str, Any] | None = None) -> dict[str, Any]:
        """`instructions`: the request's opening system message, when the caller reads
        `messages` without it: its stated budgets bind as well."""
        reading = _Reading()
        body = list(messages)
        if body and _is_closing_instruction(body[-1]):
            body.pop()
        for message in body:
            reading.add(message)
        stated = [instructions, *messages] if instructions else messages
        summary = _within_budgets(reading.result(), _budgets(stated))
        if self.mode == "lossy":
            summary = _drop_share(summary)
        elif self.mode == "hostile":
            summary = self._hostile(summary, json.dumps(messages, ensure_ascii=False))
        return summary

    def _hostile(self, summary: dict[str, Any], source: str) -> dict[str, Any]:
        # Everything the person asked for goes, the previous summary's share of it too.
        summary["task_overview"] = []
        summary["context_to_preserve"] = []
        seed = zlib.crc32(source.encode("utf-8"))
        added = []
        for k in range(2):
            figure = _absent_figure(seed + 7919 * k, source)
            name = _INVENTED_NAMES[(seed + k) % len(_INVENTED_NAMES)]
            self.invented.append(figure)
            added.append(f"{name} confirmed a total of {figure} units for the period")
        summary["important_discoveries"] = added + summary["important_discoveries"]
        return summary


def _absent_figure(seed: int, source: str) -> str:
    """A figure with thousands separators whose digits occur nowhere in `source`."""
    digits = re.sub(r"\D", "", source)
    value = 1_000_003 + seed % 8_000_000
    while str(value) in digits or f"{value:,}" in source:
        value += 7_777
    return f"{value:,}"


def _budgets(messages: list[dict[str, Any]]) -> dict[str, int]:
    """Each section's stated budget in tokens, by its key, from any message of the request."""
    found: dict[str, int] = {}
    for message in messages:
        for key, tokens in _BUDGET.findall(_text(message)):
            if key in SECTIONS.values():
                found[key] = int(tokens)
    return found


def _item_tokens(item: Any) -> int:
    text = item if isinstance(item, str) else " | ".join(str(v) for v in item.values())
    return len(f"- {text}\n") // CHARS_PER_TOKEN + 1


def _within_budgets(summary: dict[str, Any], budgets: dict[str, int]) -> dict[str, Any]:
    """Each budgeted section's newest items that fit its budget (the oldest go first)."""
    out = dict(summary)
    for key, budget in budgets.items():
        items = out.get(key) or []
        kept, used = [], 0
        for item in reversed(items):
            used += _item_tokens(item)
            if used > budget:
                break
            kept.append(item)
        out[key] = kept[::-1]
    return out


def _drop_share(summary: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, items in summary.items():
        out[key] = [x for x in items
                    if zlib.crc32(json.dumps(x, ensure_ascii=False).encode("utf-8")) % LOSSY_SHARE]
    return out


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _clip(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= ITEM_CHARS:
        return text
    cut = text[:ITEM_CHARS - 1]
    while cut and cut[-1].isdigit():  # never leave half a number behind
        cut = cut[:-1]
    return cut.rstrip(" ,.") + "…"


def _cite(text: str, turn: int | None) -> str:
    return f"{_clip(text)} (archive turn {turn})" if turn is not None else _clip(text)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def _is_closing_instruction(message: dict[str, Any]) -> bool:
    text = _text(message)
    return (message.get("role") == "user" and not _LABEL.match(text)
            and re.search(r"summary|摘要", text, re.I) is not None)


def _read_previous(block: str) -> dict[str, list]:
    found: dict[str, list] = {key: [] for key in SECTIONS.values()}
    current = None
    for line in block.splitlines():
        if line.startswith("## "):
            heading = line[3:].lower()
            current = next((key for name, key in SECTIONS.items() if heading.startswith(name)),
                           None)
        elif current and line.startswith("- "):
            item = line[2:].strip()
            if current == "ruled_out":
                match = _RULED_LINE.match(item)
                found[current].append(
                    dict(zip(("approach", "reason", "evidence"), match.groups())) if match
                    else {"approach": item, "reason": "", "evidence": ""})
            else:
                found[current].append(item)
    return found


class _Reading:
    def __init__(self) -> None:
        self.previous: dict[str, list] | None = None
        self.new: dict[str, list] = {key: [] for key in SECTIONS.values()}
        self.calls: dict[str, tuple[str, int | None]] = {}
        self.user_seen = False
        self.listed: set[str] | None = None  # findings listed so far, without their turn

    def add(self, message: dict[str, Any]) -> None:
        role, text = message.get("role"), _text(message)
        for block in _BLOCK.findall(text):
            self.previous = _read_previous(block)
        text = _BLOCK.sub("", text)
        label = _LABEL.match(text)
        turn = int(label.group(1)) if label else None
        text = text[label.end():] if label else text
        if role == "system" and _HARD_HEADING.match(text):
            for line in text.splitlines()[1:]:
                if line.strip().startswith("- "):
                    self._constraint(line.strip()[2:])
        elif role == "user" and text.strip():
            self._user(text, turn)
        elif role == "assistant":
            self._assistant(message, text, turn)
        elif role == "tool":
            self._tool(message, text, turn)

    def _constraint(self, text: str) -> None:
        item = _clip(text)
        if item not in self.new["task_overview"]:
            self.new["task_overview"].append(item)

    def _user(self, text: str, turn: int | None) -> None:
        # The person's sentences are copied whole: a faithful model keeps what was asked.
        for sentence in _sentences(text):
            if not self.user_seen and self.previous is None:
                self._constraint(sentence)
            else:
                self.new["context_to_preserve"].append(_cite("User said: " + sentence, turn))
        self.user_seen = True

    def _assistant(self, message: dict[str, Any], text: str, turn: int | None) -> None:
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            shown = f"{function.get('name') or 'tool'}({_clip(str(function.get('arguments') or ''))[:80]})"
            self.calls[str(call.get("id", ""))] = (shown, turn)
        if text.strip():
            sentences = _sentences(text)
            self.new["next_steps"] = [_clip(s) for s in sentences[-2:]]

    def _tool(self, message: dict[str, Any], text: str, turn: int | None) -> None:
        shown, call_turn = self.calls.pop(str(message.get("tool_call_id", "")), ("tool(…)", None))
        turn = turn if turn is not None else call_turn
        name = shown.split("(", 1)[0]
        if _ERROR.match(text):
            reason = _clip(text.strip().splitlines()[0])
            self.new["ruled_out"].append({"approach": f"calling {shown}", "reason": reason,
                                          "evidence": f"archive turn {turn}" if turn is not None
                                          else "this tool result"})
            return
        self.new["current_state"].append(_cite(f"called {shown}", turn))
        lines = [ln.strip() for ln in text.splitlines() if _FIGURE.search(ln)]
        for line in lines[:FIGURE_LINES_PER_RESULT]:
            finding = _clip(f"{name}: {line}")
            if not self._listed(finding):
                self.new["important_discoveries"].append(_cite(finding, turn))

    def _listed(self, finding: str) -> bool:
        """Whether the finding is in the previous summary or this batch, cited any turn."""
        if self.listed is None:
            self.listed = {_CITED.sub("", item) for item in (self.previous or {}).get(
                "important_discoveries", ())}
        if finding in self.listed:
            return True
        self.listed.add(finding)
        return False

    def result(self) -> dict[str, Any]:
        for shown, turn in self.calls.values():
            self.new["current_state"].append(_cite(f"called {shown} (result not shown)", turn))
        previous = self.previous or {key: [] for key in SECTIONS.values()}
        out: dict[str, list] = {}
        for key in SECTIONS.values():
            if key in GROWING:
                out[key] = [x for x in self.new[key] if x not in previous[key]]
            elif key != "task_overview":  # "as of now": the newest view replaces
                out[key] = self.new[key] or previous[key]
            else:
                out[key] = previous[key] + [x for x in self.new[key] if x not in previous[key]]
        return out


def build_summary(messages: list[dict[str, Any]], mode: str = "faithful") -> dict[str, Any]:
    """The summary JSON the simulated model answers with, built from `messages` only."""
    return SummaryPlayer(mode).answer(messages)
