"""What a session left in the database, and how it differs from an uninterrupted run.

A resumed session legitimately differs in three ways, all left out of the comparison: the
engine's "[resumed]" note (archived, and a USER_MESSAGE event; a summary may list its
ref), one more SESSION_STARTED per resume, and the non-fatal ERROR that reports an
interrupted turn. Archive refs are compared by the place of the row they point at, not by
row id. Everything else must match exactly: turns, every archive row's content in order,
the live events by type and turn in seq order, the tool calls and results, the assistant
messages, and the model calls by turn, kind and finish reason (what was sent differs by
the resume note, so call inputs and token counts are not compared). Events of a turn that
a killed worker never committed are marked discarded and are not compared; they are read
only to detect two executors running at once.

Compactions are compared apart: the resume note's tokens can make the trigger fire a turn
earlier than in the uninterrupted run (the long chaos run showed it), which moves the
compaction's events, its summary call, the source audit of the request after it (AUDIT,
issue 25 item 11) and its handoff row by a turn. Their number and turns are reported; a
handoff row stored twice still counts as a duplicated archive row. The context hint
("Context is now N tokens") is compared apart for the same reason: the resume note stays
in the history until a summary replaces it (clearing old tool results never does), and its
tokens can cross the warning line a turn earlier; their turns are reported.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from agents import (AssistantMessage, ErrorEvent, Event, EventType, HintBlock, ModelCall,
                    SessionStarted, ToolCall, ToolResult, UserMessage)
from taskos.runs.models import ArchivedTurn, Session, SessionEvent
from taskos.store.stored_events import stored_events

RESUME_NOTE = "[resumed]"
ARCHIVE_REF = re.compile(r"arc:(\d+):(\d+)")
RESUME_REF = "arc:resume-note"
COMPARED = ("status", "final_answer", "turns", "archive", "events", "model_calls",
            "tool_calls", "tool_results", "assistant_messages")
# The AUDIT checks the first agent request after a compaction: it moves with it.
COMPACTION_EVENTS = (EventType.COMPACTION_STARTED, EventType.COMPACTION, EventType.AUDIT)


def of_compaction(event: Event) -> bool:
    return event.type in COMPACTION_EVENTS or (
        isinstance(event, ModelCall) and event.kind == "summary")


def context_hint(event: Event) -> bool:
    """The hint that reports the context's size: sent from a token count, which the resume
    note raises."""
    return isinstance(event, HintBlock) and event.kind == "context"


def resume_only(event: Event) -> bool:
    """An event only a resume emits."""
    return ((isinstance(event, SessionStarted) and event.resumed)
            or (isinstance(event, UserMessage) and event.source == "engine"
                and event.text.startswith(RESUME_NOTE))
            or (isinstance(event, ErrorEvent) and event.code == "turn_interrupted"))


class Refs:
    """Archive refs (arc:<session>:<row id>) as the row's place in the session's archive:
    row ids differ from run to run, the place of the row they point at must not. A ref to
    a resume note (a summary may list it) is dropped with its list separator."""

    def __init__(self, session_pk: int, row_ids: list[int], resume_ids: set[int]) -> None:
        self.session_pk = session_pk
        self.place = {row_id: place for place, row_id in enumerate(row_ids)}
        self.resume_ids = resume_ids

    def _one(self, match: re.Match) -> str:
        if int(match[1]) != self.session_pk:
            return "arc:other-session"
        if int(match[2]) in self.resume_ids:
            return RESUME_REF
        return f"arc:#{self.place.get(int(match[2]), 'missing')}"

    def text(self, value: str) -> str:
        value = ARCHIVE_REF.sub(self._one, value)
        if RESUME_REF in value:
            value = re.sub(r'\\?"arc:resume-note\\?"(, |,)?', "", value)
            value = re.sub(r"(, |,)\]", "]", value)
        return value

    def value(self, value: Any) -> Any:
        return json.loads(self.text(json.dumps(value, ensure_ascii=False)))


def fingerprint(session: Session) -> dict[str, Any]:
    """The comparable record of one session (live events only)."""
    rows, resume_ids = [], set()
    for row in ArchivedTurn.objects.filter(session=session).order_by("id").values_list(
            "id", "turn", "role", "tool_name", "content"):
        if row[2] == "user" and row[4].startswith(RESUME_NOTE):
            resume_ids.add(row[0])
        else:
            rows.append(row)
    refs = Refs(session.pk, [row[0] for row in rows], resume_ids)
    archive = [(turn, role, tool, refs.text(content)) for _, turn, role, tool, content in rows]
    handoffs = [row for row in archive if row[1] == "handoff"]
    stored = stored_events(SessionEvent.objects.filter(session=session).order_by("seq")
                           .values_list("seq", "type", "turn", "at", "payload"))
    live = [e.with_payload(refs.value(e.payload)) for e in stored if not resume_only(e)]
    calls = [e for e in live if isinstance(e, ModelCall)]
    return {
        "status": session.status, "final_answer": refs.text(session.final_answer),
        "turns": session.turns, "archive": [row for row in archive if row[1] != "handoff"],
        "handoffs": handoffs,
        "events": [(e.type, e.turn) for e in live
                   if not of_compaction(e) and not context_hint(e)],
        "context_hints": [e.turn for e in live if context_hint(e)],
        "compactions": [e.turn for e in live if e.type == EventType.COMPACTION],
        "model_calls": [(e.turn, e.kind, e.finish_reason) for e in calls if not of_compaction(e)],
        "summary_calls": sum(1 for e in calls if of_compaction(e)),
        "call_numbers": [e.call for e in calls],
        "tool_calls": [(e.turn, e.name, e.args) for e in live if isinstance(e, ToolCall)],
        "tool_results": [(e.turn, e.name, e.error, e.kept_chars, e.truncated)
                         for e in live if isinstance(e, ToolResult)],
        "assistant_messages": [(e.turn, e.content, e.tool_calls)
                               for e in live if isinstance(e, AssistantMessage)]}


def double_executions(session: Session) -> int:
    """Times two executors ran the session at once, read from the full event log.

    One executor emits TURN_STARTED with rising turn numbers; a resumed executor starts
    with SESSION_STARTED and may repeat the turn that was cut. A turn number that repeats
    or goes back without a SESSION_STARTED in between means two executors interleaved.
    """
    overlaps, last_turn, restarted = 0, -1, True
    rows = SessionEvent.all_objects.filter(session=session, type__in=(
        EventType.SESSION_STARTED, EventType.TURN_STARTED)).order_by("seq").values_list(
        "type", "turn")
    for kind, turn in rows:
        if kind == EventType.SESSION_STARTED:
            restarted = True
            continue
        if turn <= last_turn and not restarted:
            overlaps += 1
        last_turn, restarted = turn, False
    return overlaps


def surplus(got: Counter, want: Counter) -> int:
    """How many more of each item `got` has than `want`, summed."""
    return sum(max(0, n - want.get(item, 0)) for item, n in got.items())


def compare(session: Session, baseline: dict[str, Any]) -> dict[str, Any]:
    """Differences between `session` and the uninterrupted `baseline` fingerprint."""
    got = fingerprint(session)
    want_turns = Counter(t for t, kind, _ in baseline["model_calls"] if kind == "agent")
    got_turns = Counter(t for t, kind, _ in got["model_calls"] if kind == "agent")
    want_rows, got_rows = Counter(baseline["archive"]), Counter(got["archive"])
    numbers = got["call_numbers"]
    return {
        "session": session.pk, "status": got["status"], "turns": got["turns"],
        "lost_turns": sorted(t for t in want_turns if got_turns[t] < want_turns[t]),
        "duplicated_turns": sorted(t for t in got_turns if got_turns[t] > want_turns[t]),
        "lost_archive_rows": surplus(want_rows, got_rows),
        "duplicated_archive_rows": surplus(got_rows, want_rows) + surplus(
            Counter(got["handoffs"]), Counter(set(got["handoffs"]))),
        "compactions": (len(baseline["compactions"]), len(got["compactions"])),
        "compactions_moved": len(set(got["compactions"]) - set(baseline["compactions"])),
        "summary_calls": (baseline["summary_calls"], got["summary_calls"]),
        "context_hints": (baseline.get("context_hints", []), got["context_hints"]),
        "duplicated_call_numbers": surplus(Counter(numbers), Counter(set(numbers))),
        "call_numbers_ok": numbers == list(range(1, len(numbers) + 1)),
        "double_executions": double_executions(session),
        "discarded_events": SessionEvent.all_objects.filter(session=session,
                                                            discarded=True).count(),
        "resumes": SessionEvent.objects.filter(session=session, type=EventType.SESSION_STARTED,
                                               payload__resumed=True).count(),
        "differs_in": [key for key in COMPARED if got[key] != baseline[key]],
    }
