"""The inspector asked for a call the session does not have says so, with how many calls
there are, instead of an empty panel under a select reading "latest, follow live"."""
from __future__ import annotations

import re

import pytest

from .factories import add_events, model_call

pytestmark = pytest.mark.django_db


def test_a_call_that_is_not_there_is_a_404_naming_it(ann_client, session):
    add_events(session, *[model_call(n, 900) for n in range(1, 4)])
    response = ann_client.get(f"/sessions/{session.pk}/inspect", {"call": "999"})
    assert response.status_code == 404
    text = re.sub(r"<[^>]+>", "", response.content.decode())
    assert f"Session #{session.pk} has no call 999: it has 3 model calls, the latest being " \
           "call 3." in text


def test_the_panel_request_gets_the_message_to_swap_and_the_select_names_the_call(
        ann_client, session):
    add_events(session, model_call(1, 900))
    response = ann_client.get(f"/sessions/{session.pk}/inspect", {"call": "999"},
                              HTTP_HX_REQUEST="true")
    assert response.status_code == 200  # htmx swaps no 4xx (base.html's responseHandling)
    html = response.content.decode()
    assert "has no call 999: it has 1 model call, the latest being call 1." in html
    selected = re.findall(r'<option value="([^"]*)"[^>]*\bselected\b', html)
    assert selected == ["999"]


def test_a_session_without_calls_says_so(ann_client, session):
    response = ann_client.get(f"/sessions/{session.pk}/inspect", {"call": "999"})
    assert response.status_code == 404
    assert "has no call 999: it has no model calls yet." in response.content.decode()


def test_a_call_that_is_there_is_shown(ann_client, session):
    add_events(session, model_call(1, 900), model_call(2, 900))
    response = ann_client.get(f"/sessions/{session.pk}/inspect", {"call": "1"})
    assert response.status_code == 200
    assert 'data-call="1"' in response.content.decode()
    assert "missing-call" not in response.content.decode()
