"""No summary call whose text cannot reach an agent request (C7, C20), on a brief written as
a stranger writes one: a 59 000-character Spanish brief with its requirements in the
middle, then a correction, a Japanese follow-up and an English bullet list, between ten
document fetches.

Two ways a summary call was wasted there, each now avoided before the call is made:
- the brief is far over the person's share, so the words block is cut to its floor to fit;
  after a compaction it gets its share back and fitting the next request shrinks the
  summary first, so a summary sized beside the floored words was dropped unread;
- a faithful model copies the whole brief into the task overview (it is asked for "the
  user's goal and every constraint"), which the engine never cuts: the summary was longer
  than its zone, refused, and both of its calls (cut, then asked again) were wasted.

The person's condensed words are asked for with a summary-kind request too (counted in
summary_calls, never in unused_summaries); whether their answers reach a request is the
words block's business, not read here.
"""
import pytest

from agents.compaction.summary import budget_lines
from agents.config import ContextConfig
from agents.events import EventType
from agents.protocol import WORDS_MARKER
from agents.sim.summarizer import SummaryPlayer

from .helpers import run_scenario
from .stranger import stranger_brief


def stranger(summarizer: str) -> dict:
    # Lettered notes: the brief stays far over the share once its repeats are given once.
    return stranger_brief(summarizer, notes=700, fetches=10, name="stranger-es",
                          requirement_first=True, lettered=True)


def is_words_request(call: dict) -> bool:
    return any(WORDS_MARKER in str(m.get("content") or "") for m in call["messages"])


def unused_read_from_requests(calls: list[dict]) -> int:
    """Compaction summary calls whose answer no later agent request carried, read from the
    requests: a cut answer is asked again, never read; a read one is carried in the summary
    section of the next agent request, or nowhere."""
    unused = 0
    for i, call in enumerate(calls):
        if call["kind"] != "summary" or is_words_request(call):
            continue
        later = next((c for c in calls[i + 1:] if c["kind"] == "agent" and not c.get("refused")),
                     None)
        unused += (call["finish_reason"] == "length" or later is None
                   or not later["zones"].get("summary"))
    return unused


@pytest.mark.parametrize("summarizer", ["faithful", "lossy", "hostile"])
@pytest.mark.parametrize("window", [4096, 8000, 32_000])
def test_every_summary_call_on_a_stranger_brief_reaches_an_agent_request(window, summarizer):
    config = ContextConfig(tools=["fetch_document"]) if window < 16_000 else None
    out = run_scenario(stranger(summarizer), window=window, config=config)
    report = out.run.report
    assert report["status"] == "finished", report["error"]
    calls = out.payloads(EventType.MODEL_CALL)
    assert unused_read_from_requests(calls) == 0
    assert report["unused_summaries"] == 0
    assert report["over_window_requests"] == 0


def test_a_brief_longer_than_the_summary_zone_gets_an_overview_budget_and_is_summarised():
    out = run_scenario(stranger("faithful"), window=32_000)
    compactions = [c for c in out.payloads(EventType.COMPACTION)
                   if c["kind"] == "summary" and c["summary_calls"]]
    assert compactions and not any(c["fallback"] for c in compactions)
    asked = [c for c in out.payloads(EventType.MODEL_CALL)
             if c["kind"] == "summary" and not is_words_request(c)]
    assert all("- task_overview: at most" in str(c["messages"][0]["content"]) for c in asked)
    # Asked once each: the answer kept to its budgets and was not cut by its output limit.
    assert [c["finish_reason"] for c in asked] == ["stop"] * len(compactions)
    agent = [c for c in out.payloads(EventType.MODEL_CALL) if c["kind"] == "agent"]
    assert agent[-1]["zones"].get("summary")


def test_the_overview_budget_is_stated_only_when_given():
    assert not any("task_overview" in line for line in budget_lines(2000))
    assert "- task_overview: at most 900 tokens (about 22 lines)" in budget_lines(2000, 900)
    # A zone too small for section budgets still states the overview's.
    assert budget_lines(500, 300)[1:] == ["- task_overview: at most 300 tokens (about 7 lines)"]


def test_the_simulated_model_keeps_to_budgets_stated_in_instructions_read_apart():
    # The chunked summary request's opening system message states the budgets; the
    # simulator reads the messages after it, and the budgets there bind all the same.
    person = {"role": "user", "content": " ".join(f"Frase número {i} del encargo." for i in
                                                  range(200))}
    instructions = {"role": "system",
                    "content": "\n".join(["Summarise.", *budget_lines(500, 100)])}
    free = SummaryPlayer().answer([person])
    bound = SummaryPlayer().answer([person], instructions=instructions)
    assert len(bound["task_overview"]) < len(free["task_overview"])
    assert sum(len(item) for item in bound["task_overview"]) <= 100 * 3


@pytest.mark.parametrize("summarizer", ["faithful", "lossy", "hostile"])
@pytest.mark.parametrize("window", [2048, 4096])
def test_no_summary_is_asked_for_a_room_that_holds_no_line_of_one(window, summarizer):
    # Numbered notes: the person's words take most of the request, and a compaction once
    # asked for a summary with 71 tokens of room, less than the summary's frame and one
    # line: every line the model wrote was dropped to fit, and the next request carried an
    # empty summary (hostile at 4096).
    scenario = stranger_brief(summarizer, notes=700, fetches=10, name="stranger-numbered",
                              requirement_first=True)
    out = run_scenario(scenario, window=window, config=ContextConfig(tools=["fetch_document"]))
    report = out.run.report
    assert report["status"] == "finished", report["error"]
    assert unused_read_from_requests(out.payloads(EventType.MODEL_CALL)) == 0
    assert report["unused_summaries"] == 0
    compactions = [c for c in out.payloads(EventType.COMPACTION)
                   if c["kind"] == "summary" and c["summary_calls"] and not c["fallback"]]
    assert all(c["summary_after"] for c in compactions)
