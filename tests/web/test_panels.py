"""Drawer panels: the context each builds from stored events, and the HTML it renders."""
from __future__ import annotations

import re

import pytest
from django.template.loader import render_to_string

from taskos.drawer.base import render_panel
from taskos.drawer.events import load_events
from taskos.drawer.panels import (AnchorsPanel, BudgetPanel, CompactionsPanel, CostPanel,
                                  CurvePanel, ErrorsPanel, HintsPanel, InspectorPanel, TasksPanel)
from taskos.drawer.panels.compactions import read_compaction, summary_diff
from taskos.drawer.panels.cost import compacted_away_share
from taskos.runs.models import Anchor, Task

from .factories import add_events, budget, compaction, model_call

pytestmark = pytest.mark.django_db


def panel_view(panel, session):
    events = load_events(session, panel.event_types)
    return panel.get_context(session, events), render_panel(panel, session, events)


def test_budget_shows_latest_zones_with_trigger_and_band(session):
    add_events(session, budget(history=1000), budget(history=4000, summary=600))
    context, html = panel_view(BudgetPanel(), session)
    data = context["budget"]
    assert data["input_tokens"] == 300 + 200 + 600 + 4000 + 50
    history = next(s for s in data["segments"] if s["zone"] == "history")
    assert history["tokens"] == 4000 and history["width"] == 50.0
    assert data["trigger_pct"] == 80.0 and data["warning_pct"] == 60.0
    assert data["band_pct"] == 20.0 and data["in_warning"] and not data["over_trigger"]
    assert 'class="seg zone-history" style="width: 50%"' in html
    assert 'class="line trigger" style="left: 80%"' in html
    assert "4,000" in html and "warning band" in html


def test_budget_shows_the_persons_words_zone_between_snapshot_and_summary(session):
    add_events(session, budget(words=120, summary=600))
    context, html = panel_view(BudgetPanel(), session)
    zones = [s["zone"] for s in context["budget"]["segments"]]
    assert zones.index("snapshot") < zones.index("words") < zones.index("summary")
    assert next(s for s in context["budget"]["segments"] if s["zone"] == "words")["tokens"] == 120
    assert 'class="seg zone-words"' in html and '<i class="swatch zone-words"></i>words' in html


def test_curve_scale_fits_the_data_and_the_full_window_is_an_option(session):
    add_events(session, budget(window=128_000), model_call(1, 9000), model_call(2, 12_000))
    context, html = panel_view(CurvePanel(), session)
    scales = dict(context["curve"]["scales"])
    fitted, full = scales["fitted"], scales["full"]
    # Fitted: the peak reaches near the top (y 12 is the top edge), the window is off scale.
    assert fitted["peak_y"] < 40 and fitted["window_y"] is None
    assert "above this scale" in html and "data-curve-full" in html
    # Full window: the same peak sits low, under the window line.
    assert full["peak_y"] > 140 and full["window_y"] is not None


def test_a_zone_over_its_budget_is_flagged_with_a_reason(session):
    # 3 950 tokens in, the warning band from 3 600: the zones past their share are what
    # compaction will take from.
    add_events(session, budget(window=6000, summary=1400, history=2000))
    context, html = panel_view(BudgetPanel(), session)
    summary = next(s for s in context["budget"]["segments"] if s["zone"] == "summary")
    assert summary["over"] == "summary 1,400 / 1,000: the rolling summary grew past its share."
    assert summary["free_room"] == ""
    assert 'class="over"' in html and html.count('class="over-reason"') == 1
    assert "past share" not in html


def test_a_zone_past_its_share_far_from_the_trigger_is_not_red(session):
    """At small windows C1's scaled shares are smaller than one tool result (history 1 000
    at 8 000) or the snapshot's goal line, and a healthy run keeps zones past them on
    nearly every turn (long-200 at 8 000: history and snapshot on 200 of 201). While the
    request is short of the warning band the free room holds them: shown, not red."""
    add_events(session, budget(window=8000, snapshot=300, history=2500))
    context, html = panel_view(BudgetPanel(), session)
    segments = {s["zone"]: s for s in context["budget"]["segments"]}
    assert all(s["over"] == "" for s in segments.values())
    assert segments["history"]["free_room"] == (
        "history 2,500 / 2,000: past its share, held by free room: the request (3,150) is "
        "1,650 tokens short of the warning band (4,800).")
    assert segments["snapshot"]["free_room"].startswith("snapshot 300 / 250: past its share")
    assert segments["summary"]["free_room"] == ""  # within its share: nothing to say
    assert "over budget" not in html and 'class="over"' not in html and "over-reason" not in html
    assert html.count('class="tag free-room"') == 2 and html.count('<tr class="free-room"') == 2


def test_the_system_zone_is_fixed_not_over_budget(session):
    """No compaction changes the system prompt and tool schemas: past its default share
    (1 957 of 375 on sales-report at 6 000) it is shown as fixed with its size, not red."""
    add_events(session, budget(window=6000, system=1957))
    context, html = panel_view(BudgetPanel(), session)
    system = next(s for s in context["budget"]["segments"] if s["zone"] == "system")
    assert system["over"] == "" and system["fixed"].startswith("the system prompt and tool")
    assert "over budget" not in html and 'class="over"' not in html
    row = re.search(r'<tr><td><i class="swatch zone-system"></i>system(.*?)</tr>', html).group(1)
    assert 'class="tag fixed"' in row and "1,957" in row and ">fixed<" in row


def test_anchor_tiers_are_explained(session):
    context, html = panel_view(AnchorsPanel(), session)
    assert "T1</span> hard constraint" in html and "T3</span> temporary detail" in html


def test_budget_shows_how_the_figures_were_counted(session):
    name, payload = budget()
    add_events(session, (name, {**payload, "count_source": "calibrated", "correction": 1.1424}))
    context, html = panel_view(BudgetPanel(), session)
    assert context["budget"]["count_source"] == "calibrated"
    assert 'class="flag count-calibrated"' in html and "window divided by 1.1424" in html
    assert "ratio learnt from the provider" in html


def test_budget_says_why_the_figures_are_no_longer_exact(session):
    name, payload = budget()
    reason = "the server's tokenizer stopped answering (ReadTimeout: timed out)"
    add_events(session, (name, {**payload, "count_source": "estimate", "count_reason": reason}))
    context, html = panel_view(BudgetPanel(), session)
    assert context["budget"]["count_reason"] == reason
    assert "Not exact: the server&#x27;s tokenizer stopped answering" in html


def test_budget_without_events_says_so(session):
    context, html = panel_view(BudgetPanel(), session)
    assert context["budget"] is None and "No budget yet" in html


def test_curve_marks_summary_calls_and_draws_window_and_trigger(session):
    add_events(session, budget(), model_call(1, 1000), model_call(2, 5000),
               model_call(3, 6200, kind="summary"), model_call(4, 900), model_call(5, 9000, over=True))
    context, html = panel_view(CurvePanel(), session)
    curve = context["curve"]
    fitted = dict(curve["scales"])["fitted"]
    assert [p["kind"] for p in fitted["points"]] == ["agent"] * 2 + ["summary"] + ["agent"] * 2
    assert curve["peak"] == 9000 and curve["summaries"] == 1 and curve["over"] == 1
    # The sawtooth: the call after the summary is drawn lower than the one before it.
    assert fitted["points"][3]["y"] > fitted["points"][1]["y"]
    assert fitted["window_y"] is not None and fitted["trigger_y"] > fitted["window_y"]
    assert html.count("<circle") == 2 * 4 and html.count("<polygon") == 2 * 1  # two scales
    assert "window 8,000" in html and "trigger 6,400" in html and "1 over the window" in html


def test_compactions_rows_with_zones_diff_audit_and_refs(session):
    add_events(session, compaction(summary_after="## Goal\nsales\n## Progress\n- loaded"),
               compaction("budget", summary_before="## Goal\nsales\n## Progress\n- loaded",
                          summary_after="## Goal\nsales\n## Progress\n- loaded\n- grouped",
                          audit={"ok": False, "missing_anchors": ["budget ≤ 50k"],
                                 "snapshot_present": True, "missing_tasks": [],
                                 "unsupported_numbers": ["-13%"]}))
    context, html = panel_view(CompactionsPanel(), session)
    latest, first = context["rows"]
    assert (latest["number"], latest["trigger"], first["trigger"]) == (2, "budget", "rolling")
    assert {"op": "add", "text": "- grouped"} in latest["diff"]
    assert not latest["audit_ok"] and latest["missing_anchors"] == ["budget ≤ 50k"]
    assert "missing anchor: budget ≤ 50k" in html and "number not in the sources: -13%" in html
    assert "audit ok" in html and "audit failed" in html
    assert f"/sessions/{session.pk}/refs/arc:1:2" in html
    assert f"/sessions/{session.pk}/archive?first=1&amp;last=4" in html
    assert context["running_trigger"] is None
    # The newest in full; the one before it a line, its detail read when it is opened.
    assert "zones" not in first and html.count('<table class="zones') == 1
    first = read_compaction(session, 1)
    history = next(z for z in first["zones"] if z["zone"] == "history")
    assert (history["before"], history["after"], history["delta"]) == (5000, 800, -4200)
    assert first["diff"] == [{"op": "section", "text": "## Goal (new section)"},
                             {"op": "add", "text": "sales"},
                             {"op": "section", "text": "## Progress (new section)"},
                             {"op": "add", "text": "- loaded"}]
    assert read_compaction(session, 3) is None and read_compaction(session, 0) is None


def test_compaction_in_progress_is_shown_until_it_completes(session):
    add_events(session, ("COMPACTION_STARTED", {"trigger": "manual"}))
    panel = CompactionsPanel()
    context, html = panel_view(panel, session)
    assert context["running_trigger"] == "manual" and "Compacting (manual)" in html
    assert panel.badge(context) == "running…"


def test_summary_diff_marks_added_removed_and_gaps():
    before = "\n".join(f"line {i}" for i in range(10))
    after = before.replace("line 1", "line one").replace("line 8", "line eight")
    ops = summary_diff(before, after)
    assert {"op": "del", "text": "line 1"} in ops and {"op": "add", "text": "line one"} in ops
    assert summary_diff("same", "same") == []


def test_summary_diff_ignores_reordering_within_and_of_sections():
    before = ("## Constraints\n- output must include a table\n- use data up to October\n"
              "## Progress\n- loaded sales.csv\n- cleaned 3 rows")
    after = ("## Progress\n- cleaned 3 rows\n- loaded sales.csv\n- ran the regional query\n"
             "## Constraints\n- use data up to October\n- output must include a table")
    before, after = before + "\n## Files\n- sales.csv", after + "\n## Files\n- sales.csv"
    ops = summary_diff(before, after)
    # The kept constraint moved (and its section moved): not shown as removed.
    assert [op for op in ops if op["op"] in ("add", "del")] == [
        {"op": "add", "text": "- ran the regional query"}]
    assert {"op": "section", "text": "## Progress"} in ops
    assert ops[-1] == {"op": "gap", "text": "… 3 unchanged lines"}
    assert summary_diff(before, after.replace("- use data up to October\n", "")) [-3:-1] == [
        {"op": "section", "text": "## Constraints"},
        {"op": "del", "text": "- use data up to October"}]


def test_an_anchor_refresh_is_listed_but_not_counted(session):
    add_events(session, compaction("rolling"),
               compaction("anchor", before_history=800, after_history=800, refresh=True,
                          noop=True, summary_before="## Progress\n- loaded sales.csv",
                          archived_turns=[]))
    context, html = panel_view(CompactionsPanel(), session)
    assert context["count"] == 1 and "anchor refresh" in html


def test_a_clear_is_its_own_compaction_kind_with_the_tokens_it_saved(session):
    add_events(session, compaction("rolling"),
               compaction("rolling", kind="clear", tokens_saved=4200, summary_after="",
                          digests=["[cleared: fetch_document …]"] * 2))
    context, html = panel_view(CompactionsPanel(), session)
    clear, summary = context["rows"]
    assert (clear["cleared"], clear["tokens_saved"], summary["cleared"]) == (2, 4200, None)
    assert context["count"] == 2
    assert ">cleared</span>" in html and "2 tool results, 4,200 tokens saved" in html
    assert "No model call" in html and "summary diff" not in html
    opened = render_to_string("drawer/panels/_compaction_detail.html",
                              {"row": read_compaction(session, 1), "session": session})
    assert "summary diff" in opened and "No model call" not in opened


def test_anchors_current_rows_and_changes_by_source(session):
    Anchor.objects.create(session=session, tier=1, text="output must include a table")
    Anchor.objects.create(session=session, tier=2, text="region A sales -12%", source="admin")
    Anchor.objects.create(session=session, tier=3, text="old detail", active=False)
    add_events(session, ("ANCHOR_CHANGED", {"id": 1, "tier": 1, "old": None,
                                            "new": "output must include a table",
                                            "source": "user", "action": "added"}),
               ("ANCHOR_CHANGED", {"id": 2, "tier": 2, "old": "region A sales -10%",
                                   "new": "region A sales -12%", "source": "admin",
                                   "action": "changed"}, 3))
    panel = AnchorsPanel()
    context, html = panel_view(panel, session)
    assert [a["tier"] for a in context["anchors"]] == [1, 2]
    assert [a["text"] for a in context["inactive"]] == ["old detail"]
    assert context["active"] == 2 and context["admin_changes"] == 1
    assert context["changes"][0]["source"] == "admin" and panel.badge(context) == "2"
    assert 'data-source="admin"' in html and "<del>region A sales -10%</del>" in html
    # Folded by default, grouped by turn, newest turn first.
    assert "2 recent changes · 1 by admin</span>" in html
    assert html.index("<h4>turn 3</h4>") < html.index("<h4>turn 1</h4>")


def test_edits_by_people_stay_listed_when_a_busy_run_pushes_them_out_of_the_recent_changes(
        session):
    def tool_change(n):
        return ("ANCHOR_CHANGED", {"id": 100 + n, "tier": 2, "old": None, "new": f"fact {n}",
                                   "source": "tool", "action": "added"}, 10 + n)
    add_events(session,
               ("ANCHOR_CHANGED", {"id": 1, "tier": 1, "old": "report in USD",
                                   "new": "report in EUR", "source": "admin",
                                   "action": "changed"}, 4),
               ("ANCHOR_CHANGED", {"id": 2, "tier": 1, "old": None, "new": "cite every source",
                                   "source": "pin", "action": "added"}, 5),
               *[tool_change(n) for n in range(40)])
    context, html = panel_view(AnchorsPanel(), session)
    assert len(context["changes"]) == 30 and {c["source"] for c in context["changes"]} == {"tool"}
    assert [c["new"] for c in context["person_changes"]] == ["cite every source", "report in EUR"]
    people = html[html.index("Edits by people"):]
    assert '<li class="change" data-row' in people and "<ins>report in EUR</ins>" in people
    assert 'data-source="pin"' in people and "<del>report in USD</del>" in people
    assert "30 recent changes · 1 by admin</span>" in html


def test_tasks_from_database_and_changes_as_differences(session):
    Task.objects.create(session=session, task_id="1", subject="Load data", state="completed")
    Task.objects.create(session=session, task_id="2", subject="Group by region",
                        state="in_progress")
    add_events(session,
               ("TASKS_CHANGED", {"tasks": [{"id": "1", "state": "pending"}], "source": "agent"}),
               ("TASKS_CHANGED", {"tasks": [{"id": "1", "state": "completed"},
                                            {"id": "2", "state": "in_progress"}],
                                  "source": "admin"}))
    panel = TasksPanel()
    context, html = panel_view(panel, session)
    assert panel.badge(context) == "1/2"
    assert context["changes"][0] == {"seq": 2, "turn": 1, "source": "admin",
                                     "diff": ["#1 completed", "#2 in_progress"]}
    assert "Group by region" in html and 'data-source="admin"' in html


def test_hints_list_kinds_newest_first(session):
    add_events(session, ("HINT_BLOCK", {"kind": "time", "text": "Now: 2025-03-01 10:00 UTC"}),
               ("HINT_BLOCK", {"kind": "context", "text": "now 6100 tokens, compaction at 6400"}))
    context, html = panel_view(HintsPanel(), session)
    assert [h["kind"] for h in context["hints"]] == ["context", "time"]
    assert context["kinds"] == [("context", 1), ("time", 1)]
    assert "compaction at 6400" in html


def test_errors_show_cause_and_action_and_a_failure_without_event(session):
    add_events(session, ("ERROR", {"code": "context_length_exceeded",
                                   "message": "maximum context length is 8192 tokens",
                                   "cause": "The request was larger than the window.",
                                   "action": "Compacted and retried.", "fatal": False}))
    session.error = "Worker lost"
    context, html = panel_view(ErrorsPanel(), session)
    assert context["count"] == 1 and context["failure"] == "Worker lost"
    assert "Cause" in html and "Compacted and retried." in html and "Worker lost" in html


def test_inspector_shows_latest_call_messages_with_zone_and_tokens(session):
    add_events(session, model_call(1, 500), model_call(2, 700, messages=[
        {"role": "system", "zone": "system", "tokens": 300, "content": "You are TaskOS."},
        {"role": "user", "zone": "snapshot", "tokens": 250, "content": "Hard constraints: table"},
        {"role": "tool", "zone": "history", "tokens": 150, "content": "x" * 7000,
         "tool_call_id": "c1"}]))
    panel = InspectorPanel()
    context, html = panel_view(panel, session)
    detail = context["detail"]
    assert context["latest"] == 2 and detail["call"] == 2
    assert [(m["zone"], m["tokens"]) for m in detail["messages"]] == [
        ("system", 300), ("snapshot", 250), ("history", 150)]
    assert detail["messages"][2]["cut"] == 7000 - 1500
    assert dict(detail["zones"]) == {"system": 300, "snapshot": 250, "history": 150}
    # Recorded without request parameters (as before issue 12): the stored record only.
    # Following live, its link names the newest call ("latest"), so the bar does not
    # change with every call; a pinned call's names its number.
    assert f"/sessions/{session.pk}/calls/latest/record.json" in html
    assert "Hard constraints: table" in html and "Export request" not in html
    pinned = panel.get_context(session, load_events(session, panel.event_types), pinned=1)
    assert pinned["detail"]["call"] == 1
    pinned_html = render_to_string(panel.template, {**pinned, "session": session})
    assert f"/sessions/{session.pk}/calls/1/record.json" in pinned_html and "latest (2)" in pinned_html


def test_an_assistant_turn_that_only_calls_tools_shows_its_calls_not_null(session, ann_client):
    add_events(session, model_call(1, 500, messages=[
        {"role": "system", "zone": "system", "tokens": 300, "content": "You are TaskOS."},
        {"role": "assistant", "zone": "history", "tokens": 40, "content": None,
         "tool_calls": [{"id": "call_0_0", "type": "function", "function": {
             "name": "csv_describe", "arguments": '{"path": "sales.csv"}'}}]}]))
    context, html = panel_view(InspectorPanel(), session)
    assistant = context["detail"]["messages"][1]
    assert assistant["content"] == "" and assistant["preview"] == "csv_describe(…)"
    # The row's text comes when the row is opened (static/js/taskos.js loadMessage).
    # Named by the call it made (its key), on the page by its row's id, not by its place.
    assert assistant["key"] == "assistant-call_0_0"
    assert 'id="inspector-msg-assistant-call_0_0"' in html and "<pre" not in html
    text = ann_client.get(f"/sessions/{session.pk}/inspect/message?call=1"
                          "&message=assistant-call_0_0").content.decode()
    assert '<pre class="tool-call">csv_describe({' in text
    assert "null" not in html and "null" not in text
    # 300 + 40 + 3 priming + the provider's extra 157: the column adds up to the header.
    assert context["detail"]["parts_total"] == 500


def test_cost_per_zone_with_cached_prefix_and_compacted_history(session):
    profile = session.profile
    profile.price_input, profile.price_cached_input, profile.price_output = 2, 0.5, 8
    profile.save()
    add_events(session, model_call(1, 2550, history=2000, cached=400, cost=0.005),
               model_call(2, 4550, history=4000, cached=400, cost=0.009),
               compaction(before_history=4000, after_history=1000),
               model_call(3, 1550, history=1000, cost=0.003))
    context, html = panel_view(CostPanel(), session)
    zones = {z["zone"]: z for z in context["zones"]}
    assert context["totals"]["input"] == 2550 + 4550 + 1550
    assert zones["system"]["cached"] == 600 and zones["snapshot"]["cached"] == 200
    assert zones["history"]["tokens"] == 7000
    assert zones["history"]["cost"] == pytest.approx(7000 * 2 / 1e6)
    # Calls 1 and 2 sent 6000 history tokens; the compaction removed three quarters.
    assert context["wasted"] == 4500
    assert context["wasted_share"] == pytest.approx(4500 / 8650)
    assert context["totals"]["cost"] == pytest.approx(0.017)
    assert "$0.0170" in html and "history later compacted away" in html


def test_cached_tokens_fill_zones_in_layout_order(session):
    zones = {"system": 100, "snapshot": 50, "words": 30, "summary": 200, "history": 1000,
             "hints": 10}
    kind, payload = model_call(1, 1390, cached=400)
    add_events(session, (kind, {**payload, "zones": zones}))
    context, _ = panel_view(CostPanel(), session)
    assert {row["zone"]: row["cached"] for row in context["zones"]} == {
        "system": 100, "snapshot": 50, "words": 30, "summary": 200, "history": 20,
        "since": 0, "hints": 0}


def test_compacted_away_share_is_zero_without_compactions(session):
    add_events(session, model_call(1, 1000, history=500))
    calls = load_events(session, ["MODEL_CALL"])
    assert compacted_away_share(calls, []) == (0, 0.0)


def test_model_call_messages_stay_in_the_database_for_charting(session):
    add_events(session, model_call(1, 800))
    [event] = load_events(session, ["MODEL_CALL"])
    assert event.messages == []  # stored with two: left in the database
    assert event.zones["system"] == 300 and event.over_window is False


def test_older_compactions_shrink_to_one_line_each(session):
    add_events(session, *[compaction("rolling") for _ in range(11)],
               compaction("manual", noop=True, instructions="keep Q3"))
    context, html = panel_view(CompactionsPanel(), session)
    assert [row["number"] for row in context["rows"]] == [12, 11]  # RECENT
    assert [row["number"] for row in context["older"]] == list(range(10, 0, -1))
    assert "diff" not in context["older"][0] and "diff" not in context["rows"][1]
    assert context["rows"][0]["noop"] and "diff" in context["rows"][0]
    assert html.count('class="compaction-brief"') == 12 and "<span>10</span> earlier compactions" in html
    assert html.count('<article class="compaction"') == 1  # the newest in full
    assert "Focus: keep Q3" in html and "no-op" in html


def test_children_panel_lists_sub_agents_with_status_cost_and_answer_tokens(session,
                                                                           make_session):
    from taskos.drawer.panels import ChildrenPanel
    from taskos.runs.models import Session
    Session.objects.filter(pk=session.pk).update(cost=0.5)
    session.refresh_from_db()
    done = make_session(goal="Research regions", parent=session, status="finished",
                        cost=0.25, total_input_tokens=9000)
    make_session(goal="Grandchild", parent=done, status="finished", cost=0.125)
    make_session(goal="Research products", parent=session, status="running", cost=0.0)
    add_events(session, ("TOOL_RESULT", {"name": "delegate", "child": str(done.pk),
                                         "kept_tokens": 70}))
    context, html = panel_view(ChildrenPanel(), session)
    assert [c["status"] for c in context["children"]] == ["finished", "running"]
    assert context["children"][0]["cost"] == 0.375  # its own grandchild included
    assert context["total_cost"] == 0.875 and context["answers_tokens"] == 70
    assert "Research regions" in html and f'href="/sessions/{done.pk}/"' in html
    assert "status-running" in html and "with sub-agents" in html
    _, child_html = panel_view(ChildrenPanel(), done)
    assert f"Sub-agent of <a href=\"/sessions/{session.pk}/\">#{session.pk}</a>" in child_html


def test_budget_says_when_the_window_is_assumed(session):
    name, payload = budget()
    warning = ("Model 'my-llm' is unknown and profile 'x' sets no context size: TaskOS "
               "assumes 128,000 tokens.")
    add_events(session, (name, {**payload, "window_warning": warning}))
    context, html = panel_view(BudgetPanel(), session)
    assert context["budget"]["window_warning"] == warning
    assert 'class="flag flag-warn window-warning"' in html and "assumes 128,000 tokens" in html
    add_events(session, budget())  # a later turn of a profile with a known window
    context, html = panel_view(BudgetPanel(), session)
    assert "window-warning" not in html


def test_compactions_show_probe_recovery_and_how_the_summary_was_read(session):
    probe = {"asked": 2, "recovered": 1, "rate": 0.5, "by_kind": {}, "probes": [
        {"kind": "constraint", "question": "What rule mentions: report, words?",
         "expected": "The report must stay under 120 words", "source": "",
         "answer": "The report must stay under 120 words.", "recovered": True},
        {"kind": "figure", "question": 'What figure was found for "North revenue"?',
         "expected": "1204.50", "source": "arc:1:3", "answer": "unknown", "recovered": False}]}
    add_events(session, compaction(probe=probe, summary_forms=["text"]),
               compaction("budget", fallback=True,
                          fallback_reason="The summary answer is not valid JSON and names "
                                          "none of the C6 sections"))
    context, html = panel_view(CompactionsPanel(), session)
    latest, first = context["rows"]
    assert (first["probe_rate"], first["probe_recovered"], first["probe_asked"]) == (0.5, 1, 2)
    assert first["summary_from_text"] and not latest["probe_known"]
    assert "probes 1/2 recovered" in html and "summary read from text" in html
    opened = render_to_string("drawer/panels/_compaction_detail.html",
                              {"row": read_compaction(session, 1), "session": session})
    assert 'What figure was found for "North revenue"?' in opened.replace("&quot;", '"')
    assert "summary unusable: truncated" in html
    assert "The model's summary was unusable, so the oldest turns were truncated" in html


def test_a_failed_check_of_the_person_s_words_is_red_on_its_call(session):
    add_events(session, model_call(1, 500), model_call(2, 700),
               ("AUDIT", {"compaction_seq": 0, "call": 2, "ok": False,
                          "words_missing": ["never email the customer."],
                          "superseded_listed": ["at most 3 pages"]}))
    panel = InspectorPanel()
    context, html = panel_view(panel, session)
    assert [c["label"] for c in context["detail"]["failed_checks"]] == [
        "sentences of the person's missing from this request",
        "superseded text listed as a hard constraint"]
    assert 'class="flag flag-bad">check failed' in html
    assert "<q>never email the customer.</q>" in html
    first = panel.get_context(session, load_events(session, panel.event_types), pinned=1)
    assert first["detail"]["failed_checks"] == []  # only on the call it concerns


def test_a_words_check_failure_is_not_counted_as_a_compaction_s_audit(session):
    add_events(session, compaction(), model_call(1, 500),
               ("AUDIT", {"compaction_seq": 0, "call": 1, "ok": False,
                          "words_missing": ["never email the customer."]}))
    context, _ = panel_view(CompactionsPanel(), session)
    assert context["audit_failures"] == 0
