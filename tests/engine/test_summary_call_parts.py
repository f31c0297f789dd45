"""What a summary call's record says of its request (the drawer's inspector reads it):
each message with what it is (the agent's head, the previous summary, a folded message,
the instructions) and its tokens, summing with the tool schemas and the reply priming
to the request's count, which the simulated provider confirms exactly. And a session
reports no compaction before its first model call: building the first snapshot from a
scenario's anchors changes nothing that was sent.
"""
from __future__ import annotations

import json

from agents.config import ContextConfig
from agents.counting.tokens import REPLY_PRIMING, TokenCounter

from .helpers import run_scenario

AGENT_HEAD = {"system", "snapshot", "words"}
SUMMARY_PARTS = AGENT_HEAD | {"previous-summary", "folded", "instructions", "constraints",
                              "material"}


def test_every_summary_message_is_recorded_with_its_part_and_tokens() -> None:
    outcome = run_scenario("sales-report", window=6000,
                           config=ContextConfig(clear_tool_results=False))
    calls = outcome.payloads("MODEL_CALL")
    schemas = {c["call"]: json.loads(c["request"]["tools"]) for c in calls  # stored as JSON
               if isinstance(c["request"].get("tools"), str)}
    summaries = [c for c in calls if c["kind"] == "summary"]
    assert len(summaries) >= 2
    counter = TokenCounter("sim")
    for call in summaries:
        zones = [m["zone"] for m in call["messages"]]
        assert set(zones) <= SUMMARY_PARTS, zones
        assert zones[-1] == "instructions" and "folded" in zones
        sent = call["request"].get("tools")  # the schemas, or a marker naming the call
        sent = schemas[sent["tools_of_call"]] if isinstance(sent, dict) else sent
        tools = counter.tools(sent)
        assert all(m["tokens"] > 0 for m in call["messages"])
        assert REPLY_PRIMING + tools + sum(m["tokens"] for m in call["messages"]) \
            == call["engine_tokens"] == call["input_tokens"]
    # Each later summary folds into the one before: the request carries it as such.
    assert "previous-summary" in [m["zone"] for m in summaries[-1]["messages"]]


def test_no_compaction_is_reported_before_the_first_model_call() -> None:
    outcome = run_scenario("research-subagents")
    events = outcome.sink.events
    first_call = next(i for i, e in enumerate(events) if e.type == "MODEL_CALL")
    assert [e.type for e in events[:first_call]].count("ANCHOR_CHANGED") >= 1  # anchors set
    assert "COMPACTION" not in [e.type for e in events[:first_call]]
