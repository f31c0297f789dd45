"""The notes tool (feature T3) and render_notes, which the task snapshot shows every turn."""
from __future__ import annotations

from agents.events import EventType
from agents.tools.notes import MAX_ENTRIES, render_notes


def test_a_full_notepad_renders_every_section(call, store, sink):
    assert call("notes", action="set", section="objective",
                text="Quarterly sales report for 2025-2026").content == "Objective set."
    assert call("notes", action="set", section="plan",
                steps=["Explore sales.csv", "Count missing values", "Analyse", "Write report"]
                ).content == "Plan set: 4 steps; current step 1."
    assert call("notes", action="set", section="current_step", index=2).content == \
        "Current step: 2 of 4 (Count missing values)."
    assert call("notes", action="add", section="findings", text="revenue missing: 4 of 460 (0.9%)",
                source="csv_describe, turn 3").content == "Added finding 1."
    assert call("notes", action="add", section="data_points", text="East Jan-Oct 2026: 3818320.26 EUR",
                source="arc:s1:12").content == "Added data point 1."
    assert call("notes", action="add", section="open_questions",
                text="Is November 2026 final?").content == "Added open question 1."
    assert call("notes", action="add", section="ruled_out", text="Impute missing revenue with 0",
                reason="it biases the sums", evidence="arc:s1:9").content == "Added ruled-out approach 1."
    expected = (
        "Objective: Quarterly sales report for 2025-2026\n"
        "Plan (step 2 of 4):\n"
        "  1. [done] Explore sales.csv\n  2. [current] Count missing values\n  3. Analyse\n"
        "  4. Write report\n"
        "Findings:\n  1. revenue missing: 4 of 460 (0.9%) (source: csv_describe, turn 3)\n"
        "Data points:\n  1. East Jan-Oct 2026: 3818320.26 EUR (source: arc:s1:12)\n"
        "Open questions:\n  1. Is November 2026 final?\n"
        "Ruled out:\n  1. Impute missing revenue with 0 — it biases the sums (evidence: arc:s1:9)")
    assert render_notes(store.load_notes("s1")) == expected
    assert call("notes", action="show").content == expected
    event = sink.of_type(EventType.NOTES_CHANGED)[-1]
    assert event.payload == {"notes": store.load_notes("s1")} and event.turn == 4


def test_remove_and_plan_step_bookkeeping(call, store):
    call("notes", action="set", section="plan", steps=["a", "b", "c"])
    call("notes", action="set", section="current_step", index=3)
    assert call("notes", action="remove", section="plan", index=1).content == "Removed plan step 1: a"
    assert store.load_notes("s1")["current_step"] == 2  # still pointing at "c"
    call("notes", action="add", section="findings", text="x", source="y")
    assert call("notes", action="remove", section="findings", index=1).content == \
        "Removed finding 1: x (source: y)"


def test_mistakes_get_clear_messages(call):
    assert call("notes", action="show").content == "The notepad is empty."
    assert call("notes", action="add", section="objective", text="x").error == "Use action 'set' for objective."
    assert call("notes", action="set", section="findings", text="x").error == (
        "Use action 'add' or 'remove' for findings; 'set' works on objective, plan and current_step.")
    assert call("notes", action="set", section="current_step", index=1).error == (
        "There is no plan yet; set one with section='plan' and `steps`.")
    assert call("notes", action="add", section="ruled_out", text="x").error == (
        "A ruled-out approach needs a `reason` (and an `evidence` ref if you have one).")
    assert call("notes", action="remove", section="open_questions", index=1).error == \
        "open_questions is empty; nothing to remove."
    assert call("notes", action="add", section="findings", text="x" * 501).error == (
        "The finding is 501 characters; keep notes under 500 and put long material in a file "
        "(write_file) or cite its ref.")
    assert call("notes", action="add").error == (
        "section must be one of objective, current_step, plan, findings, data_points, "
        "open_questions, ruled_out (got None).")


def test_lists_are_capped(call):
    for i in range(MAX_ENTRIES):
        call("notes", action="add", section="open_questions", text=f"q{i}")
    assert call("notes", action="add", section="open_questions", text="one more").error == \
        f"open_questions is full ({MAX_ENTRIES} entries); remove one first."


def test_render_of_an_empty_notepad_is_empty():
    assert render_notes({}) == ""
