"""The storable rule (agents/storable.py, issue 25 item 4): NUL and lone surrogates become
visible marks where text enters the engine, so what it sends, what it keeps and what the
store reads back agree, and the compaction audit over the archive still passes."""
from __future__ import annotations

import json

import pytest

from agents import BAD_MARK, NUL_MARK, storable_text, storable_value
from agents.events import EventType
from agents.tools.arguments import parse_arguments
from agents.tools.base import Tool

from .helpers import run_scenario

NUL, LONE = "\x00", "\ud800"


def holds_unstorable(value) -> bool:
    """Whether any string in `value` (keys included) holds a NUL or a lone surrogate."""
    if isinstance(value, str):
        return any(ch == NUL or 0xD800 <= ord(ch) <= 0xDFFF for ch in value)
    if isinstance(value, dict):
        return holds_unstorable(list(value)) or holds_unstorable(list(value.values()))
    if isinstance(value, (list, tuple)):
        return any(holds_unstorable(item) for item in value)
    return False


def test_the_rule_marks_each_code_point_with_one_visible_character():
    text = f"a{NUL}b{LONE}c\udfffd \U0001F600 é"
    assert storable_text(text) == f"a{NUL_MARK}b{BAD_MARK}c{BAD_MARK}d \U0001F600 é"
    assert len(storable_text(text)) == len(text)  # offsets and caps mean what they meant
    clean = "plain ␀ text"
    assert storable_text(clean) is clean and storable_text(storable_text(text)) == \
        storable_text(text)
    value = {"k" + NUL: [1, None, (f"x{LONE}", {"deep": NUL})], "ok": "fine"}
    assert storable_value(value) == {"k" + NUL_MARK: [1, None, [f"x{BAD_MARK}",
                                                                {"deep": NUL_MARK}]],
                                     "ok": "fine"}
    untouched = {"a": ["b", {"c": 1}]}
    assert storable_value(untouched) is untouched


def test_deeply_nested_arguments_are_made_storable_without_recursion():
    deep: list = [NUL]
    for _ in range(5000):
        deep = [deep]
    cleaned = storable_value({"v": deep})
    for _ in range(1 + 5001):  # the dict, then every list
        cleaned = cleaned["v"] if isinstance(cleaned, dict) else cleaned[0]
    assert cleaned == NUL_MARK


def test_a_tool_gets_escaped_nul_and_surrogates_in_its_arguments_as_marks():
    tool = Tool(name="echo", description="", func=lambda text: text,
                parameters={"type": "object", "properties": {"text": {"type": "string"}}})
    assert parse_arguments(tool, '{"text": "a\\u0000b \\ud800"}') == {
        "text": f"a{NUL_MARK}b {BAD_MARK}"}


def scenario(lone: str) -> dict:
    """Compactions and their audits over a person's statements that hold a NUL (and, with
    `lone`, a lone surrogate)."""
    return {
        "name": "unstorable-audit", "summarizer": "faithful",
        "goal": f"Collect sources on grid storage. The report must keep row A{NUL}B.",
        "steps": [{"user": f"Never drop the C{NUL}D row{lone}."}]
        + [{"say": f"Source {i} read {NUL}{lone}.", "tool": "fetch_document",
            "args": {"tokens": 1400, "topic": f"grid {i} {NUL}"}} for i in range(8)]
        + [{"final": f"Done: A{NUL}B and C{NUL}D{lone}."}],
    }


@pytest.mark.parametrize("lone", ["", f" {LONE}"])
def test_a_run_with_nul_and_lone_surrogates_sends_keeps_and_audits_the_marks(lone):
    """With the rule at the store only, the request would hold "A\\x00B" and the archive
    "A␀B": the audit reported both statements missing after every compaction (tried). A
    lone surrogate could not even be sent to the model before."""
    out = run_scenario(scenario(lone), window=8000)
    marked = lone.replace(LONE, BAD_MARK)
    assert out.run.status == "finished", out.run.result.error
    assert out.run.final_answer == f"Done: A{NUL_MARK}B and C{NUL_MARK}D{marked}."

    bodies = out.transport.requests
    assert bodies and not [i for i, body in enumerate(bodies) if holds_unstorable(body)]
    sent = json.dumps(bodies[-1], ensure_ascii=False)
    assert f"A{NUL_MARK}B" in sent and f"C{NUL_MARK}D row{marked}" in sent

    archived = [row["content"] for row in out.store.archived_rows("t1")]
    assert any(f"C{NUL_MARK}D row{marked}" in text for text in archived)
    assert not [text for text in archived if holds_unstorable(text)]

    audits = out.payloads(EventType.AUDIT)
    assert audits and all(a["ok"] for a in audits), [a for a in audits if not a["ok"]]
    assert out.run.report["audit_failures"] == 0
    assert not [e.type for e in out.sink.events if holds_unstorable(e.payload)]
