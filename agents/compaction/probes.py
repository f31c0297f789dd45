"""Probe questions after a compaction (feature E3 with a real model, issue 11 item 5).

The audit checks that constraints and figures are *written* in the new context; a probe
checks that a model can *answer* from it. After a compaction the model is asked short
questions whose answers are in the archive, against the new context only (the request
the agent would send next, without tools), and each answer is graded against the
archive:

- constraint  one per binding statement the person made and still holds, as the source
              audit read it from the archived messages (agents.compaction.source_audit), not the anchor book;
- figure      the labelled figures of the latest tool results that just left the context,
              read back from the archive by ref;
- task        each task still open in the store's task list.

An answer recovers a constraint when it has all its numbers and at least half of its
words; a figure when it has the number; a task when it has half of its subject's words.
The recovery rate (recovered ÷ asked) is reported per compaction. One extra call per
compaction: a profile setting (`probe_questions`), on for the local profile only.
"""
from __future__ import annotations

import html
import re
from dataclasses import asdict, dataclass
from typing import Any, Callable

from agents.compaction.fresh_requests import probe_request
from agents.compaction.numbers import numbers_in
from agents.protocol import PROBE_MARKER
from agents.provider.client import ModelError

MAX_CONSTRAINTS, MAX_FIGURES = 4, 3
ANSWER_TOKENS = 256
LABEL_CHARS = 60
_WORD = re.compile(r"[^\W\d_]{3,}|[\u4e00-\u9fff]{2}", re.U)
_STOP = set("the and for with that this from have will must never only always least most "
            "more less than not are was were been into each your you what which about "
            "should shall any all".split())
_NUMBERED = re.compile(r"^\s*(?:Q\s*)?(\d{1,2})\s*[.):\-]\s*(.*)$", re.I)


@dataclass
class Probe:
    kind: str  # constraint | figure | task
    question: str
    expected: str  # as the archive (or the task list) holds it
    source: str = ""  # the archive ref the expectation was read from, when there is one
    answer: str = ""
    recovered: bool = False


def _words(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text or "") if w.casefold() not in _STOP}


def _cue(text: str, n: int = 3) -> str:
    """A few of the statement's words, longest first: enough to point, not to answer."""
    words = sorted(_words(text), key=lambda w: (-len(w), w))[:n]
    return ", ".join(sorted(words))


def figure_lines(text: str) -> list[tuple[str, str]]:
    """(label, figure) of each line of `text` with a key figure (three digits or more:
    "9 columns" is not one) and words around it; the label is the line without it."""
    out = []
    for line in (text or "").splitlines():
        found = [n for n in numbers_in(line) if sum(ch.isdigit() for ch in n[1]) >= 3
                 and not re.search(re.escape(n[0]) + r"[A-Za-z_]", line)]  # not an id "58b6"
        if not found or not _words(line):
            continue
        written = found[-1][0]  # the last one: in "North,2024-03,1204.50" the value
        cut = line.rfind(written)
        # The words just before the figure name it ("North revenue 1204.50"); a line
        # that starts with the figure is named by what follows it.
        before = " ".join(line[:cut].replace(",", " ").split())[-LABEL_CHARS:]
        after = " ".join(line[cut + len(written):].replace(",", " ").split())[:LABEL_CHARS]
        label = (before if _words(before) else after).strip(" :;-=")
        if " " in label and len(label) == LABEL_CHARS:  # no word cut in half at the start
            label = label.split(" ", 1)[1]
        if _words(label):
            out.append((label, written))
    return out


def build_probes(*, statements: list[str], compacted_texts: list[tuple[str, str]],
                 open_tasks: list[str]) -> list[Probe]:
    """The questions for one compaction. `compacted_texts`: (ref, archived raw text) of
    the tool results that left the context, oldest first."""
    probes = [Probe("constraint", f'What rule did the person set that mentions: {_cue(s)}? '
                                  'Quote it.', s) for s in statements[-MAX_CONSTRAINTS:]]
    figures: list[Probe] = []
    for ref, text in reversed(compacted_texts):  # the latest results first
        lines = figure_lines(text)
        if lines and all(p.question != f'What figure was found for "{lines[0][0]}"?'
                         for p in figures):  # the same listing twice is one question
            label, figure = lines[0]
            figures.append(Probe("figure", f'What figure was found for "{label}"?', figure, ref))
        if len(figures) == MAX_FIGURES:
            break
    probes += figures[::-1]
    probes += [Probe("task", f'Is the task "{_cue(t, 2)}" still open? Give its full name.', t)
               for t in open_tasks[:MAX_CONSTRAINTS]]
    return probes


def probe_message(probes: list[Probe]) -> dict[str, Any]:
    lines = [PROBE_MARKER,
             "Answer from the text above only. One numbered line per question, "
             "in order; write \"unknown\" when the conversation does not say."]
    lines += [f"{i}. {p.question}" for i, p in enumerate(probes, start=1)]
    return {"role": "user", "content": "\n".join(lines)}


def answers_by_number(text: str, count: int) -> list[str]:
    """The answer line of each question; unnumbered answers are read one per line."""
    numbered: dict[int, str] = {}
    plain: list[str] = []
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        match = _NUMBERED.match(line)
        if match and 1 <= int(match.group(1)) <= count:
            numbered.setdefault(int(match.group(1)), match.group(2).strip())
        else:
            plain.append(line.strip())
    if numbered:
        return [numbered.get(i, "") for i in range(1, count + 1)]
    return (plain + [""] * count)[:count]


def _values(text: str) -> set[str]:
    return {v for _, raw, scaled in numbers_in(text) for v in (raw, scaled)}


def _stems(words: set[str]) -> set[str]:
    return {re.sub(r"(?:ing|ed|es|s)$", "", w) if len(w) > 4 else w for w in words}


def recovered(probe: Probe, answer: str) -> bool:
    if not answer or answer.strip().casefold() in ("unknown", "unknown."):
        return False
    # Words the question gave away do not count: SmolLM2 answered "What rule … mentions:
    # delete, file, write?" with "The person set that mentions: delete, file, write".
    given, answer_words = _words(probe.question), _words(answer)
    expected_words = _words(probe.expected)
    # compared by stem: "The person set that mentioned: …" echoes "… mentions: …" too
    stems_given, stems_answer = _stems(given), _stems(answer_words)
    if (stems_answer <= stems_given and stems_answer & (stems_given - _stems(expected_words))
            and not _values(answer) - _values(probe.question)):
        return False  # the question's own wording echoed, nothing of the answer's own
    if probe.kind == "figure":
        return bool(_values(probe.expected) & _values(answer))
    beyond = expected_words - given
    shared = len(beyond & answer_words) if beyond else len(expected_words & answer_words)
    if shared * 2 < len(beyond or expected_words) or not shared:
        return False
    # A constraint's limits must come back exactly: "under 120 words" is not "under 200".
    return probe.kind != "constraint" or _values(probe.expected) <= _values(answer)


def grade(probes: list[Probe], answer_text: str) -> dict[str, Any]:
    # llama-cpp-python's template HTML-escapes what the model writes (&#39; for ').
    answers = answers_by_number(html.unescape(answer_text or ""), len(probes))
    for probe, answer in zip(probes, answers):
        probe.answer = answer[:300]
        probe.recovered = recovered(probe, answer)
    hits = sum(p.recovered for p in probes)
    by_kind: dict[str, list[int]] = {}
    for probe in probes:
        pair = by_kind.setdefault(probe.kind, [0, 0])
        pair[0] += probe.recovered
        pair[1] += 1
    return {"asked": len(probes), "recovered": hits,
            "rate": round(hits / len(probes), 3) if probes else None,
            "by_kind": {k: {"recovered": r, "asked": a} for k, (r, a) in by_kind.items()},
            "probes": [asdict(p) for p in probes]}


def ask_probes(outcome: Any, *, ctx: Any, audit: Any, read_ref: Callable[[str], str | None],
               tasks: Callable[[], list[Any]], ask: Callable[..., Any],
               fresh: bool) -> dict[str, Any] | None:
    """Ask the probe questions against the new context; graded against the archive.

    `audit` gives the person's statements as the archive holds them, `read_ref` and
    `tasks` read the archive and the task list, `ask(messages, tokens, limit, max_tokens)`
    makes the call; `fresh` sends a weak model a tool-free request of its own."""
    audit.read_archive()  # the person's statements, as the archive holds them
    results = [m for m in outcome.compacted if m.role == "tool" and m.ref]
    texts = [(m.ref, read_ref(m.ref) or "") for m in results]
    open_tasks = [t.subject for t in tasks() if t.state != "completed"]
    probes = build_probes(statements=list(audit.statements), compacted_texts=texts,
                          open_tasks=open_tasks)
    if not probes:
        return None
    request = ctx.build([])
    question = probe_message(probes)
    if fresh:  # no agent turns for a weak model to continue
        messages = probe_request(request.messages, question)
        tokens = ctx.counter.request(messages)
    else:
        messages = [*request.messages, question]
        tokens = request.total + ctx.counter.message(question)
    limit = ctx.budget().input_limit
    if tokens > limit:
        return {"error": f"no room for the probe questions ({tokens} > {limit} tokens)",
                "asked": len(probes), "recovered": 0, "rate": None}
    try:
        reply = ask(messages, tokens, limit, ANSWER_TOKENS)
    except ModelError as exc:
        return {"error": f"the probe call failed: {exc}", "asked": len(probes),
                "recovered": 0, "rate": None}
    return grade(probes, reply.content)
