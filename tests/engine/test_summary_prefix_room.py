"""No summary call paid for and never used because the cached-prefix request left its
answer too little room (C20: `unused_summaries` stays 0).

The request that repeats the agent's prefix (cheap: cached) was made whenever it left the
summary's output room, and a model asked for a summary of the zone's size writes past it
by its JSON framing: the answer was cut, the units were asked again in chunks, and the
first call was never used (long-1000 at 4 096: 532 tokens of room, an answer of 544; the
stranger's 300-note brief at 4 096: 1 or 2 such calls per run).
"""
import pytest

from agents.config import ContextConfig
from agents.events import EventType

from .helpers import run_scenario
from .stranger import stranger_brief


@pytest.mark.parametrize("summarizer", ["faithful", "lossy", "hostile"])
@pytest.mark.parametrize("requirement_first", [True, False])
def test_no_summary_call_is_cut_and_asked_again(summarizer, requirement_first):
    out = run_scenario(stranger_brief(summarizer, notes=300, fetches=10, name="s",
                                      requirement_first=requirement_first),
                       window=4096, config=ContextConfig(tools=["fetch_document"]))
    report = out.run.report
    assert report["status"] == "finished"
    assert report["unused_summaries"] == 0
    cut = [c for c in out.payloads(EventType.MODEL_CALL)
           if c["kind"] == "summary" and c["finish_reason"] == "length"]
    assert cut == []
    assert report["person_words_kept"] == 1.0
