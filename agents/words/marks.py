"""What a text says, for telling a model's own text from copies: its marks (words and
figures that carry content), with HTML escaping undone and chat-template tokens left out.

Weak models on llama.cpp servers read every text HTML-escaped by the chat template and write
it back the same way (`&lt;system-info&gt;`, `&amp;#34;`), and a model that lost track of
its turn writes the template's own tokens (`<|im_start|>user`, `<s>[INST]`). Neither is
content: a check that compares texts undoes the first and drops the second.
"""
from __future__ import annotations

import html
import re

from agents.words.patterns import CJK

# Turn and sequence markers of the common chat templates (ChatML, Llama 2/3, Mistral,
# Gemma, Phi), each with the role name that follows it: "<|im_start|>user" is one token of
# framing, not the word "user".
_ROLES = r"(?:system|user|assistant|tool|model|ipython|function)\b"
TEMPLATE_TOKEN = re.compile(
    rf"(?:<\|[a-z_]{{2,30}}\|>|<(?:start|end)_of_turn>|<(?:bos|eos|pad)>)(?:[ \t]*{_ROLES})?"
    r"|</?s>|\[/?INST\]|<</?SYS>>|\[/?(?:SYSTEM_PROMPT|AVAILABLE_TOOLS|TOOL_RESULTS)\]", re.I)
_ESCAPED = re.compile(r"&(?:quot|amp|lt|gt|apos|#\d+|#x[0-9a-f]+);", re.I)
MAX_UNESCAPES = 4  # `&amp;amp;#34;`: the escaping compounds once per round trip

_MARK = re.compile(rf"[^\W_{CJK}]{{3,}}|\d{{2,}}")  # words of 3+ letters, numbers of 2+ digits
# _MARK on ASCII text: there its class is [A-Za-z0-9], and lower-casing, which for ASCII
# is casefolding, changes no character's class or the text's length, so matching the
# lower-cased text finds the same spans already casefolded (and ASCII has no CJK run).
# There each match is a whole run of [a-z0-9] (a match starts where a run starts, and a
# run too short for the first branch leaves no room for a match inside it): the runs of
# 3+ and the runs of two digits. The runs are what str.split() gives once every other
# character is a space, at a fifth of the regex's cost (the source audit marks every
# archived row).
# As bytes: lower-cases A-Z and blanks the rest in one bytes.translate, a third of the
# cost of str.lower() and a str.translate by a dict on a 5 kB tool result.
_ASCII_GAPS = bytes(c + 32 if 65 <= c <= 90 else c if 97 <= c <= 122 or 48 <= c <= 57 else 32
                    for c in range(256))
# In CJK text a mark is two characters in a row (every pair, overlapping): one character
# alone is shared by chance (文, 的, 是 are in most texts), as two letters would be.
_CJK_RUN = re.compile(rf"[{CJK}]{{2,}}")
_COMMON = frozenset("the and are for was were with that this not you has have from all any "
                    "but its can will one there their which what when into than then".split())


def unescaped(text: str) -> str:
    """`text` with HTML entities decoded, as often as they were applied."""
    if "&" not in text:  # every entity starts with it: most texts, without a regex scan
        return text
    for _ in range(MAX_UNESCAPES):
        if not _ESCAPED.search(text):
            break
        text = html.unescape(text)
    return text


def without_template_tokens(text: str) -> str:
    # Every template token starts with "<" or "[": a text with neither has none, found
    # without the regex trying its alternatives at every character (the source audit
    # reads every archived tool result through plain()).
    if "<" not in text and "[" not in text:
        return text
    return TEMPLATE_TOKEN.sub(" ", text)


def template_share(text: str) -> float:
    """The part of `text`'s visible characters that are chat-template tokens (0 to 1)."""
    if not TEMPLATE_TOKEN.search(text):  # most texts: no need to count characters
        return 0.0
    # str.split() splits at exactly the characters str.isspace() is true for.
    visible = sum(map(len, text.split()))
    if not visible:
        return 0.0
    framing = sum(len(part) for m in TEMPLATE_TOKEN.finditer(text) for part in m.group().split())
    return framing / visible


def plain(text: str) -> str:
    """What `text` says: unescaped, without template tokens."""
    return without_template_tokens(unescaped(text))


def marks(text: str) -> set[str]:
    """The words of 3+ letters and numbers of 2+ digits of `text`, casefolded (in CJK text
    every two characters in a row), common function words left out."""
    if text.isascii():  # most texts: the same marks, a tenth of the cost (see _ASCII_GAPS)
        runs = set(text.encode("ascii").translate(_ASCII_GAPS).decode("ascii").split())
        runs -= _COMMON
        # Removed in place: most runs are marks, so the set is not copied for them.
        runs.difference_update([run for run in runs
                                if len(run) < 3 and not (len(run) == 2 and run.isdigit())])
        return runs
    found = {m.casefold() for m in _MARK.findall(text)}
    for run in _CJK_RUN.findall(text):
        found.update(run[i:i + 2] for i in range(len(run) - 1))
    return found - _COMMON
