"""The run report's sink: every event forwarded, what `runtask --json` reports kept.

Running totals only (calls, tokens, cost, compactions, audits, sub-agents), so saving it
with the loop state every turn costs the same at turn 10 and at turn 1000.
"""
from __future__ import annotations

from typing import Any

from agents.compaction.numbers import numbers_in
from agents.compaction.source_audit import PERSON_SOURCES
from agents.compaction.words_check import person_sentences
from agents.config import ModelProfile
from agents.counting.pricing import CostMeter
from agents.events import Audit, Compaction, Event, EventSink, ModelCall, ToolResult, UserMessage
from agents.protocol import WORDS_MARKER

ZERO_SUMS = {"calls": 0, "total_input_tokens": 0, "peak_input_tokens": 0,
             "cached_input_tokens": 0, "output_tokens": 0, "summary_calls": 0,
             "over_window_requests": 0, "summary_section_tokens": 0, "summary_output_tokens": 0}


def carried(expected: str, messages: list[dict[str, Any]]) -> bool:
    """Whether `expected` is in the request's message texts joined by newlines. A string
    without a newline is there exactly when one text holds it, so the texts are searched
    in order: an anchor the request carries is in its snapshot, the second message, and
    the ~30 kB of history after it are neither joined nor searched (0.03-0.06 ms a call)."""
    if not expected or "\n" in expected:
        return expected in "\n".join(str(m.get("content") or "") for m in messages)
    return any(expected in str(m.get("content") or "") for m in messages)


def is_words_request(messages: list[dict[str, Any]]) -> bool:
    """A request that condenses the person's words (its marker opens the instructions)."""
    return any(WORDS_MARKER in str(m.get("content") or "")[:200] for m in messages[:2])


class ReportSink:
    """Forwards every event and keeps what the run report needs (the runtask keys).

    Everything is a running total updated per event, so saving it with the loop state
    every turn costs the same at turn 10 and at turn 1000 (the per-call list stays in
    memory and is never part of the saved state).
    """

    def __init__(self, inner: EventSink, expect_tier1: list[str],
                 profile: ModelProfile | None = None) -> None:
        self.inner = inner
        self.expect = expect_tier1
        # Per call, for this process's report (bench sequences, plots); not saved with the
        # state: a save per turn would copy every call ever made (O(calls) per turn).
        self.model_calls: list[dict[str, Any]] = []
        self.sums = dict(ZERO_SUMS)  # running totals: what the state saves and resumes
        self.compactions = 0
        self.summaries: dict[str, int] = {"model": 0, "fallback": 0}
        self.clears = {"clears": 0, "cleared_tokens": 0}  # the clearing tier (C20)
        # Summary calls whose text never reached an agent request: settled by the next
        # agent call (it carries a summary section or not), or at the end of the run.
        self.unused_summaries = 0
        self.pending_summaries = 0
        # The calls that condensed the person's words, and those whose answer some agent
        # request's words block carried: the rest cost and were never used.
        self.condensing_calls: set[int] = set()
        self.condensing_used: set[int] = set()
        self.probes: list[dict[str, Any]] = []  # one small dict per probed compaction
        self.stated_turn: dict[str, int] = {}
        # per expected anchor: [calls that should show it, calls that did]
        self.present: dict[str, list[int]] = {s: [0, 0] for s in expect_tier1}
        self.meter = CostMeter(profile or ModelProfile())
        # Sub-agents (T6): per delegate answer, the child and the tokens it added here.
        self.delegated: list[dict[str, Any]] = []
        self.agent_inputs: list[int] = []  # input tokens per agent call (the children report)
        self.audit_failures = 0
        self.flagged: list[str] = []  # figures any audit found without support, in order
        self.flagged_names: list[str] = []  # names any audit found without support
        # Figures as written in any summary that was made or sent: an invented figure
        # that shows up here must be in `flagged`.
        self.summary_figures: set[str] = set()
        self._noted = ""  # the summary text last read for figures: it changes per compaction
        # The person's words check (C19): their sentences, those any request lacked, and
        # the requests that listed superseded, quoted or tool text as their constraints.
        self.person_sentences: set[str] = set()
        self.words_lost: set[str] = set()
        # The audit's count of distinct sentences lost so far: its events list at most
        # MAX_FLAGGED of a request's missing sentences, so the listed ones undercount.
        self.words_lost_total = 0
        self.words_flags = {"superseded_listed": 0, "quoted_promoted": 0,
                            "tool_text_in_constraints": 0}
        self._figures_list: list[str] | None = None

    def emit(self, event: Event) -> None:
        if isinstance(event, ModelCall):
            self._model_call(event)
        elif isinstance(event, ToolResult) and event.child:
            self.delegated.append({
                "child": event.child, "status": event.child_status,
                "answer_tokens": event.kept_tokens, "error": event.error,
                "child_input_tokens": event.child_input_tokens, "child_cost": event.child_cost,
                "parent_calls_before": len(self.agent_inputs)})
        elif isinstance(event, Compaction) and event.kind == "clear":
            self.compactions += 1
            self.clears["clears"] += 1
            self.clears["cleared_tokens"] += event.tokens_saved
        elif isinstance(event, Compaction) and not event.noop:
            self.compactions += 1
            # Visible in runtask's report: how many model summaries were usable, and how. A
            # compaction that kept the summary it had (nothing new to fold, or an anchor's
            # snapshot rebuild) asked the model nothing.
            kind = ("fallback" if event.fallback else "model" if event.summary_calls
                    else "without_model_call")
            self.summaries[kind] = self.summaries.get(kind, 0) + 1
            if event.fallback:  # truncated instead: none of its calls' text is used
                self.unused_summaries += event.summary_calls
            else:
                self.unused_summaries += event.summary_calls_discarded
                self.pending_summaries += event.summary_calls - event.summary_calls_discarded
            if event.probe is not None:
                probe = event.probe
                self.probes.append({"compaction": self.compactions, "turn": event.turn,
                                    "rate": probe.get("rate"), "asked": probe.get("asked"),
                                    "recovered": probe.get("recovered"),
                                    **({"error": probe["error"]} if probe.get("error") else {})})
            for form in event.summary_forms or ():
                self.summaries[f"read_as_{form}"] = self.summaries.get(f"read_as_{form}", 0) + 1
            self._note_figures(event.summary_after or "")
        elif isinstance(event, Audit):
            self.audit_failures += not event.ok
            self.words_lost.update(event.words_missing or ())
            self.words_lost_total = max(self.words_lost_total, event.words_lost_total or 0)
            for name in self.words_flags:
                self.words_flags[name] += bool(getattr(event, name))
            self.flagged += [f for f in event.unsupported_figures or []
                             if f not in self.flagged]
            self.flagged_names += [n for n in event.unsupported_names or []
                                   if n not in self.flagged_names]
        elif isinstance(event, UserMessage):
            if event.source in PERSON_SOURCES:
                self.person_sentences.update(person_sentences(event.text))
            for expected in self.expect:
                if expected in event.text and expected not in self.stated_turn:
                    self.stated_turn[expected] = event.turn
        self.inner.emit(event)

    def _model_call(self, event: ModelCall) -> None:
        cached, output = event.cached_tokens or 0, event.output_tokens or 0
        call = {"input_tokens": event.input_tokens, "kind": event.kind,
                "over_window": event.over_window, "cached_tokens": cached,
                "output_tokens": output, **({"refused": True} if event.refused else {})}
        marked = None
        if event.cache_write_tokens is not None:
            marked = (event.cache_read_tokens or 0, event.cache_write_tokens)
            call.update(cache_read_tokens=marked[0], cache_write_tokens=marked[1])
        if event.kind == "agent" and (event.zones or {}).get("summary"):
            call["summary_tokens"] = event.zones["summary"]  # the summary this call carried
        self.model_calls.append(call)
        self._add(call)
        if event.kind == "summary" and is_words_request(event.messages):
            self.condensing_calls.add(event.call)
        if event.kind == "agent" and not event.refused:
            self.condensing_used.update(event.words_calls or ())
            self.agent_inputs.append(event.input_tokens)
            if not (event.zones or {}).get("summary"):
                self.unused_summaries += self.pending_summaries
            self.pending_summaries = 0
        if event.refused:  # never sent on to the model: nothing to check in it
            return
        self.meter.add(event.input_tokens, cached, output, marked)
        if event.kind == "agent":
            self._note_figures("\n".join(str(m.get("content") or "") for m in event.messages
                                          if m.get("zone") == "summary"))
        for expected in self.expect:
            stated = self.stated_turn.get(expected)
            if stated is not None and event.turn >= stated:
                self.present[expected][0] += 1
                self.present[expected][1] += carried(expected, event.messages)

    def _note_figures(self, text: str) -> None:
        # Every agent call carries the same summary until the next compaction: read once.
        if text and text != self._noted:
            self._noted = text
            self.summary_figures.update(written for written, _, _ in numbers_in(text))

    def unflagged(self, invented: list[str]) -> list[str]:
        """Figures a summarizer made up that reached a summary without an audit flag."""
        return [f for f in invented if f in self.summary_figures and f not in self.flagged]
    def __getattr__(self, name: str) -> Any:
        # The inner sink's batching (hold, flush, release, drop_held) where it has it.
        if name in ("hold", "flush", "release", "drop_held"):
            return getattr(self.inner, name)
        raise AttributeError(name)

    def discard_after(self, seq: int) -> int:
        discard = getattr(self.inner, "discard_after", None)
        return discard(seq) if discard else 0

    # The report survives a resume: the loop saves this with its own state every turn.
    state_key = "report"

    def _add(self, call: dict[str, Any]) -> None:
        sums = self.sums
        sums["calls"] += 1
        sums["total_input_tokens"] += call["input_tokens"]
        sums["peak_input_tokens"] = max(sums["peak_input_tokens"], call["input_tokens"])
        sums["cached_input_tokens"] += call["cached_tokens"]
        sums["output_tokens"] += call["output_tokens"]
        sums["summary_calls"] += call["kind"] == "summary"
        sums["summary_section_tokens"] += call.get("summary_tokens", 0)
        if call["kind"] == "summary":
            sums["summary_output_tokens"] += call["output_tokens"]
        sums["over_window_requests"] += bool(call["over_window"])

    def to_state(self) -> dict[str, Any]:
        # Sizes that do not grow with the session: totals, never the list of calls.
        return {"sums": self.sums, "compactions": self.compactions, "summaries": self.summaries,
                "probes": self.probes,
                "stated_turn": self.stated_turn, "present": self.present,
                "cost": self.meter.totals, "delegated": self.delegated,
                "agent_inputs": self.agent_inputs,  # ints, a few kB at 1000 turns
                "audit_failures": self.audit_failures,
                "flagged": self.flagged, "flagged_names": self.flagged_names,
                "person_words": [sorted(self.person_sentences), sorted(self.words_lost),
                                 self.words_flags, self.words_lost_total],
                "summary_figures": self._figures_saved(),
                "clears": self.clears, "unused_summaries": [self.unused_summaries,
                                                            self.pending_summaries],
                "condensing": [sorted(self.condensing_calls), sorted(self.condensing_used)]}

    def _figures_saved(self) -> list[str]:
        # Saved every turn, changed per compaction: the same sorted list until it grows.
        if self._figures_list is None or len(self._figures_list) != len(self.summary_figures):
            self._figures_list = sorted(self.summary_figures)
        return self._figures_list

    def from_state(self, state: dict[str, Any]) -> None:
        self.model_calls = []  # the calls of this process; the sums carry the earlier ones
        for call in state.get("model_calls", []):  # a state saved before the sums existed
            self.model_calls.append(call)
            self._add({**call, "cached_tokens": call.get("cached_tokens", 0),
                       "output_tokens": call.get("output_tokens", 0)})
        for name, value in (state.get("sums") or {}).items():
            if name in self.sums and isinstance(value, int):
                self.sums[name] = value
        self.compactions = state.get("compactions", 0)
        self.summaries = {"model": 0, "fallback": 0, **(state.get("summaries") or {})}
        self.probes = list(state.get("probes") or [])
        self.clears = {"clears": 0, "cleared_tokens": 0, **(state.get("clears") or {})}
        self.unused_summaries, self.pending_summaries = state.get("unused_summaries") or (0, 0)
        made, used = state.get("condensing") or ([], [])
        self.condensing_calls, self.condensing_used = set(made), set(used)
        self.delegated = list(state.get("delegated", []))
        self.agent_inputs = [int(n) for n in state.get("agent_inputs", [])]
        self.stated_turn = dict(state.get("stated_turn", {}))
        self.audit_failures = int(state.get("audit_failures", 0))
        self.flagged = list(state.get("flagged", []))
        self.flagged_names = list(state.get("flagged_names", []))
        said, lost, flags, *total = state.get("person_words") or ([], [], {})
        self.person_sentences, self.words_lost = set(said), set(lost)
        self.words_lost_total = int(total[0]) if total else 0
        self.words_flags = {name: int(flags.get(name, 0)) for name in self.words_flags}
        self.summary_figures = set(state.get("summary_figures", []))
        self._figures_list = None
        for key, pair in state.get("present", {}).items():
            if (key in self.present and isinstance(pair, list) and len(pair) == 2
                    and all(isinstance(x, int) for x in pair)):
                self.present[key] = [int(pair[0]), int(pair[1])]
        for name, value in (state.get("cost") or {}).items():
            if name in self.meter.totals:
                self.meter.totals[name] = float(value)

    def person_words_kept(self) -> float | None:
        """The share of the person's sentences present in every agent request after they
        wrote them (None when they wrote nothing)."""
        if not self.person_sentences:
            return None
        lost = max(len(self.words_lost & self.person_sentences), self.words_lost_total)
        return round(1 - lost / len(self.person_sentences), 4)

    def anchor_survival(self) -> float | None:
        if not self.expect:
            return None
        survived = sum(1 for expected in self.expect
                       if self.present[expected][0] and
                       self.present[expected][1] == self.present[expected][0])
        return survived / len(self.expect)

    def totals(self) -> dict[str, Any]:
        sums = self.sums
        return {name: sums[name] for name in ("total_input_tokens", "peak_input_tokens",
                                              "cached_input_tokens", "output_tokens",
                                              "summary_calls", "over_window_requests",
                                              "summary_section_tokens",
                                              "summary_output_tokens")} | {
                "model_call_count": sums["calls"], "compactions": self.compactions,
                "summaries": dict(self.summaries), **self.clears,
                # A run that ends right after a compaction never sent that summary either.
                "unused_summaries": self.unused_summaries + self.pending_summaries,
                # Condensing calls whose answer no agent request's words block carried.
                "condensing_calls": len(self.condensing_calls),
                "unused_condensing": len(self.condensing_calls - self.condensing_used),
                "probe_recovery": list(self.probes),
                "anchor_survival": self.anchor_survival(), "cost": self.meter.rounded(),
                "audit_failures": self.audit_failures, "unsupported_figures": len(self.flagged),
                "unsupported_names": len(self.flagged_names),
                "person_words_kept": self.person_words_kept(), **self.words_flags,
                **({"children": self.children_report()} if self.delegated else {})}

    def children_report(self) -> dict[str, Any]:
        """What sub-agents cost this context: each answer's tokens against the child's own
        input, and the agent call input before and after the answers arrived."""
        # Saved with the state (one int per agent call): a waiting parent resumes in a new
        # process, whose model_calls list starts empty.
        agent = self.agent_inputs
        growth = []
        for mark in sorted({d["parent_calls_before"] for d in self.delegated}):
            if 0 < mark < len(agent):
                answers = sum(int(d["answer_tokens"] or 0) for d in self.delegated
                              if d["parent_calls_before"] == mark)
                growth.append({"input_before": agent[mark - 1], "input_after": agent[mark],
                               "answers_tokens": answers})
        return {"sessions": [{k: v for k, v in d.items() if k != "parent_calls_before"}
                             for d in self.delegated],
                "children_input_tokens": sum(int(d["child_input_tokens"] or 0)
                                             for d in self.delegated),
                "answers_tokens": sum(int(d["answer_tokens"] or 0) for d in self.delegated),
                "parent_agent_input_tokens": list(agent),
                "growth_at_resume": growth,
                "cost_with_children": round(self.meter.totals["profile"] + sum(
                    float(d["child_cost"] or 0) for d in self.delegated), 6)}
