"""Anchors (feature C8): rule-based extraction of what must stay in context, English and Chinese.

Tier 1 hard constraints come from user messages and are never dropped; tier 3 details (a
number that constrains nothing) roll off with the window; tier 2 conclusions come from tool
results (agents.words.conclusions). A conflict key ties a statement to the one it may change
("budget at most 80k" and "… 50k" share "max:budget"), but a hard constraint is replaced
only when the person says so (agents.words.merge, issue 13). Prohibitions and obligations
("Do not …", "Never …", "Always …", 不要, 只能 …) are hard constraints too. Extraction is
linear in the text: clauses are bounded and every pattern runs once per clause.
"""
from __future__ import annotations

import re

from agents.store.interface import AnchorRecord
from agents.words.patterns import (ASCII_WORDS, CANON, CJK, CJK_DATE_HINT, CJK_FILLERS, CUTOFF,
                                   DATA, DATE_LOW, DATE_RE, DATE_WORDS, DEMAND, FORMAT_ANY,
                                   FORMAT_WORDS, FORMATS_BEFORE, MAX, MIN, MUST, NEGATION,
                                   NEGATION_OR_USE, OTHER_TRIGGER, QUANTITY_RE, REPLACING, RULE_ANY,
                                   RULE_HEAD, STOP, SUFFIX_LIMIT, SUPERSEDE, TRIGGER_WORDS,
                                   WORDS_RE)

MAX_ANCHOR_CHARS = 200
_SENTENCES = re.compile(r"[\n\r]+|(?<=[。！？；!?;])|(?<=\.)(?=\s|$)")
_CLAUSES = re.compile(r"(,\s+|，)")
_LIST_MARK = re.compile(r"^\s*(?:[-*•]|\d+[.)、])\s+")
MAX_CLAUSE_CHARS = 300  # longer runs without a break are classified in pieces (linear time)


def clip_text(text: str, limit: int = MAX_ANCHOR_CHARS) -> str:
    """Trim to `limit` characters without cutting a number in half (a cut "1,23" lies)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = next((m.start() for m in re.finditer(r"\d[\d.,]*\d|\d", text)
                if m.start() < limit - 1 < m.end()), limit - 1)
    return text[:cut].rstrip() + "…"


def _bounded(piece: str) -> list[str]:
    """`piece` cut at spaces into runs of at most MAX_CLAUSE_CHARS: every later step then
    costs a bounded amount per run, so extraction is linear in the text."""
    if len(piece) <= MAX_CLAUSE_CHARS:
        return [piece]
    runs, start = [], 0
    while start < len(piece):
        end = min(len(piece), start + MAX_CLAUSE_CHARS)
        if end < len(piece):
            space = piece.rfind(" ", start + MAX_CLAUSE_CHARS // 2, end)
            end = space if space > start else end
        runs.append(piece[start:end])
        start = end
    return runs

# A quick test before classification: every English constraint pattern above starts with,
# or holds, one of these words; the other languages' markers are matched as they are.
# One word scan and one set test cost a few µs, where the patterns cost ~75 µs a clause.


def _may_bind(low: str, words: list[str]) -> bool:
    """False when `low` holds none of the words any constraint needs (most clauses)."""
    if not TRIGGER_WORDS.isdisjoint(words):
        return True
    return ("=" in low or not low.isascii()) and OTHER_TRIGGER.search(low) is not None


def _clauses(text: str) -> list[tuple[str, tuple[str, str] | None]]:
    """Sentences, each split further at commas when it holds more than one constraint,
    with the constraint each one states (kind, key) or None. Every piece classified is at
    most MAX_CLAUSE_CHARS long and classified at most twice, so this is linear in `text`."""
    out: list[tuple[str, tuple[str, str] | None]] = []
    for sentence in _SENTENCES.split(text):
        pieces = _CLAUSES.split(_LIST_MARK.sub("", sentence).strip().rstrip(".。;；!！?？ "))
        groups: list[list] = []  # [found, runs, chars, merged]: a clause without a
        for part, sep in zip(pieces[::2], pieces[1::2] + [""]):  # constraint joins its neighbour
            for run in (part,) if len(part) <= MAX_CLAUSE_CHARS else _bounded(part):
                found = _classify(run)
                last = groups[-1] if groups else None
                if (last is not None and (found is None or last[0] is None)
                        and last[2] + len(run) <= MAX_CLAUSE_CHARS):
                    last[0] = last[0] or found
                    last[1].append(run + sep)
                    last[2] += len(run) + len(sep)
                    last[3] = True
                else:
                    groups.append([found, [run + sep], len(run) + len(sep), False])
        for found, runs, _chars, merged in groups:
            clause = "".join(runs).strip().rstrip(",， ")
            if merged and found:  # the whole clause names the subject better, when it binds
                found = _classify(clause) or found
            out.append((clause, found))
    return [(c, f) for c, f in out if _THREE_LETTERS.search(c)]

_THREE_LETTERS = re.compile(rf"[A-Za-z{CJK}](?:[^A-Za-z{CJK}]*[A-Za-z{CJK}]){{2}}")
_DIGIT = re.compile(r"\d")


def sentences(text: str) -> list[str]:
    """`text` cut into sentences (and lines), the way extraction reads it."""
    return _SENTENCES.split(text)


def _canon(word: str) -> str:
    word = CANON.get(word, word)
    plural = len(word) > 3 and word.endswith("s") and not word.endswith("ss") and word.isascii()
    return word[:-1] if plural else word


def _subject(prefix: str) -> str:
    """The thing a constraint is about: the last content word before its comparator."""
    prefix = REPLACING.sub(" ", prefix.lower())  # "预算改为" is about 预算
    for token in reversed(WORDS_RE.findall(prefix)):
        if re.match(rf"[{CJK}]", token):
            if token := CJK_FILLERS.sub("", token):
                return _canon(token if token in CANON else token[-4:])
        elif token not in STOP and not token[0].isdigit():
            return _canon(token)
    return ""


def _residue(text: str, *patterns: re.Pattern) -> str:
    """Content words of `text` once the given patterns and filler words are removed."""
    text = text.lower()
    for pattern in patterns:
        text = pattern.sub(" ", text)
    return " ".join(_canon(w) for w in WORDS_RE.findall(text) if w not in STOP)[:40].strip()


def _quantity_after(low: str, pos: int, span: int = 30) -> re.Match | None:
    """A number (not a date) shortly after `pos`."""
    for m in QUANTITY_RE.finditer(low, pos, min(len(low), pos + span)):
        if not DATE_LOW.match(low, m.start()):
            return m
    return None


def _first_limit(low: str) -> tuple[re.Match, re.Match] | None:
    """The first "at most"-like word that a number follows, and that number."""
    for m in MAX.finditer(low):
        if quantity := _quantity_after(low, m.end()):
            return m, quantity
    return None


def _bound(kind: str, pattern: re.Pattern, low: str, lead: int, match: re.Match,
           quantity: re.Match) -> tuple[str, str]:
    """A max/min constraint keyed by what it bounds: the word before the comparator, else
    the unit of the number, else whatever content is left."""
    unit = quantity.group("unit") or ""
    subject = (_subject(low[:min(lead, match.start())]) or _canon("" if unit in STOP else unit)
               or _residue(low, pattern, QUANTITY_RE))
    return kind, f"{kind}:{subject}"


def _date_near(dates: list[re.Match], match: re.Match) -> bool:
    """Whether the cutoff word `match` is tied to one of the clause's `dates`."""
    word = match.group(0)
    if word in ("之前", "以前"):
        return any(match.start() - 2 <= d.end() <= match.start() for d in dates)
    if word in ("deadline", "截止", "截至", "到期"):
        return bool(dates)
    return any(match.end() <= d.start() < match.end() + 40 for d in dates)


def _classify(clause: str) -> tuple[str, str] | None:
    """(kind, key) of a hard constraint: range, deadline, max, min, format, must or rule.

    Every pattern runs once over the clause (dates and limits are found once, then
    compared), so the cost is linear in the clause."""
    low = clause.lower()
    words = ASCII_WORDS.findall(low)
    if not _may_bind(low, words):
        return None
    must = MUST.search(low)
    lead = must.start() if must else len(low)
    # Dates matter only next to a cutoff word ("by", "before", 截止 …); the date scan is the
    # costliest pattern, so it runs only when both a cutoff word and a date hint are there.
    dates = list(DATE_LOW.finditer(low)) if CUTOFF.search(low) and (
        _DIGIT.search(low) or not DATE_WORDS.isdisjoint(words)
        or (not low.isascii() and CJK_DATE_HINT.search(low))) else []
    limit = _first_limit(low)
    data = DATA.search(low)
    for match in CUTOFF.finditer(low) if dates else ():
        if _date_near(dates, match):
            start = min(lead, match.start())
            if (data and data.end() <= match.end()
                    and match.group(0) not in ("before", "之前", "以前")):
                return "range", "range:" + (_subject(low[:start]) or "data")
            if not (limit and limit[0].start() < match.start()):  # a limit comes first
                return "deadline", "deadline:" + (_subject(DATE_LOW.sub(" ", low[:start])) or "task")
    if limit:
        return _bound("max", MAX, low, lead, *limit)
    for match in MIN.finditer(low):
        if quantity := _quantity_after(low, match.end()):
            return _bound("min", MIN, low, lead, match, quantity)
    suffix = SUFFIX_LIMIT.search(low)
    if suffix and not DATE_LOW.match(low, suffix.start()):
        kind = "min" if suffix.group(1) == "以上" else "max"
        return kind, f"{kind}:{_subject(low[:min(lead, suffix.start())])}"
    category = _first_format(low)
    if category and DEMAND.search(low):
        return "format", f"format:{category}:{_residue(low, FORMAT_WORDS)}"
    if must:
        action = _residue(low[must.end():], NEGATION)
        return "must", "must:" + (action or _residue(low[:must.start()]))
    rule = RULE_HEAD.search(low.strip()) or RULE_ANY.search(low)
    if rule:
        rest = low.strip() if rule.re is RULE_HEAD else low
        action = _residue(rest[rule.end():], NEGATION_OR_USE)
        return "rule", "rule:" + (action or _residue(rest[:rule.start()]))
    return None

def _first_format(low: str) -> str | None:
    """The first of FORMATS (in its order) that occurs anywhere in `low`."""
    found = FORMAT_ANY.search(low)
    if found is None:
        return None
    # The union finds the leftmost match; an earlier category may still occur further on.
    name = found.lastgroup
    while (earlier := FORMATS_BEFORE[name]) and (found := earlier.search(low, found.start() + 1)):
        name = found.lastgroup
    return name




def supersedes(text: str) -> bool:
    """True when a statement says it replaces an earlier one ("instead", "from now on",
    "change X to Y", 改为 …): only then does it deactivate a constraint on the same thing."""
    return SUPERSEDE.search(text) is not None


def extract_anchors(text: str, *, source: str = "user", turn: int = 0) -> list[AnchorRecord]:
    """Tier-1 constraints and tier-3 details stated in a user message, in order."""
    out: list[AnchorRecord] = []
    for clause, found in _clauses(text or ""):
        if found:
            tier, key = 1, found[1]
        elif _DIGIT.search(clause) and (QUANTITY_RE.search(clause) or any(  # "today" alone is
                _DIGIT.search(d.group(0)) for d in DATE_RE.finditer(clause))):  # small talk
            tier, key = 3, "detail:" + " ".join(WORDS_RE.findall(clause.lower()))[:60]
        else:
            continue
        out.append(AnchorRecord(tier=tier, text=clip_text(clause), key=key, source=source,
                                turn=turn))
    return out
