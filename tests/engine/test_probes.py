"""Probe questions after a compaction (issue 11 item 5), against the simulated model.

The simulated model answers the probes with its own code (agents/sim/probe_answers.py,
which imports nothing from the engine): it can only answer what the new context holds,
so a summarizer that drops facts shows up as a lower recovery rate.
"""
from __future__ import annotations

from agents.compaction.probes import Probe, answers_by_number, build_probes, figure_lines, grade
from agents.config import ContextConfig, ModelProfile
from agents.events import EventType
from agents.scenarios import load_scenario

from .helpers import run_scenario

WINDOW = 16_000


def probed(summarizer: str, probe_questions: bool = True):
    scenario = load_scenario("sales-report")
    scenario.summarizer = summarizer
    # Probes follow summaries: clearing, which needs no model call, would make room first.
    return run_scenario(scenario, window=WINDOW, profile=ModelProfile(
        name="sim", context_size=WINDOW, probe_questions=probe_questions),
        config=ContextConfig(clear_tool_results=False))


def probe_requests(outcome) -> list[dict]:
    return [body for body in outcome.transport.requests
            if str(body["messages"][-1].get("content", "")).startswith("[taskos:probe-questions]")]


def test_each_compaction_is_probed_and_graded_against_the_archive():
    outcome = probed("faithful")
    compactions = [p for p in outcome.payloads(EventType.COMPACTION) if not p.get("noop")]
    probed_ones = [c for c in compactions if c.get("probe")]
    assert probed_ones and len(probe_requests(outcome)) == len(probed_ones)
    report = outcome.run.report["probe_recovery"]
    assert [r["rate"] for r in report] == [c["probe"]["rate"] for c in probed_ones]
    probe = probed_ones[0]["probe"]
    kinds = {p["kind"] for p in probe["probes"]}
    assert {"constraint", "figure"} <= kinds
    for item in probe["probes"]:
        if item["kind"] == "figure":  # the expectation is read back from the archive
            assert item["expected"] in outcome.store.read_ref("t1", item["source"])
    assert probe["recovered"] == sum(p["recovered"] for p in probe["probes"])
    assert probe["rate"] == round(probe["recovered"] / probe["asked"], 3)
    # Recorded as its own kind of call, never as an agent turn.
    calls = outcome.payloads(EventType.MODEL_CALL)
    assert sum(c["kind"] == "probe" for c in calls) == len(probed_ones)


def test_the_probe_sees_only_the_new_context():
    outcome = probed("faithful")
    [compaction] = [c for c in outcome.payloads(EventType.COMPACTION) if c.get("probe")][:1]
    [body] = probe_requests(outcome)[:1]
    sent = "\n".join(str(m.get("content") or "") for m in body["messages"])
    assert "tools" not in body
    compacted = [outcome.store.read_ref("t1", ref) for ref in compaction["refs"]]
    long_results = [text for text in compacted if text and len(text) > 400]
    assert long_results and not any(text in sent for text in long_results)
    assert "<system-info>" in sent  # the summary that replaced them is there


def test_a_lossy_summarizer_recovers_less_than_a_faithful_one():
    faithful = probed("faithful").run.report["probe_recovery"]
    lossy = probed("lossy").run.report["probe_recovery"]
    assert len(faithful) == len(lossy) >= 1
    mean = lambda rows: sum(r["rate"] for r in rows) / len(rows)
    assert mean(lossy) < mean(faithful)


def test_probes_are_off_unless_the_profile_asks():
    outcome = probed("faithful", probe_questions=False)
    assert not probe_requests(outcome)
    assert outcome.run.report["probe_recovery"] == []
    assert all("probe" not in c for c in outcome.payloads(EventType.COMPACTION))


def test_probes_are_built_from_statements_results_and_open_tasks():
    probes = build_probes(
        statements=["The final report must stay under 120 words"],
        compacted_texts=[("arc:s:4", "region,revenue\nNorth,1204.50\nSouth,880.25"),
                         ("arc:s:5", "Loaded 460 rows, 9 columns"),
                         ("arc:s:6", "Loaded 460 rows, 9 columns")],  # asked once
        open_tasks=["Write the regional revenue table"])
    assert [p.kind for p in probes] == ["constraint", "figure", "figure", "task"]
    assert (probes[1].expected, probes[1].source) == ("1204.50", "arc:s:4")
    assert (probes[2].expected, probes[2].source) == ("460", "arc:s:6")
    assert "120" not in probes[0].question  # the question points, it does not answer
    assert figure_lines("Document id 58347b6c\nwatts 9") == []  # ids and small counts


def test_grading_needs_the_figure_and_the_constraints_numbers():
    probes = [Probe("constraint", "q", "The final report must stay under 120 words"),
              Probe("figure", "q", "1,204.50"), Probe("task", "q", "Write the revenue table"),
              Probe("figure", "q", "880")]
    result = grade(probes, "1. The final report must stay under 200 words.\n"
                           "2. North had 1204.5 in revenue\n3. write the revenue table\n"
                           "4. unknown")
    assert [p["recovered"] for p in result["probes"]] == [False, True, True, False]
    assert (result["recovered"], result["asked"], result["rate"]) == (2, 4, 0.5)
    assert result["by_kind"]["figure"] == {"recovered": 1, "asked": 2}


def test_unnumbered_answers_are_read_one_per_line():
    assert answers_by_number("first\n\nsecond", 3) == ["first", "second", ""]
    assert answers_by_number("2) b\n1. a\n7. out of range", 2) == ["a", "b"]


def test_an_answer_that_only_echoes_the_questions_own_words_recovers_nothing():
    # SmolLM2-135M's answers on the real lane, graded recovered before this rule
    from agents.compaction.probes import Probe, recovered

    question = "What rule did the person set that mentions: delete, file, write? Quote it."
    probe = Probe("constraint", question, "Never write or delete any file")
    assert not recovered(probe, "The person set that mentions: delete, file, write")
    assert not recovered(probe, "The person set that mentioned: delete, file, write")
    assert not recovered(probe, question)
    assert recovered(probe, "Never write or delete any file.")
    figure = Probe("figure", 'What figure was found for "sales.csv"?', "29368")
    assert not recovered(figure, 'What figure was found for "sales.csv"?')
    assert recovered(figure, 'The figure found for "sales.csv" was 29368')
