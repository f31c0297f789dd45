from agents.context.snapshot import render_snapshot
from agents.counting.tokens import count_text
from agents.store.interface import AnchorRecord, TaskRecord


def test_tier1_and_admin_edits_survive_a_tiny_budget_while_key_data_is_cut():
    anchors = [AnchorRecord(tier=1, text="The report must include a table", id=1),
               *[AnchorRecord(tier=2, text=f"region {i} revenue fell {i}%", source="tool", id=10 + i)
                 for i in range(40)],
               AnchorRecord(tier=2, text="report every figure in EUR", source="admin", id=99)]
    text = render_snapshot(goal="Analyse sales.", anchors=anchors, tasks=[], notes_text="",
                           budget_tokens=60, count=count_text)
    assert "must include a table" in text and "report every figure in EUR" in text
    assert "region 0 revenue" not in text  # optional key data did not fit


def test_tasks_and_newest_key_data_are_shown_when_they_fit():
    anchors = [AnchorRecord(tier=2, text="old finding 1", source="tool", id=1),
               AnchorRecord(tier=2, text="new finding 2", source="tool", id=2)]
    tasks = [TaskRecord(id="1", subject="load data", state="completed"),
             TaskRecord(id="2", subject="write report", state="in_progress")]
    text = render_snapshot(goal="G", anchors=anchors, tasks=tasks, notes_text="Plan: step 2",
                           budget_tokens=500, count=count_text)
    assert text.index("new finding 2") < text.index("old finding 1")
    assert "Done: #1 load data" in text and "In progress: #2 write report" in text
    assert "Plan: step 2" in text


def test_a_long_goal_shows_its_beginning_within_its_share_of_the_snapshot():
    from agents.context.snapshot import GOAL_CHARS, goal_text

    brief = "Prepara un informe de ventas. " + " ".join(
        f"(nota {i}) Los clientes valoran la rapidez de entrega." for i in range(300))
    shown = goal_text(brief, count_text, tokens=100)
    assert shown.endswith(" …") and brief.startswith(shown[:-2])
    assert count_text(shown[:-2]) <= 100 < count_text(brief[:GOAL_CHARS])
    assert not shown[:-2].endswith(("(no", "Los cl"))  # cut after a word
    # Without a cap only GOAL_CHARS; a goal within both is shown whole.
    assert goal_text(brief, count_text) == brief[:GOAL_CHARS].rstrip().rsplit(" ", 1)[0] + " …"
    assert goal_text("Write the memo.", count_text, tokens=100) == "Write the memo."
    snapshot = render_snapshot(goal=brief, anchors=[], tasks=[], notes_text="", budget_tokens=200,
                               count=count_text, goal_tokens=100)
    assert f"Goal: {shown}\n" in snapshot
