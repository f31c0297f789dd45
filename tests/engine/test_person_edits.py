"""A person's edit of an anchor is the person's words (C19, W4): archived as their message,
it supersedes the old text in the snapshot, the person's words and the summary, and the
audit reads it as a source (a figure only the edit states is supported)."""
from agents.compaction.words_check import listed_in_force
from agents.config import ContextConfig
from agents.events import EventType
from agents.store.memory import MemoryStore
from agents.words.person import PersonWords, without_superseded

from .helpers import run_scenario

OLD, NEW = "The memo must be at most 50k tokens", "The memo must be at most 65k tokens"


class EditingStore(MemoryStore):
    """A person edits (or removes) the budget anchor in the admin before turn 3."""

    def __init__(self, remove: bool = False) -> None:
        super().__init__()
        self.remove, self.edited = remove, False

    def take_user_messages(self, session_id, turn=0):
        if turn >= 3 and not self.edited:
            for anchor in self.load_anchors(session_id):
                if anchor.text == OLD:
                    anchor.source = "admin"
                    if self.remove:
                        anchor.active = False
                    else:
                        anchor.text = NEW
                    super().save_anchor(session_id, anchor)
                    self.edited = True
        return super().take_user_messages(session_id, turn)


def run(remove: bool = False):
    steps = [{"tool": "fetch_document", "args": {"tokens": 1600, "topic": f"topic {i}"}}
             for i in range(12)]
    scenario = {"name": "t", "goal": f"Write the memo. {OLD}.",
                "steps": steps + [{"final": "done"}]}
    store = EditingStore(remove)
    out = run_scenario(scenario, window=8000, store=store,
                       config=ContextConfig(clear_tool_results=False))
    assert store.edited
    return out, store


def zone(call, name):
    return "\n".join(m["content"] for m in call.payload["messages"] if m.get("zone") == name)


def later_agent_calls(out, turn=3):
    return [e for e in out.sink.of_type(EventType.MODEL_CALL)
            if e.payload["kind"] == "agent" and e.turn >= turn]


def constraints_listed(snapshot):
    """The snapshot's list of what is in force, as the audit reads it (casefolded)."""
    return "\n".join(listed_in_force(snapshot))


def test_an_admin_edit_is_archived_as_the_person_s_message_and_supersedes_everywhere():
    out, store = run()
    edits = [p for p in out.payloads(EventType.USER_MESSAGE) if p["source"] == "admin"]
    assert [p["text"] for p in edits] == [NEW]
    assert store.read_ref("t1", edits[0]["ref"]) == NEW
    calls = later_agent_calls(out)
    assert len(calls) >= 8
    for call in calls:
        words, snapshot = zone(call, "words"), zone(call, "snapshot")
        assert f'edited in the admin, replacing "{OLD}"' in words and NEW in words
        listed = constraints_listed(snapshot)
        assert NEW.casefold() in listed and OLD.casefold() not in listed
        assert f"(superseded) {OLD}" in snapshot
    summaries = [e.payload for e in out.sink.of_type(EventType.COMPACTION)
                 if e.turn >= 3 and e.payload["kind"] == "summary"]
    assert summaries
    for summary in summaries:  # the summarizer read 50k in the goal: it is not kept
        overview = summary["summary_after"].split("## Current state")[0]
        assert NEW in overview and OLD not in overview
    audits = [e.payload for e in out.sink.of_type(EventType.AUDIT) if e.turn >= 3]
    assert audits and all(a["ok"] for a in audits)
    assert all(a["statements_checked"] >= 1 for a in audits)  # the edit is a statement


def test_a_removal_is_named_superseded_and_the_summary_drops_it():
    out, _ = run(remove=True)
    notes = [p for p in out.payloads(EventType.USER_MESSAGE) if "no longer in force" in p["text"]]
    assert notes and notes[0]["source"] == "engine"  # not a statement of the person's
    for call in later_agent_calls(out):
        snapshot = zone(call, "snapshot")
        assert OLD.casefold() not in constraints_listed(snapshot)
        assert f"(superseded) {OLD}" in snapshot
        assert f'removing "{OLD}"' in zone(call, "words")
    for e in out.sink.of_type(EventType.COMPACTION):
        if e.turn >= 3 and e.payload["kind"] == "summary":
            assert OLD not in e.payload["summary_after"].split("## Current state")[0]
    audits = [e.payload for e in out.sink.of_type(EventType.AUDIT) if e.turn >= 3]
    assert audits and all(a["ok"] and not a["missing_statements"] for a in audits)


def test_superseded_texts_follow_the_edits_in_any_language():
    words = PersonWords()
    words.add(0, "arc:1", "预算不超过5万元。", "goal")
    words.add(2, "arc:2", "预算不超过8万元", "admin", replaces="预算不超过5万元")
    assert words.superseded() == ["预算不超过5万元"]
    items = ["预算不超过5万元。", "预算不超过8万元", "写一份报告"]
    assert without_superseded(items, words.superseded()) == ["预算不超过8万元", "写一份报告"]
    words.add(4, "arc:3", "预算不超过5万元", "admin", replaces="预算不超过8万元")  # set back
    assert words.superseded() == ["预算不超过8万元"]
    restored = PersonWords()
    restored.restore(words.to_state())
    assert restored.superseded() == ["预算不超过8万元"]
