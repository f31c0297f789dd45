"""A call's {"tools_of_call": N} marker resolves to the schemas a live call stored, or the
page says they are lost; it never answers HTTP 500 (issue 25 item 2)."""
from __future__ import annotations

import json

import pytest

from taskos.runs.models import SessionEvent

from .factories import add_events, model_call

pytestmark = pytest.mark.django_db

SCHEMAS = [{"type": "function", "function": {"name": "read_file", "parameters": {}}},
           {"type": "function", "function": {"name": "sql_query", "parameters": {}}}]
OTHER = [{"type": "function", "function": {"name": "recall", "parameters": {}}}]


def call(number: int, tools) -> tuple[str, dict]:
    kind, payload = model_call(number, 900)
    return kind, {**payload, "request": {"model": "taskos-sim", "messages": "<messages>",
                                         "max_tokens": 500, "tool_choice": "auto",
                                         "tools": tools}}


def exported_tools(client, session, number: int):
    response = client.get(f"/sessions/{session.pk}/calls/{number}.json")
    assert response.status_code == 200, response.content
    return [t["function"]["name"] for t in json.loads(response.content)["tools"]]


def test_a_marker_reads_the_live_call_it_names_not_a_discarded_copy(ann_client, session):
    # Call 2 ran twice: its discarded copy holds a marker (to call 1, OTHER), the live
    # run again holds SCHEMAS; call 3 names call 2.
    add_events(session, call(1, json.dumps(OTHER)), call(2, {"tools_of_call": 1}),
               call(2, json.dumps(SCHEMAS)), call(3, {"tools_of_call": 2}))
    SessionEvent.all_objects.filter(session=session, seq=2).update(discarded=True)
    assert exported_tools(ann_client, session, 3) == ["read_file", "sql_query"]
    page = ann_client.get(f"/sessions/{session.pk}/inspect?call=3").content.decode()
    assert "read_file" in page and "tools_of_call" not in page


def test_a_marker_to_a_marker_is_followed_to_the_schemas(ann_client, session):
    add_events(session, call(1, json.dumps(SCHEMAS)), call(2, {"tools_of_call": 1}),
               call(3, {"tools_of_call": 2}))
    assert exported_tools(ann_client, session, 3) == ["read_file", "sql_query"]


@pytest.mark.parametrize("tools", [{"tools_of_call": 7}, {"tools_of_call": 2}, "not json",
                                   {"tools_of_call": "1"}])
def test_schemas_that_cannot_be_found_are_said_lost_not_a_crash(ann_client, session, tools):
    # A marker to no call, to itself (a loop), text that is no JSON, a damaged marker.
    add_events(session, call(1, json.dumps(SCHEMAS)), call(2, tools))
    base = f"/sessions/{session.pk}"
    assert ann_client.get(f"{base}/").status_code == 200
    page = ann_client.get(f"{base}/inspect?call=2")
    assert page.status_code == 200 and "tool schemas not found" in page.content.decode()
    export = ann_client.get(f"{base}/calls/2.json")
    assert export.status_code == 410 and b"record.json" in export.content
    assert ann_client.get(f"{base}/calls/2/record.json").status_code == 200
    assert exported_tools(ann_client, session, 1) == ["read_file", "sql_query"]
