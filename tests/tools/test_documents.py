"""fetch_document: deterministic synthetic documents of about N tokens with numbered facts."""
from __future__ import annotations

import re

from agents.counting.tokens import count_text
from agents.tools.documents import synthetic_document


def test_documents_are_deterministic_and_about_the_requested_size():
    for tokens in (200, 1600, 40_000):
        text = synthetic_document(tokens, "grid storage")
        assert text == synthetic_document(tokens, "grid storage")
        assert abs(count_text(text) - tokens) <= max(30, tokens * 0.03)
    assert synthetic_document(1600, "grid storage") != synthetic_document(1600, "solar yield")


def test_documents_hold_numbered_facts_with_numbers_and_units():
    text = synthetic_document(600, "battery chemistry")
    facts = re.findall(r"^Fact (\d+): battery chemistry (.+?) was ([\d.]+) (\S+(?: \S+)*?) "
                       r"\(([+-]\d+\.\d)% year on year; [a-z ]+\)\.$", text, re.M)
    assert len(facts) >= 10
    assert [int(f[0]) for f in facts] == list(range(1, len(facts) + 1))
    assert text.startswith("# battery chemistry: briefing document\n")


def test_a_1600_token_document_passes_uncut(call):
    outcome = call("fetch_document", tokens=1600, topic="battery chemistry")
    assert not outcome.truncated and outcome.content == synthetic_document(1600, "battery chemistry")


def test_a_huge_document_is_cut_to_its_boundary(call, store):
    outcome = call("fetch_document", tokens=40_000, topic="grid storage")
    assert outcome.truncated and len(outcome.content) <= 7000
    assert outcome.original_chars >= 20 * 6500
    assert store.read_ref("s1", outcome.ref) == synthetic_document(40_000, "grid storage")


def test_save_as_writes_into_the_workspace(call, workspace):
    outcome = call("fetch_document", tokens=300, topic="wind", save_as="docs/wind.txt")
    text = synthetic_document(300, "wind")
    assert outcome.content == (f"Saved a document of about 300 tokens on 'wind' ({len(text)} "
                               "characters) to docs/wind.txt; read it with "
                               "read_file(path='docs/wind.txt').")
    assert (workspace / "docs" / "wind.txt").read_text() == text
    assert call("fetch_document", tokens=300, topic="wind", save_as="../x.txt").error == \
        "Path '../x.txt' resolves outside the workspace; only files inside it can be used."


def test_bad_requests(call):
    assert call("fetch_document", tokens=0, topic="x").error == \
        "tokens must be between 1 and 500000 (got 0)."
    assert call("fetch_document", tokens=10, topic=" ").error == \
        "Give a topic, e.g. topic='grid storage'."
