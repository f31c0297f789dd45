"""A person's requirements that alone are more than any request can carry (C19, C1).

Pasted mid-session, a list of hundreds of "must" sentences made every request need more
than the window before any history, and the preflight failed a session that was running
well. Now the session goes on: each request carries the newest messages' requirements
that fit, in order, every message says in the block what it leaves out and where its full
text is, the drawer is told once, and the words check reports every call that misses one.
Nothing is lost: the whole message is in the archive.
"""
from agents.config import ContextConfig
from agents.events import EventType
from agents.words.person import CONSTRAINTS_CUT

from .helpers import run_scenario

REQUIREMENTS = " ".join(f"Requirement {i}: section {i} must cite source {i % 17} and stay "
                        f"under {3 + i % 5} paragraphs." for i in range(600))


def scenario(summarizer: str) -> dict:
    fetch = [{"tool": "fetch_document", "args": {"tokens": 700, "topic": f"t{i}"}}
             for i in range(8)]
    return {"name": "pasted-requirements", "goal": "Write the sales report. It must be in English.",
            "steps": [*fetch[:3], {"user": REQUIREMENTS}, *fetch[3:], {"final": "done"}],
            "summarizer": summarizer}


def test_a_pasted_list_of_requirements_past_the_window_does_not_end_the_session():
    out = run_scenario(scenario("faithful"), window=8000,
                       config=ContextConfig(tools=["fetch_document"]))
    report = out.run.report
    assert report["status"] == "finished", report.get("error")
    calls = out.payloads(EventType.MODEL_CALL)
    assert not any(c["over_window"] for c in calls)
    assert max(c["input_tokens"] for c in calls) <= 8000
    told = [e for e in out.payloads(EventType.ERROR) if e["code"] == "words_over_window"]
    assert len(told) == 1 and not told[0]["fatal"]
    assert "each request carries the newest messages' requirements that fit" in told[0]["message"]
    # The requests after the message say in the block what it leaves out, and where it is.
    marker_start = CONSTRAINTS_CUT.split("{")[0]
    after = [c for c in calls if c["kind"] == "agent"
             and any(marker_start in str(m.get("content")) for m in c["messages"])]
    assert after, "no request carried the cut message's marker"
    block = next(str(m["content"]) for m in after[-1]["messages"]
                 if marker_start in str(m.get("content")))
    assert "Requirement 0: section 0 must cite source 0" in block  # in order, from the first
    assert "read_ref(ref=" in block
    # Every call that misses a requirement is reported; nothing is called kept that is not.
    assert report["person_words_kept"] < 1.0
    audits = [a for a in out.payloads(EventType.AUDIT) if a.get("words_missing")]
    assert audits and all(not a["ok"] for a in audits)
    # The whole message is in the archive, one read_ref away.
    refs = [e["ref"] for e in out.payloads(EventType.USER_MESSAGE) if e.get("ref")]
    assert any(out.store.read_ref("t1", ref) == REQUIREMENTS for ref in refs)


def test_without_room_for_any_of_the_persons_words_the_preflight_still_fails():
    # Every tool offered: their schemas alone (~1 900 tokens) leave a 2 048 window no room
    # for the person's words, so no request could ever be sent.
    out = run_scenario(scenario("faithful"), window=2048)
    assert out.run.report["status"] == "failed"
    failed = [e for e in out.payloads(EventType.ERROR) if e["code"] == "preflight_failed"]
    assert failed and failed[0]["fatal"] and "tool schemas" in failed[0]["message"]
