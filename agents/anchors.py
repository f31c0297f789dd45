"""Anchors (SPEC C8): rule-based extraction of what must stay in context, English and Chinese.

Tier 1 hard constraints come from user messages and are never dropped; tier 2 conclusions
come from tool results and are replaced by a newer value for the same thing; tier 3 details
(a number that constrains nothing) roll off with the window. A conflict key ties a statement
to the one it changes ("budget at most 80k" and "… 50k" share "max:budget"). Keys are narrow
on purpose: wrongly replacing a hard constraint loses it; a missed conflict keeps a line.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from agents.store import AnchorRecord

MAX_ANCHOR_CHARS = 200
CONCLUSIONS_PER_RESULT = 3
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
_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
# A number standing on its own ("room 3", "¥200万", "50k"), not part of a name like "Q2".
QUANTITY_RE = re.compile(
    rf"(?<![A-Za-z_\d.])[¥$€£]?(?P<num>{_NUM})(?:\s*(?:%|％|万|亿|千)|[kKM]\b)?"
    r"(?:\s*(?P<unit>[a-z]+|页|分钟|小时|天|周|个月|字|行|条|元|块))?")

_MUST = re.compile(r"\bmust(?:\s+not|n't)?\b|\b(?:is|are)\s+required\s+to\b|\bmandatory\b"
                   r"|必须|一定要|务必|不得|禁止", re.I)
_MAX = re.compile(r"\bat\s+most\b|\bno\s+more\s+than\b|\bnot\s+more\s+than\b|\bup\s+to\b"
                  r"|\bnot\s+exceed\b|\bno\s+(?:longer|larger|higher|greater)\s+than\b"
                  r"|\b(?:less|fewer)\s+than\b|\bunder\b|\bbelow\b|\bwithin\b"
                  r"|\bmax(?:imum)?(?:\s+of)?\b|\bcap(?:ped)?\s+at\b|\blimit(?:ed)?\s+to\b"
                  r"|≤|<=|不超过|不超出|不多于|不高于|至多|最多|上限", re.I)
_MIN = re.compile(r"\bat\s+least\b|\bno\s+(?:less|fewer)\s+than\b|\bnot\s+less\s+than\b"
                  r"|\bmin(?:imum)?(?:\s+of)?\b|≥|>=|至少|不少于|不低于|最少|下限", re.I)
_SUFFIX_LIMIT = re.compile(rf"(?:{_NUM})\s*\S{{0,3}}?(以内|之内|以下|以上)")
_CUTOFF = re.compile(r"\bdeadline\b|\bdue\b|\bno\s+later\s+than\b|\bby\b|\bbefore\b|\buntil\b"
                     r"|\btill\b|\bthrough\b|\bup\s+to\b|\bas\s+of\b|截止|截至|到期|之前|以前", re.I)
_DATA = re.compile(r"\bdata(?:set)?\b|\brecords\b|\bfigures\b|数据|统计", re.I)
_FORMATS = {name: re.compile(rx, re.I) for name, rx in (
    ("table", r"\btables?\b|\btabular\b|表格"), ("json", r"\bjson\b"), ("markdown", r"\bmarkdown\b"),
    ("list", r"\bbullet(?:ed)?\s+(?:list|points?)\b|\bbullets\b|\bnumbered\s+list\b|列表|分点|要点"),
    ("language", r"\benglish\b|\bchinese\b|中文|英文|汉语"))}
_DEMAND = re.compile(r"\b(?:must|should|please|need|needs|want|output|format|formatted|include"
                     r"|includes|contain|contains|use|answer|reply|respond|write|present|give"
                     r"|return|deliver|produce|provide|show|render|send)\b|(?:as|in)\s+(?:a\s+)?"
                     r"(?:table|json|markdown|bullet)|请|必须|一定要|务必|需要|要|用|以|输出|格式"
                     r"|使用|包含|包括|回答|回复|写|给出|提供|做成|整理成|生成|呈现|列出", re.I)
_STOP = set("a an the this that these those it its is are was were be been being will would shall "
            "should can could may might must not no and or of to for in on at by with from as our "
            "my your their his her we you i they he she me us them keep please now then also total "
            "overall whole entire change plan constraint constraints hard new old final just only "
            "still so than more less have has had do does use spend write make give return "
            "produce deliver submit finish send take stay remain limit cap".split())
_CJK_FILLERS = re.compile(r"^(?:另外|此外|还有|同时|并且|而且|注意|要求|请|把|将|我们的|我们|我的|你的|总|整体)+"
                          r"|(?:必须|一定要|务必|需要|应该|应|要|控制在|保持在|限制在|控制|在|是|为|得|的|都|也)+$")
_CANON = {"预算": "budget", "数据": "data", "篇幅": "length", "字数": "words", "页数": "pages",
          "报告": "report", "成本": "cost", "页": "page", "截止日期": "deadline"}
_WORDS = re.compile(rf"[a-z0-9][a-z0-9'_-]*|[{_CJK}]+", re.I)
_SENTENCES = re.compile(r"[\n\r]+|(?<=[。！？；!?;])|(?<=\.)(?=\s|$)")
_CLAUSES = re.compile(r"(,\s+|，)")
_LIST_MARK = re.compile(r"^\s*(?:[-*•]|\d+[.)、])\s+")


@dataclass
class AnchorChange:
    """One difference; `old` is the existing record itself, the caller deactivates it."""

    action: str  # "added" | "changed" | "removed"
    old: AnchorRecord | None
    new: AnchorRecord | None


def clip_text(text: str, limit: int = MAX_ANCHOR_CHARS) -> str:
    """Trim to `limit` characters without cutting a number in half (a cut "1,23" lies)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = next((m.start() for m in re.finditer(r"\d[\d.,]*\d|\d", text)
                if m.start() < limit - 1 < m.end()), limit - 1)
    return text[:cut].rstrip() + "…"


def _clauses(text: str) -> list[str]:
    """Sentences, each split further at commas when it holds more than one constraint."""
    out: list[str] = []
    for sentence in _SENTENCES.split(text):
        pieces = _CLAUSES.split(_LIST_MARK.sub("", sentence).strip().rstrip(".。;；!！?？ "))
        groups: list[list[str]] = []  # a clause without a constraint joins its neighbour
        for part, sep in zip(pieces[::2], pieces[1::2] + [""]):
            binds = _classify(part) is not None
            if groups and (not binds or not groups[-1][0]):
                groups[-1] = [groups[-1][0] or binds, groups[-1][1] + part + sep]
            else:
                groups.append([binds, part + sep])
        out.extend(g[1].strip().rstrip(",， ") for g in groups)
    return [c for c in out if len(re.findall(rf"[A-Za-z{_CJK}]", c)) >= 3]


def _canon(word: str) -> str:
    word = _CANON.get(word, word)
    plural = len(word) > 3 and word.endswith("s") and not word.endswith("ss") and word.isascii()
    return word[:-1] if plural else word


def _subject(prefix: str) -> str:
    """The thing a constraint is about: the last content word before its comparator."""
    for token in reversed(_WORDS.findall(prefix.lower())):
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
    return " ".join(_canon(w) for w in _WORDS.findall(text.lower()) if w not in _STOP)[:40].strip()


def _quantity_after(low: str, pos: int, span: int = 30) -> re.Match | None:
    """A number (not a date) shortly after `pos`."""
    return next((m for m in QUANTITY_RE.finditer(low, pos, min(len(low), pos + span))
                 if not DATE_RE.match(low, m.start())), None)


def _date_near(low: str, match: re.Match) -> bool:
    word = match.group(0)
    if word in ("之前", "以前"):
        return any(d.end() >= match.start() - 2 for d in DATE_RE.finditer(low, 0, match.start()))
    if word in ("deadline", "截止", "截至", "到期"):
        return DATE_RE.search(low) is not None
    return DATE_RE.search(low, match.end(), match.end() + 40) is not None


def _classify(clause: str) -> tuple[str, str] | None:
    """(kind, key) of a hard constraint: range, deadline, max, min, format or must."""
    low = clause.lower()
    must = _MUST.search(low)
    lead = must.start() if must else len(low)
    for match in _CUTOFF.finditer(low):
        if _date_near(low, match):
            start = min(lead, match.start())
            if _DATA.search(low, 0, match.end()) and match.group(0) not in ("before", "之前", "以前"):
                return "range", "range:" + (_subject(low[:start]) or "data")
            limit_first = any(m.start() < match.start() and _quantity_after(low, m.end())
                              for m in _MAX.finditer(low))
            if not limit_first:
                return "deadline", "deadline:" + (_subject(DATE_RE.sub(" ", low[:start])) or "task")
    for kind, pattern in (("max", _MAX), ("min", _MIN)):
        for match in pattern.finditer(low):
            if quantity := _quantity_after(low, match.end()):
                unit = quantity.group("unit") or ""
                subject = (_subject(low[:min(lead, match.start())]) or _canon(
                    "" if unit in _STOP else unit) or _residue(low, pattern, QUANTITY_RE))
                return kind, f"{kind}:{subject}"
    suffix = _SUFFIX_LIMIT.search(low)
    if suffix and not DATE_RE.match(low, suffix.start()):
        kind = "min" if suffix.group(1) == "以上" else "max"
        return kind, f"{kind}:{_subject(low[:min(lead, suffix.start())])}"
    category = next((name for name, rx in _FORMATS.items() if rx.search(low)), None)
    if category and _DEMAND.search(low):
        return "format", f"format:{category}:{_residue(low, *_FORMATS.values(), _DEMAND, _MUST)}"
    if must:
        action = _residue(low[must.end():], re.compile(r"\bnot\b|\bbe\b|不"))
        return "must", "must:" + (action or _residue(low[:must.start()]))
    return None


def extract_anchors(text: str, *, source: str = "user", turn: int = 0) -> list[AnchorRecord]:
    """Tier-1 constraints and tier-3 details stated in a user message, in order."""
    out: list[AnchorRecord] = []
    for clause in _clauses(text or ""):
        if found := _classify(clause):
            tier, key = 1, found[1]
        elif QUANTITY_RE.search(clause) or any(  # "today" alone is small talk, not a detail
                re.search(r"\d", d.group(0)) for d in DATE_RE.finditer(clause)):
            tier, key = 3, "detail:" + " ".join(_WORDS.findall(clause.lower()))[:60]
        else:
            continue
        out.append(AnchorRecord(tier=tier, text=clip_text(clause), key=key, source=source,
                                turn=turn))
    return out


# --- tier 2: conclusions in tool results
_CONCLUSION = re.compile(r"^\s*(?:结论|总结|发现|要点|(?:key\s+)?(?:conclusion|finding|result|summary)s?)"
                         r"\s*[:：]\s*", re.I)
_KEY_VALUE = re.compile(r"^\s*[^:：]{1,60}[:：]\s*\S")
# Words that make a line read like a finding. A regex alternation of these costs ~40 µs a
# line; word lookups in sets cost ~3 µs, and this runs on every tool result.
_FINDING_SUBSTRINGS = ("total", "missing", "average", "median", "overall", "count", "declin",
                       "increase", "growth", "change", "share", "ratio", "合计", "总计", "总",
                       "缺失", "平均", "增长", "下降", "上升", "同比", "环比", "占比", "比例")
_FINDING_WHOLE = frozenset({"sum", "mean", "rows", "fell", "rose", "grew", "rate"})
_FINDING_START = ("null", "drop")
_ASCII_WORD = re.compile(r"[a-z]+")


def _has_finding_word(low: str) -> bool:
    """True when the lower-cased line holds a word that findings use."""
    if any(part in low for part in _FINDING_SUBSTRINGS):
        return True
    return any(w in _FINDING_WHOLE or w.startswith(_FINDING_START)
               for w in _ASCII_WORD.findall(low))


_SIGNED = re.compile(r"(?<![\w.])[+\-−]\d")
_ERROR = re.compile(r"^\s*(?:error|exception|traceback|warning)\b|错误|失败", re.I)
_TABLE_ROW = re.compile(r"\|.*\||\d,[^\s\d]*,\S*,")  # markdown table or CSV line: data


def _result_lines(text: str) -> list[str]:
    """Candidate lines of a tool result; a JSON object becomes "key: value" lines."""
    stripped = text.strip()
    try:
        data = json.loads(stripped) if stripped.startswith("{") else None
    except ValueError:
        data = None
    if isinstance(data, dict):
        pairs = [(f"{k}.{sub}" if sub else k, v) for k, val in data.items()
                 for sub, v in (val.items() if isinstance(val, dict) else [("", val)])]
        return [f"{k}: {v}" for k, v in pairs
                if isinstance(v, (str, int, float)) and not isinstance(v, bool)]
    lines = [part for line in stripped.splitlines()
             for part in (_SENTENCES.split(line) if len(line) > 300 else [line])]
    return [_LIST_MARK.sub("", ln).strip() for ln in lines if ln.strip()]


def _finding_score(line: str) -> int:
    """How much a line reads like a finding; below 3 it is not one."""
    quantities = QUANTITY_RE.findall(line)
    score = 5 if _CONCLUSION.match(line) else 0
    if (len(line) > 400 or _ERROR.search(line) or _TABLE_ROW.search(line)
            or len(quantities) >= 6 or not (quantities or score)):
        return 0
    score += 3 * bool(quantities and _KEY_VALUE.match(line))
    score += 2 * ("%" in line or "％" in line) + 2 * _has_finding_word(line.lower())
    return score + bool(_SIGNED.search(line))


def _label(line: str) -> str:
    """What a finding measures: its words without the measured figures. Small bare integers
    stay, as they usually name things ("region 1", "topic 0")."""
    body = _CONCLUSION.sub("", line)
    def keep_ids(m: re.Match) -> str:
        figure = body[m.start():m.start("unit") if m.group("unit") else m.end()].strip()
        signed = m.start() > 0 and body[m.start() - 1] in "+-−"
        bare = re.fullmatch(r"\d{1,2}", figure) and not signed
        return f" {figure if bare else ''} {m.group('unit') or ''} "
    body = QUANTITY_RE.sub(keep_ids, body)
    return " ".join(_WORDS.findall(body.lower()))[:60]


def extract_conclusions(text: str, *, source: str = "tool", turn: int = 0, tool_name: str = "",
                        limit: int = CONCLUSIONS_PER_RESULT) -> list[AnchorRecord]:
    """The most conclusion-like lines of a tool result as tier-2 anchors, in result order."""
    scored = [(score, i, line) for i, line in enumerate(_result_lines(text or ""))
              if (score := _finding_score(line)) >= 3]
    best = sorted(sorted(scored, key=lambda s: (-s[0], s[1]))[:limit], key=lambda s: s[1])
    prefix = f"fact:{tool_name}:" if tool_name else "fact:"
    return [AnchorRecord(tier=2, text=clip_text(line), key=prefix + _label(line),
                         source=source, turn=turn) for _, _, line in best]


# --- keeping the set current
def merge_anchors(existing: list[AnchorRecord],
                  candidates: list[AnchorRecord]) -> list[AnchorChange]:
    """What the candidates add to or change in the active set; nothing is mutated."""
    by_key = {a.key: a for a in existing if a.active and a.key}
    texts = {" ".join(a.text.split()).casefold() for a in existing if a.active}
    last_of_key = {c.key: i for i, c in enumerate(candidates) if c.key}
    changes: list[AnchorChange] = []
    for i, cand in enumerate(candidates):
        if cand.key and last_of_key[cand.key] != i:
            continue  # restated within one message: the last statement wins
        norm = " ".join(cand.text.split()).casefold()
        if norm in texts:
            continue
        old = by_key.get(cand.key) if cand.key else None
        if old is not None and old.tier < cand.tier:
            continue  # a detail or conclusion never downgrades a hard constraint
        changes.append(AnchorChange("added" if old is None else "changed", old, cand))
        by_key[cand.key] = cand
        texts.add(norm)
    return changes


def roll_off(anchors: list[AnchorRecord], current_turn: int,
             keep_turns: int = 5) -> list[AnchorChange]:
    """Tier-3 details stated more than `keep_turns` turns ago leave (caller deactivates)."""
    return [AnchorChange("removed", a, None) for a in anchors
            if a.active and a.tier == 3 and current_turn - a.turn > keep_turns]


def render_anchors(anchors: list[AnchorRecord]) -> str:
    """Active anchors, hard constraints first, one tagged line each."""
    tags = {1: "[T1 constraint]", 2: "[T2 finding]", 3: "[T3 detail]"}
    active = sorted((a for a in anchors if a.active), key=lambda a: (a.tier, a.turn))
    return "\n".join(f"{tags.get(a.tier, f'[T{a.tier}]')} {a.text}" for a in active)
