"""After the kills, every session is opened as its owner would: the page, the resync a
websocket's first sync renders, the transcript, the inspector of each call and every export.

A run that loses nothing can still leave a session whose page fails (issue 25 item 2: the
discarded copy of an interrupted call read as the live one answered HTTP 500), so any
answer but 200 counts, and so does a request export that serves no tool schemas where the
call sent some. The requests go through Django's test client, in this process, against the
run's database: the views, templates and queries are the ones a browser reaches.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from agents import EventType
from taskos.drawer.calls import schemas
from taskos.drawer.feed import EventFeed
from taskos.drawer.panels import PANELS
from taskos.drawer.stream import render_update
from taskos.runs.models import Session, SessionEvent

OWNER = "chaos"
SHOWN = 5  # failures listed per session in the report; the count is exact


def chaos_owner():
    """The person the chaos run's sessions belong to: its pages are opened as them."""
    user, _ = get_user_model().objects.get_or_create(username=OWNER)
    return user


def page_client(user) -> Client:
    """A client signed in as `user` that gets a 500 as an answer, not an exception, on a
    host the settings allow."""
    host = next((h for h in settings.ALLOWED_HOSTS if h not in ("*", "")), "localhost")
    client = Client(raise_request_exception=False, HTTP_HOST=host.lstrip("."))
    client.force_login(user)
    return client


def _export_fault(response, number: int) -> str | None:
    """What is wrong with call `number`'s request export, None when it is a body whose tool
    schemas (when it has any) are schemas."""
    try:
        body = json.loads(response.content)
    except ValueError:
        return f"calls/{number}.json: not JSON"
    if "tools" in body and schemas(body["tools"]) is None:
        return f"calls/{number}.json: tools are {json.dumps(body['tools'])[:80]}"
    return None


def check_pages(session: Session, client: Client | None = None,
                say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Open every page of `session` as its owner; {"requests": n, "page_errors": n,
    "failed": [the first few]}."""
    if client is None:
        if session.owner is None:
            raise ValueError(f"Session {session.pk} has no owner to open its pages as")
        client = page_client(session.owner)
    base = f"/sessions/{session.pk}"
    failed: list[str] = []
    requests = 0

    def get(url: str) -> Any:
        nonlocal requests
        requests += 1
        response = client.get(base + url)
        if response.status_code != 200:
            failed.append(f"{url}: HTTP {response.status_code}")
            return None
        return response

    for url in ("/", "/events?after=0", "/transcript", "/inspect", "/archive"):
        get(url)
    try:  # the websocket's first sync: render_update with the page's event feed
        requests += 1
        render_update(session, 0, full=True, feed=EventFeed(PANELS))
    except Exception as exc:  # noqa: BLE001 - counted: the consumer would close with 1011
        failed.append(f"websocket sync: {type(exc).__name__}: {exc}")
    numbers = (SessionEvent.objects.filter(session=session, type=EventType.MODEL_CALL)
               .order_by("seq").values_list("payload__call", flat=True))
    for number in numbers:
        get(f"/inspect?call={number}")
        get(f"/calls/{number}/record.json")
        if (export := get(f"/calls/{number}.json")) is not None:
            if fault := _export_fault(export, number):
                failed.append(fault)
    if say and failed:
        say(f"session {session.pk}: {len(failed)} of {requests} pages failed, first "
            f"{failed[0]}")
    return {"requests": requests, "page_errors": len(failed), "failed": failed[:SHOWN]}
