"""The source audit reads every archived row once per compaction, so its text readers take
shortcuts (agents/words/marks.py's ASCII path, agents/compaction/source_audit.py's file
name pre-check); each must find exactly what the general reader finds, and the audit must
still fail a summary whose names or figures no archived row holds."""

from hypothesis import example, given, settings
from hypothesis import strategies as st

from agents.compaction.source_audit import DEFERRED_BATCH, _FILE_NAME, SourceAudit, _name_marks
from agents.events import AssistantMessage, Compaction, ModelCall, ToolResult, UserMessage
from agents.store.memory import MemoryStore
from agents.words.marks import _COMMON, _CJK_RUN, _MARK, marks

ASCII_PIECES = st.lists(st.sampled_from([
    "Solar", "YIELD", "the", "And", "x_y", "__init__", "ab", "abc", "A1b2", "12", "7", "3.5",
    "2026-Q3", "sales_2026.csv", "e.g.", "1204.50", "Report.XLSX", "v2.py", "a.b", " ", "\n",
    ".", ",", "'quoted'", "\"name\"", "-", "%", "THE", "FOR", "is"]), max_size=40)


def general_marks(text: str) -> set[str]:
    """marks() without its ASCII shortcut: the rule as written for every script."""
    found = {m.casefold() for m in _MARK.findall(text)}
    for run in _CJK_RUN.findall(text):
        found.update(run[i:i + 2] for i in range(len(run) - 1))
    return found - _COMMON


@settings(max_examples=400, deadline=None)
@given(st.one_of(ASCII_PIECES.map("".join), ASCII_PIECES.map(" ".join),
                 st.text(alphabet=st.characters(max_codepoint=127), max_size=80)))
@example("Fact 1: solar yield #0 installed capacity in the East region was 727.3 MW")
def test_ascii_marks_are_the_general_marks(text):
    assert text.isascii()
    assert marks(text) == general_marks(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
@example("İstanbul Straße 报告数据 ÉCOLE")  # casefolding changes lengths outside ASCII
def test_other_scripts_keep_the_general_rule(text):
    assert marks(text) == general_marks(text)


@settings(max_examples=400, deadline=None)
@given(ASCII_PIECES.map("".join) | ASCII_PIECES.map(" ".join) | st.text(max_size=60))
@example("see sales_2026.csv and 报告.xlsx.")
def test_file_names_are_found_as_by_the_full_pattern(text):
    expected = {n.casefold().rstrip(".") for n in _FILE_NAME.findall(text)} | marks(text)
    assert _name_marks(text) == expected


def test_file_names_still_found():
    assert {"sales_2026.csv", "报告.xlsx"} <= _name_marks("see sales_2026.csv and 报告.xlsx.")
    assert not any("." in n for n in _name_marks("Revenue rose 12.5%. Costs fell."))


def audit_of(summary: str, result: str) -> list:
    store, emitted = MemoryStore(), []
    audit = SourceAudit(store, "s", emitted.append)
    ref = store.archive("s", 1, "tool", result)
    audit.observe(ToolResult(call_id="c1", name="fetch_document", ref=ref, turn=1))
    audit.observe(Compaction(trigger="rolling", summary_after=summary, turn=2))
    audit.observe(ModelCall(call=3, kind="agent", turn=2, messages=[
        {"role": "system", "content": summary, "zone": "summary"}]))
    return emitted


def test_the_audit_still_fails_a_summary_the_archive_does_not_hold():
    result = "Fact 1: capacity in the East region was 727.3 MW, see yields_east.csv."
    good = audit_of("## Findings\n- East capacity 727.3 MW (yields_east.csv)", result)
    assert [a.ok for a in good] == [True]
    bad = audit_of("## Findings\n- East capacity 912.4 MW (yields_west.csv, Oberland)", result)
    assert [a.ok for a in bad] == [False]
    assert bad[0].unsupported_figures == ["912.4"]
    assert set(bad[0].unsupported_names) == {"yields_west.csv", "Oberland"}


# The summary's copy check (agents/compaction/summary_text.py) tells most summaries apart
# by looking their items up in the flattened material before cutting it into lines.
LINES = st.lists(st.sampled_from([
    "- Revenue in the East region was 1,204.5 MW in 2026-Q3.", "* Failure rate: 8.4 per 1000 h",
    "1. Utilisation rose to 44.6 %.", "## Findings", "message: Costs fell by 3 % year on year.",
    "Fact 7: the  South   region  closed two plants.", "Straße ΑΣ capacity 12 GW",
    "Here is a summary of the conversation:", "short", "Open questions:",
    "The grid operator reported 17 outages.  The regulator fined it 2.1M."]), max_size=30)


def copy_without_precheck(items, material, ignore=(), earlier=""):
    from agents.compaction.summary_text import (COPIED_ITEMS, COPIED_MATERIAL,
                                                MIN_MATERIAL_LINES, _flat, prose_items)
    lines = ({_flat(line) for line in prose_items(material, ignore)}
             - {_flat(line) for line in prose_items(earlier)})
    said = [_flat(item) for item in items if item.strip()]
    if len(lines) < MIN_MATERIAL_LINES or not said:
        return None
    copied = [item for item in said if item in lines]
    if len(copied) < COPIED_ITEMS * len(said) or len(set(copied)) < COPIED_MATERIAL * len(lines):
        return None
    return len(set(copied)), len(lines)


@settings(max_examples=400, deadline=None)
@given(LINES, LINES, LINES)
def test_the_copy_check_finds_what_it_found_without_its_precheck(material, items, earlier):
    from agents.compaction.summary_text import material_copy, prose_items

    text = "\n".join(material * 3)
    said = [item for line in items for item in prose_items(line)] + items
    for candidate in (said, prose_items(text), prose_items(text)[:-1]):
        assert (material_copy(candidate, text, (), "\n".join(earlier))
                == copy_without_precheck(candidate, text, (), "\n".join(earlier)))


def _compacted(audit: SourceAudit, summary: str, call: int, turn: int) -> None:
    """A compaction that wrote `summary`, then the agent call it is audited at."""
    audit.observe(Compaction(trigger="rolling", summary_after=summary, turn=turn))
    audit.observe(ModelCall(call=call, kind="agent", turn=turn, messages=[
        {"role": "system", "content": summary, "zone": "summary"}]))


def test_the_saved_audit_grows_by_what_it_learnt_and_resumes_the_same():
    store = MemoryStore()
    audit = SourceAudit(store, "s", lambda event: None)
    first = store.archive("s", 1, "tool", "East 727.3 MW in yields_east.csv, Oberland")
    audit.observe(ToolResult(call_id="c1", name="fetch_document", ref=first, turn=1))
    _compacted(audit, "## Findings\n- East 727.3 MW", call=2, turn=2)
    saved = audit.to_state()
    assert audit.to_state()["known"] is saved["known"]  # unchanged: the same lists again
    assert set(saved["known"]) == audit.known and "727.3" in audit.known
    assert set(saved["known_names"]) == audit.known_names >= {"yields_east.csv", "oberland"}
    assert set(saved["source_marks"]) == audit.source_marks
    known = list(saved["known"])
    second = store.archive("s", 3, "tool", "West 912.4 MW and East 727.3 MW")
    audit.observe(ToolResult(call_id="c2", name="fetch_document", ref=second, turn=3))
    _compacted(audit, "## Findings\n- West 912.4 MW", call=4, turn=4)
    assert saved["known"] == known  # what was saved stays as it was saved
    again = audit.to_state()
    assert again["known"][:len(known)] == known and "912.4" in again["known"]
    assert len(again["known"]) == len(set(again["known"])) == len(audit.known)
    resumed = SourceAudit(store, "s", lambda event: None)
    resumed.from_state(again)
    for name in ("known", "known_names", "source_marks", "person_marks"):
        assert getattr(resumed, name) == getattr(audit, name)
    assert resumed.to_state() == again
    # A state saved with sorted sets (before the learnt order) resumes the same.
    old = {**again, "known": sorted(audit.known), "known_names": sorted(audit.known_names)}
    resumed.from_state(old)
    assert resumed.known == audit.known and resumed.known_names == audit.known_names


class ReadingEverything(SourceAudit):
    """The audit as it was before it deferred results: every row read at the compaction."""

    def read_archive(self, defer_results: bool = False) -> None:
        super().read_archive()
        self._read_deferred(lambda: False)


FIGURES = st.sampled_from(["727.3", "912.4", "1,204.5", "55.5", "12%", "3k", "2026", "0.50"])
NAMES = st.sampled_from(["yields_east.csv", "Oberland", "report.xlsx", "Nordkap", "'West'"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.one_of(FIGURES, NAMES), max_size=4), min_size=1, max_size=12),
       st.lists(st.lists(st.one_of(FIGURES, NAMES), max_size=5), min_size=1, max_size=3),
       st.lists(st.integers(min_value=0, max_value=11), max_size=4))
def test_reading_results_when_asked_audits_as_reading_every_row(results, summaries, failed):
    """Each summary (a compaction after the results so far) flags the same figures and
    names whether the audit reads the results a question needs, newest first, or every
    row at the compaction; results that failed (errors) are raw rows, read at once."""
    outcomes = []
    for kind in (SourceAudit, ReadingEverything):
        store, emitted = MemoryStore(), []
        audit = kind(store, "s", emitted.append)
        turn = 0
        per = max(1, len(results) // len(summaries))
        for n, summary in enumerate(summaries):
            for i, said in enumerate(results[n * per:(n + 1) * per]):
                turn += 1
                ref = store.archive("s", turn, "tool", "Row " + ", ".join(said) + ".")
                audit.observe(ToolResult(call_id=f"c{turn}", name="fetch_document", ref=ref,
                                         turn=turn, error=(n * per + i) in failed))
            turn += 1
            _compacted(audit, "## Findings\n" + "".join(f"- Seen {s} there\n" for s in summary),
                       call=turn, turn=turn)
        outcomes.append([(a.unsupported_figures, a.unsupported_names, a.ok) for a in emitted])
    assert outcomes[0] == outcomes[1]


def test_only_the_results_a_question_needs_are_read():
    store, emitted = MemoryStore(), []
    audit = SourceAudit(store, "s", emitted.append)
    older = ["North 31.7 MW", "South 44.6 MW"]  # more than a batch before the newest
    newer = [f"Site {i} {100 + i}.5 MW" for i in range(DEFERRED_BATCH - 1)] + ["West 912.4 MW"]
    for turn, text in enumerate(older + newer, start=1):
        ref = store.archive("s", turn, "tool", text)
        audit.observe(ToolResult(call_id=f"c{turn}", name="fetch_document", ref=ref, turn=turn))
    _compacted(audit, "## Findings\n- West 912.4 MW", call=9, turn=9)
    assert emitted[-1].ok
    # The newest batch answered it; the older results wait, unread and saved as such.
    assert "912.4" in audit.known and not {"31.7", "44.6"} & audit.known
    assert [kind for _, kind in audit.to_state()["deferred"]] == ["result", "result"]
    ref = store.archive("s", 10, "tool", "Central 8.8 MW")
    audit.observe(ToolResult(call_id="c10", name="fetch_document", ref=ref, turn=10))
    _compacted(audit, "## Findings\n- North 31.7 MW, Mars 99.9 MW", call=11, turn=11)
    # A figure no row holds has every deferred row read before it is flagged.
    assert emitted[-1].unsupported_figures == ["99.9"] and audit.deferred == []
    assert {"31.7", "44.6", "8.8"} <= audit.known


def test_deferred_results_are_saved_and_a_resumed_audit_reads_them_when_asked():
    store = MemoryStore()
    first, later = [], []
    audit = SourceAudit(store, "s", first.append)
    for turn, text in enumerate(["East 727.3 MW", "West 912.4 MW"], start=1):
        ref = store.archive("s", turn, "tool", text)
        audit.observe(ToolResult(call_id=f"c{turn}", name="fetch_document", ref=ref, turn=turn))
    summary = "## Findings\n- East 727.3 MW, North 55.5 MW"
    audit.observe(Compaction(trigger="rolling", summary_after=summary, turn=3))
    saved = audit.to_state()
    assert [kind for _, kind in saved["deferred"]] == ["result", "result"]
    assert saved["unread"] == [] and audit.known == set()
    resumed = SourceAudit(store, "s", later.append)
    resumed.from_state(saved)
    call = ModelCall(call=4, kind="agent", turn=3, messages=[
        {"role": "system", "content": summary, "zone": "summary"}])
    audit.observe(call)
    resumed.observe(call)
    assert [a.unsupported_figures for a in first] == [a.unsupported_figures for a in later]
    assert first[-1].unsupported_figures == ["55.5"]
    assert resumed.to_state() == audit.to_state()
    assert saved["deferred"] == [[r, "result"] for r, _ in saved["deferred"]]  # as it was


def test_a_person_message_is_read_at_the_compaction_with_its_statements():
    store = MemoryStore()
    audit = SourceAudit(store, "s", lambda event: None)
    rows = [("tool", "East 727.3 MW"), ("user", "Instead, you must report in GW only."),
            ("assistant", "Reading the West report next (Oberland)")]
    for turn, (role, text) in enumerate(rows, start=1):
        ref = store.archive("s", turn, role, text)
        audit.observe(UserMessage(text=text, source="user", ref=ref, turn=turn)
                      if role == "user" else AssistantMessage(content=text, ref=ref, turn=turn)
                      if role == "assistant" else
                      ToolResult(call_id="c1", name="fetch_document", ref=ref, turn=turn))
    audit.observe(Compaction(trigger="rolling", summary_after="", turn=4))
    assert audit.statements == ["you must report in GW only"]
    assert "oberland" in audit.known_names and "727.3" not in audit.known  # the result waits
    assert [kind for _, kind in audit.deferred] == ["result"]
