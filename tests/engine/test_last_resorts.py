"""Regressions found by the property tests (issue 13 §5): a tight window that fits is used.

At window 2 048 with a system prompt of about 1 500 tokens, the fixed parts fit (preflight
passes), yet the run failed with request_too_large: the frozen snapshot kept its key data
after fit() had rendered the minimal one, and a summary that could not shrink further was
never dropped. An overflow that shrank the believed window went straight to fit() instead
of the preflight, so a system prompt that no longer fits was reported as a request problem.
"""
from __future__ import annotations

import dataclasses

from agents.events import EventType
from agents.scenarios import parse_scenario

from .helpers import run_scenario

UNIT = "Follow the house style guide and cite every source you use. "


def tight(units: int, window: int = 2048):
    scenario = parse_scenario({"name": "tight", "tools": ["fetch_document"],
                               "goal": "Collect sources on grid storage and report.", "steps": [
        {"user": "The report must include a table."},
        {"tools": [{"tool": "fetch_document", "args": {"tokens": 60, "topic": f"grid {k}"}}
                   for k in range(3)]},
        {"user": "数据必须截止到2026年10月31日。"}, {"user": "Carry on."},
        {"tools": [{"tool": "fetch_document", "args": {"tokens": 60, "topic": "grid x"}}]},
        {"user": "Carry on."}, {"final": "Here is the report."}]})
    return dataclasses.replace(scenario, system=UNIT * units)


def test_the_minimal_snapshot_replaces_the_frozen_one_when_nothing_else_fits():
    out = run_scenario(tight(110), window=2048)
    assert out.run.status == "finished", out.run.result.error
    assert out.transport.refused == []


def test_a_summary_that_cannot_fit_is_dropped_or_never_asked_for_visibly_instead_of_failing():
    out = run_scenario(tight(108), window=2048)  # the person's words block takes ~120 tokens too
    assert out.run.status == "finished", out.run.result.error
    # A summary the next request has no room for is not asked for (it was made, then
    # dropped, before summaries were sized to the request that carries them).
    said = [e for e in out.payloads(EventType.ERROR)
            if "was dropped" in e["message"] or e["code"] == "summary_skipped"]
    assert said and all(e["fatal"] is False for e in said)
    assert out.run.report["unused_summaries"] == 0
    for call in out.payloads(EventType.MODEL_CALL):  # tier 1 stays, in every request
        text = "\n".join(m.get("content") or "" for m in call["messages"])
        if call["kind"] == "agent":
            assert "The report must include a table" in text


def test_an_overflow_that_shrinks_the_window_below_the_fixed_parts_fails_preflight():
    # The profile says 9 000, the provider really has 6 000; the system prompt is ~6 500.
    out = run_scenario(tight(600), window=9000, transport_window=6000)
    assert out.run.status == "failed"
    assert out.run.result.code == "preflight_failed", out.run.result.error
    assert "system prompt" in out.run.result.error and "Fix:" in out.run.result.error
    assert len(out.transport.refused) == 1  # no doomed retry of the same request
