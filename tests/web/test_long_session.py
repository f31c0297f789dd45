"""A finished 1000-turn session (issue 12): the page stays small and the transcript is
windowed, newest entries first on the page, older ones a request away."""
from __future__ import annotations

import re

import pytest
from django.utils import timezone

from taskos.runs.models import SessionEvent

from .factories import budget, compaction, model_call

pytestmark = pytest.mark.django_db

TURNS = 1000
PAGE_LIMIT = 300_000  # bytes of HTML for the finished session page


def turn_events(turn: int) -> list[tuple[str, dict]]:
    call_id = f"call_{turn}_0"
    args = {"sql": f"SELECT region, SUM(revenue) FROM sales WHERE month = {turn % 12 + 1}"}
    events = [
        budget(window=128_000, history=1500 + turn * 20),
        model_call(turn, 2000 + turn * 20, history=1500 + turn * 20),
        ("ASSISTANT_MESSAGE", {"content": f"Step {turn}: querying month {turn % 12 + 1}.",
                               "tool_calls": [{"id": call_id, "name": "sql_query",
                                               "arguments": str(args)}]}),
        ("TOOL_CALL", {"call_id": call_id, "name": "sql_query", "args": args}),
        ("TOOL_RESULT", {"call_id": call_id, "name": "sql_query", "original_chars": 900,
                         "kept_chars": 600, "original_tokens": 300, "kept_tokens": 200,
                         "truncated": False, "ref": f"arc:{turn}:3", "error": None,
                         "preview": "region,revenue\n" + "north,1234.5\n" * 12,
                         "conclusions": []}),
    ]
    if turn % 100 == 0:
        events.append(compaction(before_history=20_000, after_history=2000,
                                 summary_after=f"## Progress\n- {turn} months queried"))
    return events


@pytest.fixture
def long_session(session):
    rows, seq = [], 0
    events = [("USER_MESSAGE", {"text": session.goal, "source": "scenario"}, 0)]
    for turn in range(1, TURNS + 1):
        events.extend((kind, payload, turn) for kind, payload in turn_events(turn))
    events.append(("SESSION_FINISHED", {"status": "finished", "final_answer": "Done.",
                                        "turns": TURNS, "total_input_tokens": 1,
                                        "peak_input_tokens": 1, "compactions": 10}, TURNS))
    for seq, (kind, payload, turn) in enumerate(events, start=1):
        rows.append(SessionEvent(session=session, seq=seq, type=kind, payload=payload,
                                 turn=turn, at=timezone.now()))
    SessionEvent.objects.bulk_create(rows, batch_size=1000)
    session.status, session.turns = "finished", TURNS
    session.save()
    return session, seq


def transcript_seqs(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<article class="ev [^"]*" id="ev-(\d+)"', html)]


def test_a_finished_1000_turn_page_is_small_and_shows_the_newest_entries(ann_client,
                                                                          long_session):
    session, last = long_session
    html = ann_client.get(f"/sessions/{session.pk}/").content.decode()
    assert len(html.encode()) <= PAGE_LIMIT, f"{len(html.encode()):,} bytes"
    shown = transcript_seqs(html)
    assert shown[0] == last and shown == sorted(shown, reverse=True)  # the end, newest first
    assert 1 not in shown  # the start is not rendered up front


def test_older_entries_load_page_by_page_until_the_first(ann_client, long_session):
    session, last = long_session
    html = ann_client.get(f"/sessions/{session.pk}/").content.decode()
    seen = transcript_seqs(html)
    pages = 0
    while (older := re.search(r'hx-get="([^"]*/transcript\?before=\d+)"', html)):
        html = ann_client.get(older.group(1).replace("&amp;", "&")).content.decode()
        page = transcript_seqs(html)
        assert page and page[0] < seen[-1]  # strictly older, nothing repeated
        seen = seen + page
        pages += 1
    assert pages > 1 and seen[-1] == 1 and seen == sorted(set(seen), reverse=True)



def test_live_updates_skip_folded_panels_and_unfolding_brings_one_up_to_date(session):
    from taskos.drawer.stream import render_named_panels, render_update

    from .factories import add_events

    add_events(session, budget(), model_call(1, 900))
    after = 2
    add_events(session, budget(history=2500), model_call(2, 1900))
    everything = render_update(session, after).html
    assert 'id="panel-inspector-body"' in everything and 'id="panel-budget-body"' in everything
    only_budget = render_update(session, after, open_panels={"budget"}).html
    assert 'id="panel-budget-body"' in only_budget
    assert 'id="panel-inspector-body"' not in only_budget and 'id="panel-curve-body"' not in only_budget
    unfolded = render_named_panels(session, {"inspector"})
    assert 'id="panel-inspector-body"' in unfolded and 'hx-swap-oob="true"' in unfolded
    assert 'data-call="2"' in unfolded and 'id="panel-budget-body"' not in unfolded
