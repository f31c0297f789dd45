"""Whole-number query parameters are read by one helper: "²" (which str.isdigit() accepts),
a number past the database's integer columns and a word are a 400 saying which parameter
and what it takes, never a 500 or Python's own message."""
from __future__ import annotations

import pytest

from .factories import add_events, compaction, model_call

pytestmark = pytest.mark.django_db

HUGE = "99999999999999999999"


@pytest.fixture
def recorded(session):
    add_events(session, model_call(1, 900), compaction(), model_call(2, 900))
    return session


@pytest.mark.parametrize("path, name", [
    ("compactions/detail", "number"), ("compactions/older", "before"), ("inspect", "call"),
    ("inspect/message", "call"), ("transcript", "before"), ("events", "after"),
    ("archive", "first"), ("archive", "last"), ("refs/r1", "page"),
])
@pytest.mark.parametrize("value", ["²", HUGE, "-1", "1e3", "<b>x</b>"])
def test_a_bad_number_in_the_query_is_a_plain_400_naming_the_parameter(
        ann_client, recorded, path, name, value):
    response = ann_client.get(f"/sessions/{recorded.pk}/{path}", {name: value})
    if path == "refs/r1" and response.status_code == 404:
        return  # no such ref: the page is never read
    assert response.status_code == 400, response.content[:300]
    body = response.content.decode()
    assert f"Query parameter '{name}' must be a whole number from 0 to 2147483647" in body
    assert "invalid literal" not in body
    assert response["Content-Type"].startswith("text/plain")


@pytest.mark.parametrize("value", ["²", HUGE])
def test_the_start_form_refuses_a_bad_source_session(ann_client, recorded, value):
    response = ann_client.get("/sessions/new", {"from": value})
    assert response.status_code == 400
    assert "Query parameter 'from' must be a whole number" in response.content.decode()


def test_the_start_form_still_takes_its_source_session(ann_client, recorded):
    response = ann_client.get("/sessions/new", {"from": str(recorded.pk)})
    assert response.status_code == 200
    assert response.context["form"].initial["from_session"] == recorded.pk


def test_the_largest_number_taken_is_looked_up_not_refused(ann_client, recorded):
    response = ann_client.get(f"/sessions/{recorded.pk}/compactions/detail",
                              {"number": "2147483647"})
    assert response.status_code == 404


@pytest.mark.parametrize("value", ["²", HUGE, "3,x"])
def test_the_compare_page_refuses_bad_run_numbers(ann_client, recorded, value):
    response = ann_client.get(f"/sessions/{recorded.pk}/compare", {"runs": value})
    assert response.status_code == 400
    assert "Query parameter 'runs' must be whole numbers" in response.content.decode()
