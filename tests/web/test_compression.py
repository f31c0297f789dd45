"""Pages and fragments are sent gzip-compressed to a browser that accepts it, and each
compressed page differs in length from the last (BREACH: taskos/settings.py)."""
from __future__ import annotations

import gzip
import re

import pytest

from .factories import add_events, budget, model_call

pytestmark = pytest.mark.django_db


def test_the_session_page_is_gzip_encoded_with_a_fresh_csrf_token(ann_client, session):
    add_events(session, budget(), *[model_call(n, 900 + n) for n in range(1, 40)])
    url = f"/sessions/{session.pk}/"
    plain = ann_client.get(url)
    assert plain.status_code == 200 and not plain.has_header("Content-Encoding")
    tokens = []
    for _ in range(2):
        response = ann_client.get(url, HTTP_ACCEPT_ENCODING="gzip, deflate, br")
        assert response.status_code == 200 and response["Content-Encoding"] == "gzip"
        assert "Accept-Encoding" in response["Vary"]
        html = gzip.decompress(response.content).decode()
        assert "Analyse regional sales" in html and 'id="panel-curve-body"' in html
        assert len(response.content) < len(html) / 3
        tokens.append(re.search(r'"X-CSRFToken": "([^"]+)"', html).group(1))
    # The one secret on the page is masked anew in every response.
    assert tokens[0] != tokens[1]


def test_the_dashboard_is_gzip_encoded(ann_client, session):
    response = ann_client.get("/", HTTP_ACCEPT_ENCODING="gzip")
    assert response["Content-Encoding"] == "gzip"
    assert "Analyse regional sales" in gzip.decompress(response.content).decode()
