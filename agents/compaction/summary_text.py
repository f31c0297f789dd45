"""The C6 summary sections read from a small model's plain text (issue 11).

Asked for JSON, SmolLM2-class models answer with markdown ("## Task overview", "**Next
steps:**", "1. Current state") or with JSON whose quotes came back HTML-escaped
(`{&quot;task_overview&quot;: …}`). Both carry the sections; this module reads them.
Headings are matched by their words, not their exact text, because a small model
paraphrases ("Goal and constraints", "Key findings"). Text that has no recognisable
heading is not a summary: the caller falls back and says so.
"""
from __future__ import annotations

import html
import re

# (field, words that name it in a heading), most specific first: "task" alone is too loose
# to come before "next steps" ("next tasks") and "open questions".
_HEADING_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ruled_out", ("ruled out", "ruled_out", "rejected", "failed approach", "dead end")),
    ("open_questions", ("open question", "open_questions", "questions", "unknowns")),
    ("next_steps", ("next step", "next_steps", "next action", "to do", "todo", "next")),
    ("context_to_preserve", ("context to preserve", "context_to_preserve", "preserve",
                             "preferences", "commitments")),
    ("important_discoveries", ("important discover", "important_discoveries", "discover",
                               "finding", "key data", "highlight", "key facts")),
    ("current_state", ("current state", "current_state", "progress", "status", "done so far",
                       "state")),
    ("task_overview", ("task overview", "task_overview", "overview", "goal", "constraint",
                       "objective", "task")),
)
_BULLET = re.compile(r"^\s*(?:[-*•+]|\d+[.)])\s+(?P<item>.+)$")
_ESCAPED = re.compile(r"&(?:quot|amp|lt|gt|apos|#\d+|#x[0-9a-f]+);", re.I)


def unescape(text: str) -> str:
    """The text with HTML entities decoded, when it has any (`&quot;` for `"`)."""
    return html.unescape(text) if _ESCAPED.search(text) else text


def heading_field(line: str) -> tuple[str, str] | None:
    """(field, text after its colon) when `line` is a section heading, else None.

    A heading is marked (markdown #, **bold**, a trailing colon, or "Title: item") and
    short; a sentence that merely contains a colon is not one."""
    stripped = line.strip()
    marked = (stripped.startswith(("#", "**")) or ":" in stripped[:60]
              or re.match(r"^\d+[.)]\s+\*\*", stripped) is not None)
    if not marked or len(stripped) > 200:
        return None
    title = re.sub(r"^#+\s*", "", stripped).replace("**", "").strip()
    title, _, rest = title.partition(":")
    title = re.sub(r"^\d+[.)]\s*", "", title).strip()
    lowered = title.lower().replace("_", " ")
    if not lowered or len(lowered.split()) > 6:
        return None
    for name, words in _HEADING_WORDS:
        if any(word.replace("_", " ") in lowered for word in words):
            return name, rest.strip()
    return None


def sections_from_text(text: str) -> dict[str, list[str]]:
    """The sections a text names, each with its items (bullets, or its lines)."""
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        if not line.strip() or line.strip() in ("```", "---"):
            continue
        found = heading_field(line)
        if found is not None:
            current, rest = found
            sections.setdefault(current, [])
            if rest:
                sections[current].append(rest)
            continue
        if current is None:
            continue
        bullet = _BULLET.match(line)
        item = (bullet.group("item") if bullet else line).strip().strip("*").strip()
        if item:
            sections[current].append(item)
    return {name: items for name, items in sections.items() if items}


# llama-cpp-python's function-calling form, which a small model copies from the prompt
# (`functions.list_files:\n{ }`), and the other shapes of a call written as text.
_CALL_TEXT = re.compile(r"^\s*(?:message:\s*)?(?:functions\.(?P<name>[\w.-]+):|<tool_call>)",
                        re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")
MIN_ITEM_CHARS = 12  # shorter lines ("Summary:", "Sure!") carry no fact
# The request's own framing (agents.compaction.fresh_requests), which a small model copies back:
# "[archive turn 3, ref arc:…]", "(called list_files with { })".
_FRAMING = re.compile(r"^(?:\[[^\]]*\]|\(called [^)]*\))$")


def tool_call_text(text: str) -> str | None:
    """The tool a text calls when it is a tool call written out (as the whole answer or its
    start), else None: such an answer continued the agent's turns, it summed nothing up."""
    found = _CALL_TEXT.match(text or "")
    if not found:
        return None
    return found.group("name") or "a tool"


def _echo_set(ignore: tuple[str, ...]) -> set[str]:
    return {" ".join(line.split()).casefold() for block in ignore for line in block.splitlines()}


def drop_echoes(sections: dict[str, list[str]], ignore: tuple[str, ...]) -> dict[str, list[str]]:
    """`sections` without items that only repeat a line of `ignore` (the request's wording)."""
    echoed = _echo_set(ignore)
    kept = {name: [i for i in items if " ".join(i.split()).casefold() not in echoed]
            for name, items in sections.items()}
    return {name: items for name, items in kept.items() if items}


# A summary that is a copy of its request: nearly all its items are lines of the request's
# material, and they are most of them (a summary may copy key lines word for word, as the
# request asks for figures and file names; a copy keeps them all).
COPIED_ITEMS = 0.9
COPIED_MATERIAL = 0.75
MIN_MATERIAL_LINES = 12  # a copy of fewer lines is as short as a summary of them


def _flat(line: str) -> str:
    return " ".join(line.split()).casefold()


def material_copy(items: list[str], material: str, ignore: tuple[str, ...] = (),
                  earlier: str = "") -> tuple[int, int] | None:
    """(lines copied, lines of the material) when `items` are a copy of `material` (a
    request's texts), else None. The material's lines are the facts it states, read as a
    summary's are (`prose_items`: not its labels, its headings or `ignore`'s wording), less
    the notes written `earlier`, which the request asks to keep."""
    said = [_flat(item) for item in items if item.strip()]
    if not said:
        return None
    # A line of the material, flattened, is a piece of the whole material flattened: an
    # item found nowhere in it is no copied line, and a summary that is no copy is told
    # apart without cutting tens of kB of material into lines.
    flat = _flat(material)
    if sum(item in flat for item in said) < COPIED_ITEMS * len(said):
        return None
    lines = ({_flat(line) for line in prose_items(material, ignore)}
             - {_flat(line) for line in prose_items(earlier)})
    if len(lines) < MIN_MATERIAL_LINES:
        return None
    copied = [item for item in said if item in lines]
    if len(copied) < COPIED_ITEMS * len(said) or len(set(copied)) < COPIED_MATERIAL * len(lines):
        return None
    return len(set(copied)), len(lines)


def prose_items(text: str, ignore: tuple[str, ...] = ()) -> list[str]:
    """Facts of an answer with no recognisable headings: its bullets or lines, long lines cut
    into sentences. Lines of `ignore` (the request's own wording, echoed back) are left out."""
    echoed = _echo_set(ignore)
    items: list[str] = []
    for line in text.splitlines():
        while bullet := _BULLET.match(line):  # "- - item": a copied bullet under a bullet
            line = bullet.group("item")
        line = line.strip().strip("*#").strip()
        if re.match(r"^message:\s*", line, re.I):
            line = line[len("message:"):].strip()
        # "Here is a summary of the conversation:" introduces, it states nothing
        if (len(line) < MIN_ITEM_CHARS or line.endswith(":") or _FRAMING.match(line)
                or " ".join(line.split()).casefold() in echoed):
            continue
        items.extend(s.strip() for s in _SENTENCE.split(line) if len(s.strip()) >= MIN_ITEM_CHARS)
    return items
