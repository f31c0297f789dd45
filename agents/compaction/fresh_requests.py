"""Summary and probe requests for weak models: fresh, tool-free, the material in one message.

The cache-stable summary request (agents.compaction.compactor) repeats the agent's prefix — its
assistant turns that are tool calls, its tools — and ends with an instruction. A large model
follows the instruction; SmolLM2-135M continued the pattern and wrote one more tool call
(`functions.list_files:\n{ }`) as its "summary", every time. For profiles with
`tool_free_summaries` the request is built here instead: a short system prompt, and one
user message holding the material as labelled plain text (no assistant turns to imitate)
followed by what to write. The answer format is headed plain text, which a small model
writes more reliably than a seven-key JSON object; agents.compaction.summary reads either.
"""
from __future__ import annotations

from typing import Any

SUMMARIZER_PROMPT = (
    "You write short notes on an agent's work so far, for the agent to continue from. Use "
    "only facts from the material; copy numbers and file names exactly. Write plain text "
    "under these four headings, each followed by short lines that start with \"- \":\n"
    "Goal and constraints:\nDone so far:\nKey data:\nNext steps:")
SUMMARY_TAIL = ("Write the notes now: the four headings, each with its \"- \" lines. Put "
                "every rule above under \"Goal and constraints\", word for word.")
ANSWER_PROMPT = ("You finish an agent's task. The material holds what the agent did and the "
                 "results its tools returned. Answer the task from those results only, in "
                 "plain words; do not call any function.")
ANSWER_FRAME = "What the tools returned:\nQuestion:\nAnswer:"
# The person's later messages on the answer turn: a constraint added mid-task ("use data
# up to 2026-10-31 only") binds the answer as much as the goal does.
ANSWER_PERSON = "What the person wrote after the task (where two differ, the later one wins):"
PROBE_PROMPT = ("You answer questions about an agent's task from the notes given. Answer "
                "from the notes only, briefly.")
_MATERIAL = "Material (the earlier part of the task; archive labels in brackets):"
_PREVIOUS = "Notes written earlier (keep what still holds):"
_RULES = "Rules the person set (hard constraints):"
_FOCUS = "Focus asked for by the person running the task:"
_NOTES = "Notes (the agent's current context):"


def _line_of(message: dict[str, Any]) -> str:
    """One message as labelled text: who said it, then what (a tool call as name and args)."""
    role = message.get("role", "")
    content = str(message.get("content") or "")
    label, _, body = content.partition("\n") if content.startswith("[archive turn") else (
        "", "", content)
    who = {"user": "person", "tool": "tool result", "system": "note"}.get(role, role)
    if role == "user" and body.startswith("[result of tool call"):
        who = "tool result"
    parts = [f"{label} {who}:".strip()]
    if body.strip():
        parts.append(body.strip())
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        parts.append(f"(called {function.get('name', '?')} with "
                     f"{function.get('arguments') or '{}'})")
    return "\n".join(parts)


def summary_request(chunk: list[dict[str, Any]], *, previous: str, constraints: list[str],
                    instructions: str) -> list[dict[str, Any]]:
    """The fresh summary request for `chunk` (messages already labelled by the compactor)."""
    lines: list[str] = []
    if constraints:
        lines += [_RULES, *(f"- {c}" for c in constraints), ""]
    if previous:
        lines += [_PREVIOUS, previous, ""]
    if instructions:
        lines += [f"{_FOCUS} {instructions}", ""]
    lines += [_MATERIAL, *("\n" + _line_of(m) for m in chunk), "", SUMMARY_TAIL]
    return [{"role": "system", "content": SUMMARIZER_PROMPT},
            {"role": "user", "content": "\n".join(lines)}]


def probe_request(context: list[dict[str, Any]], question: dict[str, Any]) -> list[dict[str, Any]]:
    """The probe questions against `context` (the agent's new request) as plain text in one
    user message; the agent's system prompt (its persona, no facts) is left out."""
    notes = [_line_of(m) for m in context if m.get("role") != "system" or m is not context[0]]
    return [{"role": "system", "content": PROBE_PROMPT},
            {"role": "user", "content": "\n\n".join([_NOTES, *notes, question["content"]])}]


def answer_text(content: str) -> str:
    """The answer in a reply to `answer_request`: without an "Answer:" label of its own and
    cut where the model starts writing the request's frame again (SmolLM2 followed its
    answer with "Question: <the goal again>")."""
    text = content.strip()
    if text.startswith("Answer:"):
        text = text[len("Answer:"):].lstrip()
    for label in ("\nQuestion:", "\nAnswer:", "\nWhat the tools returned:"):
        text = text.split(label, 1)[0]
    return text.strip() or content


def answer_request(context: list[dict[str, Any]], goal: str,
                   person: list[str] | tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The final answer asked for without tools: the summary and the tool results of
    `context` (each distinct result once), the person's messages after the goal (`person`,
    all of them, verbatim: every agent request carries them), then the task as a question.
    No transcript: a small model given one continued it (SmolLM2 wrote "(called list_files
    …) assistant: …" as its answer)."""
    notes: list[str] = []
    for m in context:
        content = str(m.get("content") or "")
        result = m.get("role") == "tool" or content.startswith("[result of tool call")
        if (result or "<system-info>" in content) and content.strip() not in notes:
            notes.append(content.strip())
    said = ["\n".join([ANSWER_PERSON, *(f"- {text.strip()}" for text in person)])] \
        if person else []
    return [{"role": "system", "content": ANSWER_PROMPT},
            {"role": "user", "content": "\n\n".join(
                [ANSWER_FRAME.splitlines()[0], *notes, *said, f"Question: {goal}", "Answer:"])}]
