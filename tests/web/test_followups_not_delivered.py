"""A follow-up is never kept invisible: refused once a cancel is asked for, and when it
was accepted but the session ended before the agent read it (a cancel taken at the next
turn, a final answer or a failure in the turn that was running), the session page says
it was not delivered and quotes it."""
from __future__ import annotations

import pytest

from taskos.runs import services
from taskos.runs.models import PendingMessage
from taskos.store.django_store import DjangoStore
from taskos.worker.execute import execute_session

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
FOLLOW_UP = "Also compare with last year's figures"


def send(client, session, text=FOLLOW_UP, **headers):
    return client.post(f"/sessions/{session.pk}/message", {"text": text}, **headers)


def test_a_follow_up_after_cancel_is_refused_and_not_kept(ann_client, session):
    assert ann_client.post(f"/sessions/{session.pk}/cancel", **HTMX).status_code == 200
    response = send(ann_client, session, **HTMX)
    assert response.status_code == 422
    assert "This session is being cancelled" in response.content.decode()
    assert not PendingMessage.objects.exists()
    # A plain form post says it on the page it is sent back to.
    page = ann_client.get(send(ann_client, session).url).content.decode()
    assert "This session is being cancelled" in page and "Message sent" not in page
    assert not PendingMessage.objects.exists()


def test_a_follow_up_before_cancel_is_still_accepted(ann_client, session):
    response = send(ann_client, session, **HTMX)
    assert response.status_code == 200 and "Message sent" in response.content.decode()
    assert PendingMessage.objects.filter(session=session, taken=False).count() == 1


def run_with_follow_up_during(ann, ann_client, monkeypatch, sim_profile, *, at_turn, cancel):
    """sales-report on the simulated model, a person sending a follow-up (and pressing
    Cancel) from the page while the worker is in turn `at_turn`, after it read messages."""
    save_state = DjangoStore.save_state
    session = services.create_session(ann, "", "sales-report", sim_profile, None, {})

    def person_acts_mid_turn(self, session_id, state):
        if state["turn"] == at_turn + 1:  # the turn that ran is at_turn
            assert send(ann_client, session, **HTMX).status_code == 200
            if cancel:
                assert ann_client.post(f"/sessions/{session.pk}/cancel",
                                       **HTMX).status_code == 200
        save_state(self, session_id, state)

    monkeypatch.setattr(DjangoStore, "save_state", person_acts_mid_turn)
    execute_session(session)
    session.refresh_from_db()
    return session


def test_a_follow_up_accepted_before_the_cancel_took_effect_is_shown_not_delivered(
        ann, ann_client, monkeypatch, sim_profile):
    session = run_with_follow_up_during(ann, ann_client, monkeypatch, sim_profile, at_turn=0,
                                        cancel=True)
    assert session.status == "cancelled"
    assert PendingMessage.objects.filter(session=session, taken=False).count() == 1
    page = ann_client.get(f"/sessions/{session.pk}/").content.decode()
    assert "Not delivered: the session was cancelled before the agent read this follow-up" \
        in page
    assert "Also compare with last year&#x27;s figures" in page
    # A live page is sent it with the status header (the resync view sends the same).
    update = ann_client.get(f"/sessions/{session.pk}/events?after=0").content.decode()
    assert "Not delivered" in update and "last year&#x27;s figures" in update


def test_a_follow_up_sent_during_the_final_turn_is_shown_not_delivered(
        ann, ann_client, monkeypatch, sim_profile):
    probe = services.create_session(ann, "", "sales-report", sim_profile, None, {})
    execute_session(probe)
    probe.refresh_from_db()
    last = probe.turns - 1  # the turn that gives the final answer
    session = run_with_follow_up_during(ann, ann_client, monkeypatch, sim_profile,
                                        at_turn=last, cancel=False)
    assert session.status == "finished"
    page = ann_client.get(f"/sessions/{session.pk}/").content.decode()
    assert "Not delivered: the session ended (finished) before the agent read this " \
           "follow-up" in page
    assert "last year&#x27;s figures" in page


@pytest.mark.parametrize("status", ["failed", "unusable_answer", "cancelled"])
def test_untaken_follow_ups_of_any_ended_session_are_shown(make_session, ann, ann_client,
                                                           status):
    session = make_session(owner=ann, status=status)
    PendingMessage.objects.create(session=session, text="read by the agent", taken=True,
                                  taken_turn=0)
    PendingMessage.objects.create(session=session, text="first <b>lost</b>")
    PendingMessage.objects.create(session=session, text="second lost")
    page = ann_client.get(f"/sessions/{session.pk}/").content.decode()
    assert "before the agent read these 2 follow-ups" in page
    assert "first &lt;b&gt;lost&lt;/b&gt;" in page and "second lost" in page
    assert "read by the agent" not in page


def test_an_active_session_does_not_call_its_waiting_follow_ups_lost(ann_client, session):
    send(ann_client, session)
    page = ann_client.get(f"/sessions/{session.pk}/").content.decode()
    assert "Not delivered" not in page
