"""What the engine and the simulated model agree on: markers and the summary request's form.

The simulator must read a request as any model would, so it shares no code with the
engine (a summarizer built on the engine's own parser would agree with it by
construction). It still has to recognise what the engine sends: a summary request, the
probe questions after a compaction, a request to continue a cut answer, and the archive
labels of the messages a summary folds. Those strings are written once, here; the engine
writes them and the simulator reads them, and neither imports the other.
"""
from __future__ import annotations

from typing import Any

SUMMARY_MARKER = "[taskos:summary-request]"
PROBE_MARKER = "[taskos:probe-questions]"
CONTINUE_MARKER = "[taskos:continue]"

# The prefix-reusing summary request ends with an instruction that says how many messages
# just before it are folded and gives each one's archive label (agents/compaction/compactor.py).
FOLD_LINE = "Messages to fold: the {count} messages just before this one."
LABELS_LINE = "Their archive labels, in order:"
CONSTRAINTS_LINE = "Hard constraints (keep verbatim in task_overview):"

# The request that condenses the person's older messages into the requirements in force
# (agents/words/condensing.py). It starts with SUMMARY_MARKER, so whatever routes summary
# requests (a replay, a summary model) routes it too; WORDS_MARKER on its second line says
# which kind. Each message is given under its label ("[m3]"), the older ones to condense
# after OLDER_LINE, the later ones (kept verbatim) after LATER_LINE; an answer line starts
# with the label it cites, or "[m1 superseded by m4]" for a sentence a later one changed.
WORDS_MARKER = "[taskos:words-request]"
OLDER_LINE = "Older messages to condense:"
LATER_LINE = "Later messages, kept verbatim (for reference, do not restate them):"
# Older messages too many for one request are condensed in several, newest part first;
# each request after the first gives the requirements the later parts' answers stated
# after this line ("[m7] …"), so a sentence one of them changed can be named superseded.
CONDENSED_LATER_LINE = ("Requirements of later older messages, condensed in other requests "
                        "(for reference: they may change a sentence above; do not restate "
                        "them):")
SUPERSEDED_BY = "superseded by"


def words_label(position: int) -> str:
    """A message's label in the condensing request and its answer: "m3"."""
    return f"m{position}"


def label_line(position: int, turn: int | str, ref: str = "") -> str:
    """One line of the instruction's label list: "3. turn 12, ref arc:s:40"."""
    return f"{position}. turn {turn}" + (f", ref {ref}" if ref else "")


def archive_label(turn: int | str, ref: str = "") -> str:
    """The first line of a folded message: "[archive turn 12, ref arc:s:40]"."""
    return f"[archive turn {turn}, ref {ref}]" if ref else f"[archive turn {turn}]"


def is_tail_request(messages: list[dict[str, Any]]) -> bool:
    """True when the last message is a summary instruction (the prefix-reusing form)."""
    last = messages[-1].get("content") if messages else None
    return isinstance(last, str) and last.startswith(SUMMARY_MARKER)


def is_summary_request(messages: list[dict[str, Any]]) -> bool:
    """A summary request in either form: standalone (marker first) or prefix-reusing (last)."""
    first = messages[0].get("content") if messages else None
    return (isinstance(first, str) and first.startswith(SUMMARY_MARKER)) \
        or is_tail_request(messages)
