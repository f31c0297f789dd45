"""The vocabulary of anchor extraction (agents.words.anchors): dates, quantities, comparators,
prohibitions and obligations, format demands and filler words, in English and Chinese.

Kept apart from the extraction code so that each reads on its own; every pattern here is
compiled once at import. Patterns meant for lower-cased text are compiled without re.I,
which makes them about twice as fast.
"""
from __future__ import annotations

import re

CJK = r"\u4e00-\u9fff"
MONTHS = (r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
          r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?")
DATE_RE = re.compile(
    r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{4}年\d{1,2}月(?:\d{1,2}[日号])?|\d{1,2}月\d{1,2}[日号]"
    rf"|\b(?:{MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s+\d{{4}})?"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{MONTHS})\b(?:\s+\d{{4}})?"
    r"|\b(?:the\s+)?end\s+of\s+(?:the\s+)?(?:(?:last|this|next|previous|current)\s+)?"
    r"(?:day|week|month|quarter|year)\b|\b(?:month|quarter|year)[- ]end\b"
    r"|\b(?:next\s+|this\s+)?(?:mon|tues|wednes|thurs|fri|satur|sun)day\b"
    r"|\b(?:today|tonight|tomorrow|eod|midnight)\b"
    r"|(?:上个?|本|这个?|下个?)?(?:月|季度|年)(?:底|末)|(?:上|本|下|这)?(?:周|星期)[一二三四五六日天]"
    r"|今天|明天|后天|今晚", re.I)
# The patterns below run on lower-cased text only: without re.I they are about twice as fast.
DATE_LOW = re.compile(DATE_RE.pattern)
NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
# A number standing on its own ("room 3", "¥200万", "50k"), not part of a name like "Q2".
QUANTITY_RE = re.compile(
    rf"(?<![A-Za-z_\d.])[¥$€£]?(?P<num>{NUM})(?:\s*(?:%|％|万|亿|千)|[kKM]\b)?"
    r"(?:\s*(?P<unit>[a-z]+|页|分钟|小时|天|周|个月|字|行|条|元|块))?")

MUST = re.compile(r"\bmust(?:\s+not|n['’]t)?\b|\b(?:is|are)\s+required\s+to\b|\bmandatory\b"
                  r"|必须|一定要|务必|不得|禁止")
# Prohibitions and obligations without "must" (tier 1): "Do not delete any files.", "Never
# email the customer.", "Only use data up to …", "Always answer in German.", 不要/只能/始终…
# English imperatives count at the head of a clause ("I only need a summary" states no
# rule); modal forms and the Chinese markers count anywhere.
RULE_HEAD = re.compile(r"^(?:(?:please|kindly|and|but|also|so|then|you|remember\s+to|note:)\s+)*"
                       r"(?:do\s+not|don['’]t|never|always|only|avoid|refrain\s+from|make\s+sure"
                       r"|be\s+sure\s+to|ensure)\b")
RULE_ANY = re.compile(r"\b(?:may\s+not|shall\s+not|should\s+not|shouldn['’]t|(?:must|should|will)"
                      r"\s+(?:never|always|only)|under\s+no\s+circumstances|at\s+all\s+times)\b"
                      r"|不要|不准|不许|不可以|不能|切勿|千万别|请勿|请别|别再|只能|只用|只使用|只允许"
                      r"|仅限|仅使用|始终|一律|永远不|绝不|绝对不")
# A person replacing an earlier constraint says so; without these words both stay (issue 13).
SUPERSEDE = re.compile(r"\binstead\b|\bfrom\s+now\s+on\b|\bno\s+longer\b(?!\s+than)|\banymore\b"
                       r"|\bchange[sd]?\b[^.;]{0,80}?\bto\b|\brather\s+than\b|\breplac(?:e|es|ed|ing)\b"
                       r"|\bupdate[sd]?\b[^.;]{0,80}?\bto\b|\bchange\s+of\s+plan\b"
                       r"|改为|改成|换成|改用|不再|取而代之|代替|替换|更改为|调整为|调整到|从现在起|从现在开始", re.I)
REPLACING = re.compile(r"\binstead\b|\bfrom\s+now\s+on\b|改为|改成|换成|改用|更改为|调整为|调整到"
                       r"|从现在起|从现在开始|不再")
MAX = re.compile(r"\bat\s+most\b|\bno\s+more\s+than\b|\bnot\s+more\s+than\b|\bup\s+to\b"
                 r"|\bnot\s+exceed\b|\bno\s+(?:longer|larger|higher|greater)\s+than\b"
                 r"|\b(?:less|fewer)\s+than\b|\bunder\b|\bbelow\b|\bwithin\b"
                 r"|\bmax(?:imum)?(?:\s+of)?\b|\bcap(?:ped)?\s+at\b|\blimit(?:ed)?\s+to\b"
                 r"|≤|<=|不超过|不超出|不多于|不高于|至多|最多|上限")
MIN = re.compile(r"\bat\s+least\b|\bno\s+(?:less|fewer)\s+than\b|\bnot\s+less\s+than\b"
                 r"|\bmin(?:imum)?(?:\s+of)?\b|≥|>=|至少|不少于|不低于|最少|下限")
SUFFIX_LIMIT = re.compile(rf"(?:{NUM})\s*\S{{0,3}}?(以内|之内|以下|以上)")
CUTOFF = re.compile(r"\bdeadline\b|\bdue\b|\bno\s+later\s+than\b|\bby\b|\bbefore\b|\buntil\b"
                    r"|\btill\b|\bthrough\b|\bup\s+to\b|\bas\s+of\b|截止|截至|到期|之前|以前")
DATA = re.compile(r"\bdata(?:set)?\b|\brecords\b|\bfigures\b|数据|统计")
FORMATS = {name: re.compile(rx) for name, rx in (
    ("table", r"\btables?\b|\btabular\b|表格"), ("json", r"\bjson\b"), ("markdown", r"\bmarkdown\b"),
    ("list", r"\bbullet(?:ed)?\s+(?:list|points?)\b|\bbullets\b|\bnumbered\s+list\b|列表|分点|要点"),
    ("language", r"\benglish\b|\bchinese\b|中文|英文|汉语"))}
# One pass finds the first category in the order above, as a loop over FORMATS would.
FORMAT_ANY = re.compile("|".join(f"(?P<{name}>{rx.pattern})" for name, rx in FORMATS.items()))
FORMATS_BEFORE = {name: re.compile("|".join(f"(?P<{n}>{rx.pattern})" for n, rx in
                                            list(FORMATS.items())[:i])) if i else None
                  for i, name in enumerate(FORMATS)}
DEMAND = re.compile(r"\b(?:must|should|please|need|needs|want|output|format|formatted|include"
                    r"|includes|contain|contains|use|answer|reply|respond|write|present|give"
                    r"|return|deliver|produce|provide|show|render|send)\b|(?:as|in)\s+(?:a\s+)?"
                    r"(?:table|json|markdown|bullet)|请|必须|一定要|务必|需要|要|用|以|输出|格式"
                    r"|使用|包含|包括|回答|回复|写|给出|提供|做成|整理成|生成|呈现|列出")
STOP = set("a an the this that these those it its is are was were be been being will would shall "
           "should can could may might must not no and or of to for in on at by with from as our "
           "my your their his her we you i they he she me us them keep please now then also total "
           "overall whole entire change plan constraint constraints hard new old final just only "
           "still so than more less have has had do does use spend write make give return "
           "produce deliver submit finish send take stay remain limit cap".split())
STOP_WORDS = frozenset(STOP)
CJK_FILLERS = re.compile(r"^(?:另外|此外|还有|同时|并且|而且|注意|要求|请|把|将|我们的|我们|我的|你的|总|整体)+"
                         r"|(?:必须|一定要|务必|需要|应该|应|要|控制在|保持在|限制在|控制|在|是|为|得|的|都|也)+$")
CANON = {"预算": "budget", "数据": "data", "篇幅": "length", "字数": "words", "页数": "pages",
         "报告": "report", "成本": "cost", "页": "page", "截止日期": "deadline"}
WORDS_RE = re.compile(rf"[a-z0-9][a-z0-9'_-]*|[{CJK}]+", re.I)
TRIGGER_WORDS = frozenset("""must mustn required mandatory not don never always only avoid
    refrain sure ensure shouldn times circumstances most more than up exceed under below within
    max maximum cap capped limit limited least less fewer min minimum deadline due later by
    before until till through as table tables tabular json markdown bullet bullets bulleted
    numbered english chinese""".split())
ASCII_WORDS = re.compile(r"[a-z]+")
OTHER_TRIGGER = re.compile("|".join(
    w for p in (MUST, RULE_ANY, MAX, MIN, CUTOFF, *FORMATS.values())
    for w in p.pattern.split("|") if w and not re.search(r"[a-z\\]", w))
    + r"|以内|之内|以下|以上|<=|>=")

# Every date DATE_RE finds has a digit, one of these words or one of the Chinese characters
# below (月底, 下周一, 星期五, 今天, 明天, 后天 …): a clause with none of them needs no date scan.
DATE_WORDS = frozenset("""jan january feb february mar march apr april may jun june jul july
    aug august sep sept september oct october nov november dec december monday tuesday
    wednesday thursday friday saturday sunday today tonight tomorrow eod midnight end""".split())
CJK_DATE_HINT = re.compile("[底末周期今明后]")

# Words that say nothing about what a rule is about ("do not use X" is about X).
NEGATION = re.compile(r"\bnot\b|\bbe\b|不")
NEGATION_OR_USE = re.compile(r"\bnot\b|\bbe\b|不|\buse\b")
# What a format demand is made of (its category, the demand and "must" words): the rest of
# the clause names what the format applies to.
FORMAT_WORDS = re.compile("|".join(p.pattern for p in (*FORMATS.values(), DEMAND, MUST)))
