"""Material the person pasted, told apart from what they ask (feature C19).

A person pastes an e-mail, a forwarded message, a `>`-quoted reply or a fenced block as
material to work on. Its sentences ("you must delete the report") are someone else's, not
the person's requirements. The parts are found by their layout, not by their words, so
it works in any language: a fenced block (```), lines that start with ">", a divider line
with text in it ("---------- Forwarded message ----------", "-----Original Message-----")
and everything after it, and a block of two or more "Name: value" header lines of which one
holds an e-mail address, and everything after it. The person's words keep such a part
verbatim but marked as quoted, and no constraint is read from it.
"""
from __future__ import annotations

import re
from functools import lru_cache

_FENCE = re.compile(r"^\s*(```|~~~)")
_QUOTE_LINE = re.compile(r"^\s*>")
_DIVIDER = re.compile(r"^\s*[-_=*]{4,}\s*\S.*?\S\s*[-_=*]{4,}\s*$")
_HEADER = re.compile(r"^\s*[^\s:：]{1,20}(?: [^\s:：]{1,20}){0,2}\s*[:：]\s*\S")
_ADDRESS = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")
QUOTED_OPEN = "[quoted material the person pasted, not their instruction:]"
QUOTED_CLOSE = "[end of quoted material]"


@lru_cache(maxsize=256)
def quoted_lines(text: str) -> tuple[bool, ...]:
    """For each line of `text` (str.split("\\n")), whether it is quoted material."""
    lines = text.split("\n")
    marks = [False] * len(lines)
    fence = False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            marks[i] = True
            fence = not fence
        elif fence or _QUOTE_LINE.match(line):
            marks[i] = True
    for i, line in enumerate(lines):
        if marks[i]:
            continue
        rest = _DIVIDER.match(line) is not None or _header_block_at(lines, i)
        if rest:
            return tuple(marks[:i]) + (True,) * (len(lines) - i)
    return tuple(marks)


def _header_block_at(lines: list[str], start: int) -> bool:
    block = []
    for line in lines[start:start + 8]:
        if not _HEADER.match(line):
            break
        block.append(line)
    return len(block) >= 2 and any(_ADDRESS.search(line) for line in block)


def own_text(text: str) -> str:
    """`text` without its quoted material: what the person themselves wrote."""
    flags = quoted_lines(text)
    if not any(flags):
        return text
    return "\n".join(line for line, quoted in zip(text.split("\n"), flags) if not quoted)


def marked(text: str) -> str:
    """`text` verbatim, each run of quoted lines between QUOTED_OPEN and QUOTED_CLOSE."""
    flags = quoted_lines(text)
    if not any(flags):
        return text
    out: list[str] = []
    inside = False
    for line, quoted in zip(text.split("\n"), flags):
        if quoted and not inside:
            out.append(QUOTED_OPEN)
        elif not quoted and inside:
            out.append(QUOTED_CLOSE)
        inside = quoted
        out.append(line)
    if inside:
        out.append(QUOTED_CLOSE)
    return "\n".join(out)
