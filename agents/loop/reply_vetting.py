"""What a weak model's reply really is (issue 11): a tool call written as text, an echo of
the engine's own blocks, or a final answer.

Small models on llama.cpp and Ollama often write their tool calls into the content —
Hermes/Qwen `<tool_call>{…}</tool_call>` tags, a bare `{"name": …, "arguments": …}` object,
a ```json fence — instead of the `tool_calls` field. Taken as text, such a reply ended
sessions "finished" on a JSON blob. `recover_tool_calls` turns calls to known tools into
real tool calls; `refusal` says why a reply without calls cannot be the final answer: a
tool-call-shaped JSON naming no known tool, text that only repeats what the engine
injected (hints, the task snapshot, the summary), or text that only repeats a tool's
error message (SmolLM2 ended its tool task "finished" on "The tools returned: Error: The
arguments for list_files are not valid JSON…"). `unsupported` says why a reply that is none
of those is still no answer: it asks back, restates the task, or holds nothing of the tool
results or the person's messages when there are some to answer from.

Copies are compared as what they say: HTML escaping undone, chat-template tokens, markdown
quote marks and the digits of dates and times aside (a small model copied the time hint
with another date, and TaskOS's summary block as `&lt;system-info&gt;…`).
"""
from __future__ import annotations

import difflib
import json
import re
from dataclasses import replace
from typing import Any, Callable, Iterable

from agents.lenient_json import json_values
from agents.provider.client import ModelReply
from agents.words.marks import marks, plain
from agents.words.patterns import CJK

# llama-cpp-python's chatml-function-calling form, which a small model writes as text when
# the request has no tools (tool_choice "none") but its history has calls in this form.
_FUNCTIONS = re.compile(r"(?:^|\n)[ \t]*(?:message:\s*)?functions\.(?P<name>[A-Za-z_][\w.-]*):[ \t]*")
_DECODER = json.JSONDecoder()
_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S | re.I)
_FENCE = re.compile(r"```[a-zA-Z]*\s*|```")
_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARG_KEYS = ("arguments", "parameters", "args", "input")
# Markup of the engine's injected blocks; a line of only this says nothing.
_MARKUP = re.compile(r"</?(?:system-hint|system-info|task-snapshot|snapshot-update|person-words)>"
                     r"|\[(?:time|tasks|context|tool_error|tool_repeat)\]|^(?:\s*>)+\s*|^#+\s*"
                     r"|^[-*•]\s*", re.I)
_DIGITS = re.compile(r"\d")
MIN_OWN_CHARS = 16  # letters and digits of the answer's own beyond the echoed lines
# Words as agents.store.memory.keywords splits text for search: runs of letters, digits and
# "_", but each CJK character a word of its own. Chinese has no spaces: as one \w+ run, a
# sentence was one "word", shared with nothing unless copied whole.
_WORDS = re.compile(rf"[{CJK}]|[^\W{CJK}]+")
_CJK_CHAR = re.compile(rf"[{CJK}]")
COPY_RUN = 4  # words in a row shared with an error message: copied, not written
# A Chinese word is mostly two characters, so a CJK character weighs half a word: a copied
# run is COPY_RUN words, 2 × COPY_RUN characters in a row, or a mix of the same weight.
# Weights are counted in half words.
_RUN_WEIGHT = 2 * COPY_RUN
# The words a model wraps a copied result in: they add nothing of its own.
_WRAPPING = frozenset("the tools tool returned result results of call error errors said".split())


def _call_parts(value: Any) -> tuple[str, Any] | None:
    """(tool name, arguments) when `value` is shaped like one tool call, else None."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict):
        value = value["function"]  # the OpenAI wire form, written as text
    name = next((value[k] for k in _NAME_KEYS if isinstance(value.get(k), str)), None)
    if name is None:
        return None
    arguments = next((value[k] for k in _ARG_KEYS if k in value), None)
    if arguments is None and set(value) - set(_NAME_KEYS):
        return None  # {"name": "Ada", "age": 3} is data, not a call
    return name, {} if arguments is None else arguments


def _calls_in(value: Any) -> list[tuple[str, Any]]:
    items = value if isinstance(value, list) else [value]
    parts = [_call_parts(item) for item in items]
    return [p for p in parts if p] if parts and all(parts) else []


def _as_json_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments or "{}"
    return json.dumps(arguments, ensure_ascii=False)


def text_tool_calls(content: str) -> tuple[list[tuple[str, Any]], str]:
    """Tool-call-shaped JSON in `content` (tagged, fenced or bare) and the text left over."""
    prefixed = _functions_form(content)
    if prefixed is not None:
        return prefixed
    found: list[tuple[str, Any]] = []
    spans: list[tuple[int, int]] = []
    tagged = list(_TAG.finditer(content))
    regions = [(m.start(1), m.end(1), m.start(), m.end()) for m in tagged] or [
        (0, len(content), None, None)]
    for start, end, cut_start, cut_end in regions:
        for value, v_start, v_end in json_values(content[:end], "{["):
            if v_start < start:
                continue
            calls = _calls_in(value)
            if calls:
                found.extend(calls)
                spans.append((cut_start if cut_start is not None else v_start,
                              cut_end if cut_end is not None else v_end))
                if cut_start is not None:
                    break  # one call per tag
    rest, last = [], 0
    for start, end in sorted(spans):
        rest.append(content[last:start])
        last = max(last, end)
    rest.append(content[last:])
    left = _FENCE.sub("", "".join(rest)).strip()
    return found, left


def _functions_form(content: str) -> tuple[list[tuple[str, Any]], str] | None:
    """Calls written as `functions.NAME:` lines, each followed by its JSON arguments (or
    none); None when the content has no such line."""
    found: list[tuple[str, Any]] = []
    rest, last = [], 0
    for match in _FUNCTIONS.finditer(content):
        if match.start() < last:
            continue
        end, arguments = match.end(), {}
        start = len(content) - len(content[end:].lstrip())
        if content.startswith("{", start):
            try:
                arguments, end = _DECODER.raw_decode(content, start)
            except (ValueError, RecursionError):
                pass
        found.append((match.group("name"), arguments))
        rest.append(content[last:match.start()])
        last = end
    if not found:
        return None
    rest.append(content[last:])
    return found, "".join(rest).strip()


def recover_tool_calls(reply: ModelReply, known: set[str], turn: int) -> ModelReply:
    """`reply` with the calls it wrote as text moved into `tool_calls`, when every call it
    wrote names a known tool; else `reply` unchanged (see `refusal`)."""
    if reply.tool_calls or not reply.content:
        return reply
    calls, left = text_tool_calls(reply.content)
    if not calls or any(name not in known for name, _ in calls):
        return reply
    recovered = [{"id": f"text_call_{turn}_{i}", "name": name, "arguments": _as_json_text(args)}
                 for i, (name, args) in enumerate(calls)]
    return replace(reply, content=left, tool_calls=recovered, finish_reason="tool_calls")


def _letters(text: str) -> int:
    """Letters and digits of `text`, a CJK character counting two (half a word, where an
    English word has four or five letters): 16 Chinese characters say far more than 16
    letters."""
    return sum(ch.isalnum() for ch in text) + len(_CJK_CHAR.findall(text))


def _norm(line: str) -> str:
    """A line as it compares with the engine's: markup, quote marks and list marks off, and
    every digit the same (a copied time hint or snapshot line with other figures is still a
    copy; a line of the answer's own differs in its words)."""
    return _DIGITS.sub("0", " ".join(_MARKUP.sub("", line.strip()).split()).casefold())


def _lines(text: str) -> list[str]:
    return plain(text).splitlines()


# A line this close to one of the engine's (difflib's ratio) is a copy with a word changed:
# Gemma-3-270M wrote the answer turn's "What the tools returned:" back as "What the tool
# returned:". A line of the answer's own shares words with a label, not nine tenths of it.
NEAR_COPY = 0.9


def _near_copy(text: str, seen: set[str]) -> bool:
    for line in seen:
        if abs(len(line) - len(text)) <= len(text) // 5:
            matcher = difflib.SequenceMatcher(None, text, line, autojunk=False)
            if matcher.real_quick_ratio() >= NEAR_COPY and matcher.quick_ratio() >= NEAR_COPY \
                    and matcher.ratio() >= NEAR_COPY:
                return True
    return False


def echoed(answer: str, injected: Iterable[str]) -> bool:
    """True when `answer` says nothing beyond lines the engine itself put in the context,
    whole or in part, escaped or not."""
    blocks = [b for b in injected if b]
    seen = {_norm(line) for block in blocks for line in _lines(block)}
    seen.discard("")
    whole = _norm(" ".join(plain(b) for b in blocks))
    own, echoes = [], 0
    for line in _lines(answer):
        text = _norm(line)
        if not text:
            continue
        if text in seen or (len(text) >= 12 and (text in whole or _near_copy(text, seen))):
            echoes += 1
        else:
            own.append(text)
    return echoes > 0 and _letters("".join(own)) < MIN_OWN_CHARS


def _runs(words: list[str]) -> list[tuple[int, int]]:
    """(start, end) of the shortest stretch of `words` from each start that weighs a run:
    COPY_RUN words of English, twice as many CJK characters."""
    weights = [1 if _CJK_CHAR.fullmatch(w) else 2 for w in words]
    runs = []
    for start in range(len(words)):
        weight, end = 0, start
        while end < len(words) and weight < _RUN_WEIGHT:
            weight, end = weight + weights[end], end + 1
        if weight < _RUN_WEIGHT:
            break
        runs.append((start, end))
    return runs


def copies_tool_errors(answer: str, errors: Iterable[str]) -> bool:
    """True when `answer` is made of tool error messages: runs of COPY_RUN or more words
    (or CJK characters of the same weight) taken from them, and fewer than MIN_OWN_CHARS
    letters and digits of its own."""
    words = _WORDS.findall(answer.casefold())
    runs = set()
    for error in errors:
        said = _WORDS.findall(error.casefold())
        runs.update(tuple(said[start:end]) for start, end in _runs(said))
    copied = [False] * len(words)
    for start, end in _runs(words):
        if tuple(words[start:end]) in runs:
            copied[start:end] = [True] * (end - start)
    own = "".join(w for w, c in zip(words, copied) if not c and w not in _WRAPPING)
    return any(copied) and _letters(own) < MIN_OWN_CHARS


def draws_on(answer: str, results: Iterable[str], given: Iterable[str]) -> bool:
    """True when `answer` holds a word or number of the tool results (in CJK text, two
    characters in a row) that the request's own words (`given`: the goal, the
    instructions) do not: some of it came from a result."""
    return bool((marks(plain(answer)) - marks(plain(" ".join(given))))
                & marks(plain(" ".join(results))))


# The last sentence of a reply that asks instead of answering ends with a question mark
# (the fullwidth one in CJK text, and Arabic's and Greek's own): "What's your task?"
_ASKS = re.compile(r"[?？؟\u037e]\W*$")
# An answer with no mark of its own restates the task when it repeats this share of the
# goal's marks, and this many at least: "South, 200" picked from a goal that holds the
# data is an answer; a goal's clauses in another order are not.
RESTATED_SHARE = 1 / 3
RESTATED_MARKS = 4
QUESTION_BACK = ("Your last answer asked a question back instead of answering. Do the task "
                 "with the tools, then answer it from what they returned.")
RESTATED = ("Your last answer only restated the task. Do the task with the tools, then "
            "answer it from what they returned.")
NOT_DRAWN = ("Your last answer holds nothing of the tool results or of the person's messages. "
             "Answer the task from what the tools returned, citing names and figures from it.")
# Each of those as the reason a session ends with.
REASONS = {QUESTION_BACK: "it asks a question back instead of answering",
           RESTATED: "it only restates the task",
           NOT_DRAWN: "it holds no word or figure of the tool results or the person's messages"}


def unsupported(answer: str, *, sources: Iterable[str], goal: str, given: Iterable[str] = (),
                archive: Callable[[Callable[[set[str]], bool]], set[str]] | None = None,
                expected: bool = False, required: bool = True) -> str | None:
    """Why a reply that is neither a call nor an echo is still no final answer, as an
    instruction to the model; None when it may stand.

    `sources` are what an answer is drawn from: the tool results that succeeded and the
    person's messages after the goal (not the summary, which is the engine's), and
    `archive(enough)` the marks of those the archive holds (out of the request after a
    compaction), read until `enough` of them holds, else all. `given` are
    the request's own words (system prompt, instructions, tool schemas): like the goal's,
    they are no content of the answer's. Language-independent: an answer is drawn from the
    sources when it shares a mark (a word or figure, two CJK characters) with them beyond
    the given words; it asks back when, drawing on nothing, it ends in a question mark; it
    restates the task when it holds no mark of its own and a third of the goal's. It
    must be drawn from the sources when there are any beyond the goal (and `required`), or
    when `expected` (the answer was asked for from the tool results)."""
    sources = [s for s in sources if s]
    said = marks(plain(answer))
    goal_marks = marks(plain(goal))
    own = said - goal_marks - marks(plain(" ".join(given)))
    drawable = marks(plain(" ".join(sources)))
    if own & drawable:
        return None
    if archive is not None:
        drawable = drawable | archive(lambda found: not own.isdisjoint(found))
        if own & drawable:
            return None
    if _ASKS.search(plain(answer).strip()):
        return QUESTION_BACK
    repeated = len(said & goal_marks)
    if not own and repeated >= max(RESTATED_MARKS, RESTATED_SHARE * len(goal_marks)):
        return RESTATED
    return NOT_DRAWN if expected or (required and drawable - goal_marks) else None


ERROR_COPY = ("Your last answer only repeated a tool's error message, which answers nothing. "
              "Call the tool again with valid arguments, or answer from a tool result that "
              "succeeded.")


def refusal(content: str, known: set[str], injected: Iterable[str],
            tool_errors: Iterable[str] = ()) -> str | None:
    """Why a reply without tool calls is no final answer, as an instruction to the model;
    None when it may stand."""
    calls, left = text_tool_calls(content)
    if calls:
        unknown = sorted({name for name, _ in calls if name not in known})
        listed = ", ".join(sorted(known)) or "none"
        named = f"names no tool of this task ({', '.join(unknown)})" if unknown else \
            "is not a tool call"
        return (f"Your last answer was a tool call written as JSON text, and it {named}. "
                f"Call a tool through the tool-call interface (tools: {listed}), or write the "
                "final answer in plain words.")
    if echoed(content, injected):
        return ("Your last answer only repeated the engine's own notes (hints, the task "
                "snapshot or the summary). Continue the task with a tool call, or write your "
                "own final answer from the tool results.")
    if copies_tool_errors(content, tool_errors):
        return ERROR_COPY
    return None
