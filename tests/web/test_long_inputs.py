"""The pin and compact-focus inputs carry no maxlength: a browser cut a pasted 95,000-
character text to the limit without a word, and the app pinned a sentence cut mid-word.
The whole text now reaches the server, which refuses it with a message saying why (a 422
htmx swaps into #flash; the forms keep their text on a 422)."""
from __future__ import annotations

import re

import pytest

from taskos.runs.models import Anchor

pytestmark = pytest.mark.django_db

PASTED = "word " * 19_000  # 95,000 characters


def test_the_session_page_sets_no_maxlength_on_the_pin_or_the_focus(ann_client, session):
    html = ann_client.get(f"/sessions/{session.pk}/").content.decode()
    pin = re.search(r'<form class="pin-sentence".*?</form>', html, re.S).group(0)
    focus = re.search(r'<form class="compact-now".*?</form>', html, re.S).group(0)
    assert 'name="text"' in pin and "maxlength" not in pin
    assert 'name="instructions"' in focus and "maxlength" not in focus
    # Only a 200 empties the pin form: a refusal leaves the text to shorten.
    assert "event.detail.xhr.status === 200) { this.reset()" in pin


def test_a_long_pin_is_refused_with_the_reason(ann_client, session):
    response = ann_client.post(f"/sessions/{session.pk}/pin", {"text": PASTED},
                               HTTP_HX_REQUEST="true")
    assert response.status_code == 422
    assert "A pin holds at most 500 characters; this selection has 94999" in \
        response.content.decode()
    assert not Anchor.objects.filter(session=session).exists()


def test_a_long_focus_is_refused_with_the_reason(ann_client, session):
    response = ann_client.post(f"/sessions/{session.pk}/compact",
                               {"instructions": PASTED}, HTTP_HX_REQUEST="true")
    assert response.status_code == 422
    assert "A focus holds at most 2,000 characters (this one has 94999)" in \
        response.content.decode()
    session.refresh_from_db()
    assert not session.compact_request
