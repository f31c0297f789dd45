"""The E3 audit in the drawer and failure reasons on the session (issue 13 §4)."""
from __future__ import annotations

import json

import pytest

from taskos.drawer.base import render_panel
from taskos.drawer.events import load_events
from taskos.drawer.panels import CompactionsPanel
from taskos.replays.compare import stored_report
from taskos.runs.models import Session

from .factories import add_events, compaction

pytestmark = pytest.mark.django_db


def audit(seq: int, ok: bool, missing=(), figures=()) -> tuple[str, dict]:
    return ("AUDIT", {"compaction_seq": seq, "compaction_turn": 1, "call": 7, "ok": ok,
                      "statements_checked": 2, "missing_statements": list(missing),
                      "unsupported_figures": list(figures), "unsupported_count": len(figures)})


def test_a_failed_audit_of_the_request_sent_is_red_in_the_compaction_panel(session):
    first, second = add_events(session, compaction(), compaction("budget"))
    add_events(session, audit(first.seq, True),
               audit(second.seq, False, ["Do not delete any files"], ["7,777,777"]))
    panel = CompactionsPanel()
    events = load_events(session, panel.event_types)
    context = panel.get_context(session, events)
    html = render_panel(panel, session, events)
    latest, older = context["rows"]
    assert latest["audit_ok"] is False and older["audit_ok"] is True
    assert latest["missing_statements"] == ["Do not delete any files"]
    assert 'class="flag flag-bad audit-failed"' in html and 'class="audit audit-failed"' in html
    assert "missing from the request sent next (call 7): Do not delete any files" in html
    assert "found in no archived message or tool result: 7,777,777" in html
    assert panel.badge(context) == "2 · 1 audit failed"


def test_the_archive_audit_overrides_the_engines_own_check(session):
    (event,) = add_events(session, compaction())  # the engine's check said ok
    add_events(session, audit(event.seq, False, figures=["1,234,567"]))
    report = stored_report(session)
    assert report["audit_failures"] == 1 and report["unsupported_figures"] == 1


def test_the_failure_reason_reaches_the_session_and_its_page(make_session, ann, ann_client, tmp_path):
    from taskos.worker.execute import execute_session

    scenario = tmp_path / "big-system.json"
    scenario.write_text(json.dumps({
        "name": "big-system", "goal": "Say hello.", "window": 2048,
        "system": "Follow the house style guide and cite every source you use. " * 200,
        "steps": [{"final": "hello"}]}))
    session = make_session(owner=ann, goal="Say hello.", scenario=str(scenario), window=2048,
                           status=Session.Status.QUEUED)
    report = execute_session(session)
    session.refresh_from_db()
    assert report["status"] == "failed" and session.status == "failed"
    assert session.error.startswith("preflight_failed: Every request needs")
    assert "system prompt" in session.error and "What to do:" in session.error
    assert "stopped without a final answer" not in session.error
    html = ann_client.get(f"/sessions/{session.pk}/").content.decode()
    assert 'class="failure-reason"' in html and "preflight_failed: Every request needs" in html


def test_a_failure_without_a_message_falls_back_to_the_fatal_event(make_session, ann):
    from taskos.worker.execute import failure_reason

    session = make_session(owner=ann)
    add_events(session, ("ERROR", {"code": "turn_limit", "message": "no final answer after 4 turns",
                                   "fatal": True}))
    reason = failure_reason(session, {"error": ""})
    assert reason.startswith("turn_limit: no final answer after 4 turns.")
    assert failure_reason(make_session(owner=ann), {}).startswith("The engine stopped")
