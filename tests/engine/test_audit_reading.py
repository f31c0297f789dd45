"""The source audit reads every archived row once per compaction, so its text readers take
shortcuts (agents/words/marks.py's ASCII path, agents/compaction/source_audit.py's file
name pre-check); each must find exactly what the general reader finds, and the audit must
still fail a summary whose names or figures no archived row holds."""

from hypothesis import example, given, settings
from hypothesis import strategies as st

from agents.compaction.source_audit import _FILE_NAME, SourceAudit, _name_marks
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


def test_the_saved_audit_grows_by_what_it_learnt_and_resumes_the_same():
    store = MemoryStore()
    audit = SourceAudit(store, "s", lambda event: None)
    first = store.archive("s", 1, "tool", "East 727.3 MW in yields_east.csv, Oberland")
    audit.observe(ToolResult(call_id="c1", name="fetch_document", ref=first, turn=1))
    audit.observe(Compaction(trigger="rolling", summary_after="", turn=2))
    saved = audit.to_state()
    assert audit.to_state()["known"] is saved["known"]  # unchanged: the same lists again
    assert set(saved["known"]) == audit.known and "727.3" in audit.known
    assert set(saved["known_names"]) == audit.known_names >= {"yields_east.csv", "oberland"}
    assert set(saved["source_marks"]) == audit.source_marks
    known = list(saved["known"])
    second = store.archive("s", 3, "tool", "West 912.4 MW and East 727.3 MW")
    audit.observe(ToolResult(call_id="c2", name="fetch_document", ref=second, turn=3))
    audit.observe(Compaction(trigger="rolling", summary_after="", turn=4))
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


def _events_of_a_session(store, with_calls: bool):
    """Results, an assistant turn and a person's message, then a compaction and the call
    it is audited at; `with_calls`: an agent call after every turn (the audit reads
    ahead at each), else none until the compaction's."""
    rows = [("tool", "result", "East 727.3 MW in yields_east.csv"),
            ("assistant", "raw", "Reading the West report next (Oberland)"),
            ("user", "person", "Instead, you must report in GW only."),
            ("tool", "result", "West 912.4 MW, 1,204.5 k units")]
    for turn, (role, kind, text) in enumerate(rows, start=1):
        ref = store.archive("s", turn, role, text)
        if kind == "person":
            yield UserMessage(text=text, source="user", ref=ref, turn=turn)
        elif kind == "raw":
            yield AssistantMessage(content=text, ref=ref, turn=turn)
        else:
            yield ToolResult(call_id=f"c{turn}", name="fetch_document", ref=ref, turn=turn)
        if with_calls:
            yield ModelCall(call=turn, kind="agent", turn=turn + 1, messages=[
                {"role": "user", "content": "Instead, you must report in GW only."}])
    summary = "## Findings\n- West 912.4 MW, East 727.3 MW (yields_east.csv), North 55.5 MW"
    yield Compaction(trigger="rolling", summary_after=summary, turn=6)
    yield ModelCall(call=9, kind="agent", turn=6, messages=[
        {"role": "system", "content": summary, "zone": "summary"}])


def _run(with_calls: bool, stop_after: int | None = None, saves: list | None = None):
    store, emitted = MemoryStore(), []
    audit = SourceAudit(store, "s", emitted.append)
    if saves is not None:
        saves.append(audit.to_state())
    for i, event in enumerate(_events_of_a_session(store, with_calls)):
        if stop_after is not None and i == stop_after:
            return audit, store
        audit.observe(event)
    return audit, emitted


def test_reading_ahead_learns_what_reading_at_the_compaction_learns():
    # Before the compaction the calls have read the rows up to the person's message.
    before, _ = _run(with_calls=True, stop_after=8)
    assert "727.3" in before.known and "912.4" not in before.known
    ahead, ahead_audits = _run(with_calls=True)
    once, once_audits = _run(with_calls=False)
    assert ahead.to_state() == once.to_state()  # same sets, same learnt order, statements
    # The compaction's audit (the call also fails the words check: no words block here).
    audited = [a.unsupported_figures for a in ahead_audits if a.call == 9 and a.unsupported_figures]
    assert audited == [["55.5"]] == [a.unsupported_figures for a in once_audits
                                     if a.unsupported_figures]
    assert ahead.statements == once.statements == ["you must report in GW only"]


def test_rows_read_ahead_stay_unread_in_the_saved_state_until_the_compaction():
    # Stopped after the first result, the assistant turn and a call each: both read ahead.
    saves: list = []
    audit, store = _run(with_calls=True, stop_after=4, saves=saves)
    assert "727.3" in audit.known and "oberland" in audit.known_names
    saved = audit.to_state()
    assert [kind for _, kind in saved["unread"]] == ["result", "raw"]
    # The lists saved before are saved again, not copied anew: they grow at the read that
    # empties `unread`.
    assert saved["known"] is saves[0]["known"] and saved["known"] == []
    resumed = SourceAudit(store, "s", lambda event: None)
    resumed.from_state(saved)
    resumed.read_archive()  # a resumed run reads them again
    audit.read_archive()
    for name in ("known", "known_names", "source_marks", "person_marks"):
        assert getattr(resumed, name) == getattr(audit, name)
    assert resumed.to_state() == audit.to_state()
    assert audit.to_state()["unread"] == [] and "727.3" in audit.to_state()["known"]


def test_a_person_message_is_not_read_ahead_nor_what_follows_it():
    # Up to the person's message and the call after it: it waits for read_archive.
    audit, store = _run(with_calls=True, stop_after=6)
    assert audit.statements == []
    assert [kind for _, kind in audit.unread] == ["result", "raw", "person"]
    ref = store.archive("s", 4, "tool", "South 31.7 MW")
    audit.observe(ToolResult(call_id="c9", name="fetch_document", ref=ref, turn=4))
    audit.read_ahead()
    assert "31.7" not in audit.known  # after the person's message: waits with it
    audit.read_archive()
    assert "31.7" in audit.known and audit.statements == ["you must report in GW only"]
