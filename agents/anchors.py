"""Anchors (SPEC C8): rule-based extraction of what must stay in context, English and Chinese.

Tier 1 hard constraints come from user messages and are never dropped; tier 3 details (a
number that constrains nothing) roll off with the window; tier 2 conclusions come from tool
results (agents.conclusions). A conflict key ties a statement to the one it may change
("budget at most 80k" and "… 50k" share "max:budget"), but a hard constraint is replaced
only when the person says so (agents.anchor_merge, issue 13). Prohibitions and obligations
("Do not …", "Never …", "Always …", 不要, 只能 …) are hard constraints too. Extraction is
linear in the text: clauses are bounded and every pattern runs once per clause.
"""
from __future__ import annotations

import re

from agents.store import AnchorRecord

MAX_ANCHOR_CHARS = 200
_CJK = r"\u4e00-\u9fff"
_MONTHS = (r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
           r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?")
DATE_RE = re.compile(
    r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{4}年\d{1,2}月(?:\d{1,2}[日号])?|\d{1,2}月\d{1,2}[日号]"
    rf"|\b(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s+\d{{4}})?"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{_MONTHS})\b(?:\s+\d{{4}})?"
    r"|\b(?:the\s+)?end\s+of\s+(?:the\s+)?(?:(?:last|this|next|previous|current)\s+)?"
    r"(?:day|week|month|quarter|year)\b|\b(?:month|quarter|year)[- ]end\b"
    r"|\b(?:next\s+|this\s+)?(?:mon|tues|wednes|thurs|fri|satur|sun)day\b"
    r"|\b(?:today|tonight|tomorrow|eod|midnight)\b"
    r"|(?:上个?|本|这个?|下个?)?(?:月|季度|年)(?:底|末)|(?:上|本|下|这)?(?:周|星期)[一二三四五六日天]"
    r"|今天|明天|后天|今晚", re.I)
# The patterns below run on lower-cased text only: without re.I they are about twice as fast.
_DATE_LOW = re.compile(DATE_RE.pattern)
_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
# A number standing on its own ("room 3", "¥200万", "50k"), not part of a name like "Q2".
QUANTITY_RE = re.compile(
    rf"(?<![A-Za-z_\d.])[¥$€£]?(?P<num>{_NUM})(?:\s*(?:%|％|万|亿|千)|[kKM]\b)?"
    r"(?:\s*(?P<unit>[a-z]+|页|分钟|小时|天|周|个月|字|行|条|元|块))?")

_MUST = re.compile(r"\bmust(?:\s+not|n['’]t)?\b|\b(?:is|are)\s+required\s+to\b|\bmandatory\b"
                   r"|必须|一定要|务必|不得|禁止")
# Prohibitions and obligations without "must" (tier 1): "Do not delete any files.", "Never
# email the customer.", "Only use data up to …", "Always answer in German.", 不要/只能/始终…
# English imperatives count at the head of a clause ("I only need a summary" states no
# rule); modal forms and the Chinese markers count anywhere.
_RULE_HEAD = re.compile(r"^(?:(?:please|kindly|and|but|also|so|then|you|remember\s+to|note:)\s+)*"
                        r"(?:do\s+not|don['’]t|never|always|only|avoid|refrain\s+from|make\s+sure"
                        r"|be\s+sure\s+to|ensure)\b")
_RULE_ANY = re.compile(r"\b(?:may\s+not|shall\s+not|should\s+not|shouldn['’]t|(?:must|should|will)"
                       r"\s+(?:never|always|only)|under\s+no\s+circumstances|at\s+all\s+times)\b"
                       r"|不要|不准|不许|不可以|不能|切勿|千万别|请勿|请别|别再|只能|只用|只使用|只允许"
                       r"|仅限|仅使用|始终|一律|永远不|绝不|绝对不")
# A person replacing an earlier constraint says so; without these words both stay (issue 13).
_SUPERSEDE = re.compile(r"\binstead\b|\bfrom\s+now\s+on\b|\bno\s+longer\b(?!\s+than)|\banymore\b"
                        r"|\bchange[sd]?\b[^.;]{0,80}?\bto\b|\brather\s+than\b|\breplac(?:e|es|ed|ing)\b"
                        r"|\bupdate[sd]?\b[^.;]{0,80}?\bto\b|\bchange\s+of\s+plan\b"
                        r"|改为|改成|换成|改用|不再|取而代之|代替|替换|更改为|调整为|调整到|从现在起|从现在开始", re.I)
_REPLACING = re.compile(r"\binstead\b|\bfrom\s+now\s+on\b|改为|改成|换成|改用|更改为|调整为|调整到"
                        r"|从现在起|从现在开始|不再")
MAX_CLAUSE_CHARS = 300  # longer runs without a break are classified in pieces (linear time)
_MAX = re.compile(r"\bat\s+most\b|\bno\s+more\s+than\b|\bnot\s+more\s+than\b|\bup\s+to\b"
                  r"|\bnot\s+exceed\b|\bno\s+(?:longer|larger|higher|greater)\s+than\b"
                  r"|\b(?:less|fewer)\s+than\b|\bunder\b|\bbelow\b|\bwithin\b"
                  r"|\bmax(?:imum)?(?:\s+of)?\b|\bcap(?:ped)?\s+at\b|\blimit(?:ed)?\s+to\b"
                  r"|≤|<=|不超过|不超出|不多于|不高于|至多|最多|上限")
_MIN = re.compile(r"\bat\s+least\b|\bno\s+(?:less|fewer)\s+than\b|\bnot\s+less\s+than\b"
                  r"|\bmin(?:imum)?(?:\s+of)?\b|≥|>=|至少|不少于|不低于|最少|下限")
_SUFFIX_LIMIT = re.compile(rf"(?:{_NUM})\s*\S{{0,3}}?(以内|之内|以下|以上)")
_CUTOFF = re.compile(r"\bdeadline\b|\bdue\b|\bno\s+later\s+than\b|\bby\b|\bbefore\b|\buntil\b"
                     r"|\btill\b|\bthrough\b|\bup\s+to\b|\bas\s+of\b|截止|截至|到期|之前|以前")
_DATA = re.compile(r"\bdata(?:set)?\b|\brecords\b|\bfigures\b|数据|统计")
_FORMATS = {name: re.compile(rx) for name, rx in (
    ("table", r"\btables?\b|\btabular\b|表格"), ("json", r"\bjson\b"), ("markdown", r"\bmarkdown\b"),
    ("list", r"\bbullet(?:ed)?\s+(?:list|points?)\b|\bbullets\b|\bnumbered\s+list\b|列表|分点|要点"),
    ("language", r"\benglish\b|\bchinese\b|中文|英文|汉语"))}
_DEMAND = re.compile(r"\b(?:must|should|please|need|needs|want|output|format|formatted|include"
                     r"|includes|contain|contains|use|answer|reply|respond|write|present|give"
                     r"|return|deliver|produce|provide|show|render|send)\b|(?:as|in)\s+(?:a\s+)?"
                     r"(?:table|json|markdown|bullet)|请|必须|一定要|务必|需要|要|用|以|输出|格式"
                     r"|使用|包含|包括|回答|回复|写|给出|提供|做成|整理成|生成|呈现|列出")
_STOP = set("a an the this that these those it its is are was were be been being will would shall "
            "should can could may might must not no and or of to for in on at by with from as our "
            "my your their his her we you i they he she me us them keep please now then also total "
            "overall whole entire change plan constraint constraints hard new old final just only "
            "still so than more less have has had do does use spend write make give return "
            "produce deliver submit finish send take stay remain limit cap".split())
STOP_WORDS = frozenset(_STOP)
_CJK_FILLERS = re.compile(r"^(?:另外|此外|还有|同时|并且|而且|注意|要求|请|把|将|我们的|我们|我的|你的|总|整体)+"
                          r"|(?:必须|一定要|务必|需要|应该|应|要|控制在|保持在|限制在|控制|在|是|为|得|的|都|也)+$")
_CANON = {"预算": "budget", "数据": "data", "篇幅": "length", "字数": "words", "页数": "pages",
          "报告": "report", "成本": "cost", "页": "page", "截止日期": "deadline"}
WORDS_RE = re.compile(rf"[a-z0-9][a-z0-9'_-]*|[{_CJK}]+", re.I)
_SENTENCES = re.compile(r"[\n\r]+|(?<=[。！？；!?;])|(?<=\.)(?=\s|$)")
_CLAUSES = re.compile(r"(,\s+|，)")
_LIST_MARK = re.compile(r"^\s*(?:[-*•]|\d+[.)、])\s+")


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
_TRIGGER_WORDS = frozenset("""must mustn required mandatory not don never always only avoid
    refrain sure ensure shouldn times circumstances most more than up exceed under below within
    max maximum cap capped limit limited least less fewer min minimum deadline due later by
    before until till through as table tables tabular json markdown bullet bullets bulleted
    numbered english chinese""".split())
_ASCII_WORDS = re.compile(r"[a-z]+")
_OTHER_TRIGGER = re.compile("|".join(
    w for p in (_MUST, _RULE_ANY, _MAX, _MIN, _CUTOFF, *_FORMATS.values())
    for w in p.pattern.split("|") if w and not re.search(r"[a-z\\]", w))
    + r"|以内|之内|以下|以上|<=|>=")

# Every date DATE_RE finds has a digit, a non-ASCII character or one of these words.
_DATE_WORDS = frozenset("""jan january feb february mar march apr april may jun june jul july
    aug august sep sept september oct october nov november dec december monday tuesday
    wednesday thursday friday saturday sunday today tonight tomorrow eod midnight end""".split())


def _may_bind(low: str, words: list[str]) -> bool:
    """False when `low` holds none of the words any constraint needs (most clauses)."""
    if not _TRIGGER_WORDS.isdisjoint(words):
        return True
    return ("=" in low or not low.isascii()) and _OTHER_TRIGGER.search(low) is not None


def _clauses(text: str) -> list[tuple[str, tuple[str, str] | None]]:
    """Sentences, each split further at commas when it holds more than one constraint,
    with the constraint each one states (kind, key) or None. Every piece classified is at
    most MAX_CLAUSE_CHARS long and classified at most twice, so this is linear in `text`."""
    out: list[tuple[str, tuple[str, str] | None]] = []
    for sentence in _SENTENCES.split(text):
        pieces = _CLAUSES.split(_LIST_MARK.sub("", sentence).strip().rstrip(".。;；!！?？ "))
        groups: list[list] = []  # [found, runs, chars, merged]: a clause without a
        for part, sep in zip(pieces[::2], pieces[1::2] + [""]):  # constraint joins its neighbour
            for run in _bounded(part):
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
    return [(c, f) for c, f in out if len(_LETTER.findall(c)) >= 3]

_LETTER = re.compile(rf"[A-Za-z{_CJK}]")
_DIGIT = re.compile(r"\d")


def sentences(text: str) -> list[str]:
    """`text` cut into sentences (and lines), the way extraction reads it."""
    return _SENTENCES.split(text)


def _canon(word: str) -> str:
    word = _CANON.get(word, word)
    plural = len(word) > 3 and word.endswith("s") and not word.endswith("ss") and word.isascii()
    return word[:-1] if plural else word


def _subject(prefix: str) -> str:
    """The thing a constraint is about: the last content word before its comparator."""
    prefix = _REPLACING.sub(" ", prefix.lower())  # "预算改为" is about 预算
    for token in reversed(WORDS_RE.findall(prefix)):
        if re.match(rf"[{_CJK}]", token):
            if token := _CJK_FILLERS.sub("", token):
                return _canon(token if token in _CANON else token[-4:])
        elif token not in _STOP and not token[0].isdigit():
            return _canon(token)
    return ""


def _residue(text: str, *patterns: re.Pattern) -> str:
    """Content words of `text` once the given patterns and filler words are removed."""
    for pattern in patterns:
        text = pattern.sub(" ", text.lower())
    return " ".join(_canon(w) for w in WORDS_RE.findall(text.lower()) if w not in _STOP)[:40].strip()


def _quantity_after(low: str, pos: int, span: int = 30) -> re.Match | None:
    """A number (not a date) shortly after `pos`."""
    return next((m for m in QUANTITY_RE.finditer(low, pos, min(len(low), pos + span))
                 if not _DATE_LOW.match(low, m.start())), None)


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
    words = _ASCII_WORDS.findall(low)
    if not _may_bind(low, words):
        return None
    must = _MUST.search(low)
    lead = must.start() if must else len(low)
    maybe_dated = (_DIGIT.search(low) or not low.isascii()
                   or not _DATE_WORDS.isdisjoint(words))
    dates = list(_DATE_LOW.finditer(low)) if maybe_dated else []
    limit = next((m for m in _MAX.finditer(low) if _quantity_after(low, m.end())), None)
    data = _DATA.search(low)
    for match in _CUTOFF.finditer(low) if dates else ():
        if _date_near(dates, match):
            start = min(lead, match.start())
            if (data and data.end() <= match.end()
                    and match.group(0) not in ("before", "之前", "以前")):
                return "range", "range:" + (_subject(low[:start]) or "data")
            if not (limit and limit.start() < match.start()):  # a limit comes first
                return "deadline", "deadline:" + (_subject(_DATE_LOW.sub(" ", low[:start])) or "task")
    for kind, found in (("max", [limit] if limit else []), ("min", _MIN.finditer(low))):
        for match in found:
            if quantity := _quantity_after(low, match.end()):
                unit = quantity.group("unit") or ""
                pattern = _MAX if kind == "max" else _MIN
                subject = (_subject(low[:min(lead, match.start())]) or _canon(
                    "" if unit in _STOP else unit) or _residue(low, pattern, QUANTITY_RE))
                return kind, f"{kind}:{subject}"
    suffix = _SUFFIX_LIMIT.search(low)
    if suffix and not _DATE_LOW.match(low, suffix.start()):
        kind = "min" if suffix.group(1) == "以上" else "max"
        return kind, f"{kind}:{_subject(low[:min(lead, suffix.start())])}"
    category = next((name for name, rx in _FORMATS.items() if rx.search(low)), None)
    if category and _DEMAND.search(low):
        return "format", f"format:{category}:{_residue(low, *_FORMATS.values(), _DEMAND, _MUST)}"
    if must:
        action = _residue(low[must.end():], _NEGATION)
        return "must", "must:" + (action or _residue(low[:must.start()]))
    rule = _RULE_HEAD.search(low.strip()) or _RULE_ANY.search(low)
    if rule:
        rest = low.strip() if rule.re is _RULE_HEAD else low
        action = _residue(rest[rule.end():], _NEGATION, _USE)
        return "rule", "rule:" + (action or _residue(rest[:rule.start()]))
    return None

_NEGATION = re.compile(r"\bnot\b|\bbe\b|不")
_USE = re.compile(r"\buse\b")


def supersedes(text: str) -> bool:
    """True when a statement says it replaces an earlier one ("instead", "from now on",
    "change X to Y", 改为 …): only then does it deactivate a constraint on the same thing."""
    return _SUPERSEDE.search(text) is not None


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
