"""Names in a summary that no archived message holds, in the drawer and the report."""
from __future__ import annotations

import pytest

from taskos.drawer.base import render_panel
from taskos.drawer.events import load_events
from taskos.drawer.panels import CompactionsPanel
from taskos.replays.compare import stored_report

from .factories import add_events, compaction

pytestmark = pytest.mark.django_db


def test_a_name_no_archived_message_holds_is_shown_and_counted(session):
    (event,) = add_events(session, compaction())
    add_events(session, ("AUDIT", {
        "compaction_seq": event.seq, "compaction_turn": 1, "call": 7, "ok": False,
        "statements_checked": 0, "missing_statements": [], "unsupported_figures": [],
        "unsupported_count": 0, "unsupported_names": ["report_final.xlsx", "华东区报告"]}))
    panel = CompactionsPanel()
    events = load_events(session, panel.event_types)
    html = render_panel(panel, session, events)
    assert "found in no archived message or tool result: report_final.xlsx" in html
    assert "华东区报告" in html and 'class="audit audit-failed"' in html
    report = stored_report(session)
    assert report["audit_failures"] == 1 and report["unsupported_names"] == 2
