"""Resync view, inspector fragments, call export, archive refs and the session actions."""
from __future__ import annotations

import json

import pytest

from taskos.runs.models import ArchivedTurn, PendingMessage, Session

from .factories import add_events, budget, compaction, model_call

pytestmark = pytest.mark.django_db


def test_resync_sends_only_missing_transcript_but_every_panel(ann_client, session):
    add_events(session, ("USER_MESSAGE", {"text": "first message", "source": "scenario"}),
               budget(history=1000),
               ("USER_MESSAGE", {"text": "second message", "source": "user"}),
               budget(history=3000))
    response = ann_client.get(f"/sessions/{session.pk}/events?after=2")
    html = response.content.decode()
    assert response["X-Last-Seq"] == "4"
    assert "second message" in html and "first message" not in html
    assert 'hx-swap-oob="afterbegin:#transcript"' in html
    assert '<input type="hidden" id="last-seq" value="4" hx-swap-oob="true">' in html
    for panel in ("budget", "curve", "compactions", "anchors", "tasks", "hints", "inspector",
                  "errors", "cost"):
        assert f'id="panel-{panel}-body" class="panel-body" hx-swap-oob="true"' in html
    assert "3,000" in html  # the budget panel shows the latest zones
    assert 'id="session-status"' in html


def test_resync_rejects_a_bad_seq_with_a_message(ann_client, session):
    response = ann_client.get(f"/sessions/{session.pk}/events?after=abc")
    assert response.status_code == 400
    assert "'after' must be a whole number" in response.content.decode()


def test_resync_beyond_the_stored_record_resets_to_it(ann_client, session):
    add_events(session, budget())
    response = ann_client.get(f"/sessions/{session.pk}/events?after=99")
    assert response["X-Last-Seq"] == "1"


def test_call_record_has_every_message_with_zone_and_tokens(ann_client, session):
    add_events(session, model_call(1, 500), model_call(2, 900))
    # Recorded without request parameters: no exact body to export, the record remains.
    assert ann_client.get(f"/sessions/{session.pk}/calls/2.json").status_code == 410
    response = ann_client.get(f"/sessions/{session.pk}/calls/2/record.json")
    assert response["Content-Type"] == "application/json"
    assert "attachment" in response["Content-Disposition"]
    data = json.loads(response.content)
    assert data["call"] == 2 and data["input_tokens"] == 900 and data["session"] == session.pk
    assert [(m["zone"], m["tokens"]) for m in data["messages"]] == [("system", 300),
                                                                    ("snapshot", 200)]
    assert ann_client.get(f"/sessions/{session.pk}/calls/3.json").status_code == 404
    assert ann_client.get(f"/sessions/{session.pk}/calls/3/record.json").status_code == 404


def test_the_live_inspectors_latest_links_export_the_newest_call(ann_client, session):
    assert ann_client.get(f"/sessions/{session.pk}/calls/latest/record.json").status_code == 404
    add_events(session, model_call(1, 500), model_call(2, 900))
    response = ann_client.get(f"/sessions/{session.pk}/calls/latest/record.json")
    assert json.loads(response.content)["call"] == 2
    assert "call-2.json" in response["Content-Disposition"]
    assert ann_client.get(f"/sessions/{session.pk}/calls/latest.json").status_code == 410


def test_inspect_pins_a_call_out_of_reach_of_live_updates(ann_client, session):
    add_events(session, model_call(1, 500), model_call(2, 900))
    pinned = ann_client.get(f"/sessions/{session.pk}/inspect?call=1").content.decode()
    assert pinned.startswith('<div id="panel-inspector-pinned"') and 'data-call="1"' in pinned
    following = ann_client.get(f"/sessions/{session.pk}/inspect").content.decode()
    assert following.startswith('<div id="panel-inspector-body"') and 'data-call="2"' in following


def test_ref_reads_archived_text_in_pages(make_session, ann_client, ann, session, settings):
    row = ArchivedTurn.objects.create(session=session, turn=3, role="tool", tool_name="read_file",
                                      content="A" * 20_000 + "B" * 5)
    first = ann_client.get(f"/sessions/{session.pk}/refs/{row.ref}").content.decode()
    second = ann_client.get(f"/sessions/{session.pk}/refs/{row.ref}?page=2").content.decode()
    assert "page 1 of 2" in first and "BBBBB" not in first
    assert "BBBBB" in second
    other = make_session(owner=ann)
    # A ref of another session is not readable through this one.
    assert ann_client.get(f"/sessions/{other.pk}/refs/{row.ref}").status_code == 404


def test_archive_lists_the_turns_a_compaction_moved_out(ann_client, session):
    for turn in (1, 2, 5):
        ArchivedTurn.objects.create(session=session, turn=turn, role="tool",
                                    content=f"raw output of turn {turn} <b>x</b>")
    html = ann_client.get(f"/sessions/{session.pk}/archive?first=1&last=4").content.decode()
    assert "raw output of turn 1" in html and "raw output of turn 2" in html
    assert "raw output of turn 5" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
    # Rows archived without a token count show their size in characters, not "0 tok".
    assert "0 tok" not in html and "29 chars" in html


def test_htmx_actions_answer_with_a_notice(ann_client, session):
    hx = {"HTTP_HX_REQUEST": "true"}
    sent = ann_client.post(f"/sessions/{session.pk}/message", {"text": "Also split by quarter"}, **hx)
    assert sent.status_code == 200 and "next turn" in sent.content.decode()
    assert PendingMessage.objects.get().text == "Also split by quarter"
    empty = ann_client.post(f"/sessions/{session.pk}/message", {"text": " "}, **hx)
    assert empty.status_code == 422 and "The message is empty." in empty.content.decode()
    compact = ann_client.post(f"/sessions/{session.pk}/compact", {"instructions": "keep Q3"}, **hx)
    assert "with focus “keep Q3”" in compact.content.decode()
    cancel = ann_client.post(f"/sessions/{session.pk}/cancel", **hx)
    assert "Cancel requested" in cancel.content.decode()
    session.refresh_from_db()
    assert session.compact_request == "keep Q3" and session.cancel_requested


def test_actions_on_a_finished_session_explain_why_not(make_session, ann_client, ann):
    done = make_session(owner=ann, status=Session.Status.FINISHED)
    response = ann_client.post(f"/sessions/{done.pk}/compact", {}, HTTP_HX_REQUEST="true")
    assert response.status_code == 422
    assert f"Cannot compact: session #{done.pk} is finished." in response.content.decode()


def test_plain_form_posts_redirect_back_with_the_message(make_session, ann_client, ann):
    queued = make_session(owner=ann, status=Session.Status.QUEUED)
    response = ann_client.post(f"/sessions/{queued.pk}/cancel", follow=True)
    assert response.redirect_chain[-1][0] == f"/sessions/{queued.pk}/"
    assert "Cancelled before it started." in response.content.decode()


def test_actions_need_the_csrf_token(client, ann, session):
    from django.test import Client
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(ann)
    assert strict.post(f"/sessions/{session.pk}/cancel").status_code == 403
    page = strict.get(f"/sessions/{session.pk}/")
    token = page.cookies["csrftoken"].value
    ok = strict.post(f"/sessions/{session.pk}/cancel", HTTP_X_CSRFTOKEN=token,
                     HTTP_HX_REQUEST="true")
    assert ok.status_code == 200


def test_resync_renders_a_compaction_row_and_its_transcript_marker(ann_client, session):
    add_events(session, compaction("anchor"))
    html = ann_client.get(f"/sessions/{session.pk}/events?after=0").content.decode()
    assert 'data-trigger="anchor"' in html and "compaction · anchor" in html


def test_a_message_of_the_inspector_comes_when_its_row_is_opened(ann_client, bob, session):
    """Rows carry no text (a long run's live page was sent all of it): opened, a row asks
    for its message's text, cut as the inspector cuts it."""
    add_events(session, model_call(1, 500, messages=[
        {"role": "system", "zone": "system", "tokens": 300, "content": "You are TaskOS."},
        {"role": "tool", "zone": "history", "tokens": 150, "content": "x" * 7000,
         "tool_call_id": "c1"}]))
    url = f"/sessions/{session.pk}/inspect/message"
    page = ann_client.get(f"/sessions/{session.pk}/").content.decode()
    assert f'data-message-url="{url}"' in page and "x" * 200 not in page
    # Asked for by the row's key (its message's name, the same wherever it stands).
    first = ann_client.get(url, {"call": 1, "message": "system-system"}).content.decode()
    assert first == "<pre>You are TaskOS.</pre>\n"
    cut = ann_client.get(url, {"call": 1, "message": "tool-c1"}).content.decode()
    assert "x" * 1500 in cut and "x" * 1501 not in cut and "5500 more characters" in cut
    for bad in ({"call": 1, "message": "tool-c2"}, {"call": 1, "message": ""},
                {"call": 2, "message": "system-system"}, {"call": 1}):
        assert ann_client.get(url, bad).status_code == 404, bad
    assert ann_client.get(url, {"call": "x", "message": "tool-c1"}).status_code == 400
    ann_client.force_login(bob)
    assert ann_client.get(url, {"call": 1, "message": "system-system"}).status_code == 404
