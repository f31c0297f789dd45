"""Text no database stores (issue 25 item 4): a NUL or a lone surrogate in a model reply, in
tool arguments and results, in a person's message or pin is stored with the visible marks
of agents/storable.py ("␀" for NUL, "\ufffd" for a lone surrogate) on the suite's
database, PostgreSQL (whose text and jsonb refuse NUL) or SQLite, and nothing 500s."""
from __future__ import annotations

import base64
import json

import httpx2
import pytest
from django.urls import reverse

import agents
import agents.runner
from agents import BAD_MARK, NUL_MARK
from taskos.runs import services
from taskos.runs.models import (Anchor, ArchivedTurn, PendingMessage, Session, SessionEvent,
                                Task)
from taskos.store.django_store import DjangoStore
from taskos.worker.execute import execute_session

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("channels_redis_url")]

NUL, LONE = "\x00", "\ud800"
SAID = f"Reading nul.txt first: keep A{NUL}B."  # the reply's text; a person pins it
NUL_BYTES = b"total\x00 4.2M EUR\n"  # a workspace file: the tool result holds a NUL

SCENARIO = {
    "name": "unstorable-text",
    "goal": f"Report on odd text. The report must keep A{NUL}B and the {LONE} mark.",
    "tools": ["read_file", "write_file", "TaskCreate", "notes"],
    "steps": [
        {"user": f"Please keep C{NUL}D and a lone \udc80 surrogate."},
        {"say": SAID, "tool": "read_file", "args": {"path": "nul.txt"}},
        {"tool": "write_file", "args": {"path": f"out{NUL}.txt", "content": f"x{NUL}y \udbff"}},
        {"tool": "TaskCreate", "args": {"subject": f"Check {NUL} rows", "description": "\udfff"}},
        {"tool": "notes", "args": {"action": "add", "section": "findings",
                                   "text": f"v{NUL} {LONE}", "source": f"s{NUL}"}},
        {"final": f"Done: A{NUL}B with {LONE}."},
    ],
}


def storable(text: str) -> str:
    return text.replace(NUL, NUL_MARK).replace(LONE, BAD_MARK).replace(
        "\udc80", BAD_MARK).replace("\udbff", BAD_MARK).replace("\udfff", BAD_MARK)


def unstorable_in(value) -> list[str]:
    """Every string in a stored value (keys included) that still holds a NUL or a lone
    surrogate."""
    if isinstance(value, str):
        return [value] if any(ch == NUL or 0xD800 <= ord(ch) <= 0xDFFF for ch in value) else []
    if isinstance(value, dict):
        return unstorable_in(list(value)) + unstorable_in(list(value.values()))
    if isinstance(value, list):
        return [bad for item in value for bad in unstorable_in(item)]
    return []


@pytest.fixture
def running(make_session, plain_user, client, tmp_path):
    path = tmp_path / "unstorable.json"
    path.write_text(json.dumps(SCENARIO), encoding="ascii")  # escapes, as a file holds them
    client.force_login(plain_user)
    # The goal is the scenario's, as the engine reads it from the file.
    session = make_session(owner=plain_user, goal="", scenario=str(path), window=16000)
    session.workspace.mkdir(parents=True)
    (session.workspace / "nul.txt").write_bytes(NUL_BYTES)
    return session


def test_a_session_with_nul_and_lone_surrogates_everywhere_finishes_with_them_marked(
        running, client, monkeypatch):
    """Replies, tool arguments, a tool result, the goal and a scripted message hold NUL and
    lone surrogates; a person sends a message and pins a sentence with a NUL mid-run. The
    session finishes; every row holds the marks, none the raw code points; the pages open."""
    session, answers = running, {}
    original = DjangoStore.save_state

    def save_state(self, session_id, state):
        original(self, session_id, state)
        if state["turn"] == 2 and not answers:
            answers["message"] = client.post(reverse("web:message", args=[session.pk]),
                                             {"text": f"Also keep E{NUL}F."},
                                             HTTP_HX_REQUEST="true")
            answers["pin"] = client.post(reverse("web:pin", args=[session.pk]),
                                         {"text": SAID}, HTTP_HX_REQUEST="true")

    monkeypatch.setattr(DjangoStore, "save_state", save_state)
    report = execute_session(Session.objects.get(pk=session.pk))

    session.refresh_from_db()
    assert (report["status"], session.status, session.error) == ("finished", "finished", "")
    assert session.final_answer == f"Done: A{NUL_MARK}B with {BAD_MARK}."
    assert answers["message"].status_code == 200, answers["message"].content
    assert answers["pin"].status_code == 200, answers["pin"].content

    # The person's message and pin, as stored and as the engine took them.
    assert list(PendingMessage.objects.filter(session=session).values_list(
        "text", "taken")) == [(f"Also keep E{NUL_MARK}F.", True)]
    pin = Anchor.objects.get(session=session, source=Anchor.Source.PIN)
    assert pin.text == storable(SAID)

    rows = list(ArchivedTurn.objects.filter(session=session).order_by("id"))
    texts = [row.content for row in rows if not row.is_binary]
    for expected in (SCENARIO["goal"], SCENARIO["steps"][0]["user"], SAID,
                     f"Also keep E{NUL}F.", SCENARIO["steps"][-1]["final"]):
        assert any(storable(expected) in text for text in texts), expected
    assert not [row.pk for row in rows if unstorable_in([row.content, row.tool_args])]
    by_tool = {row.tool_name: row for row in rows if row.role == "tool"}
    assert by_tool["write_file"].tool_args == {"path": f"out{NUL_MARK}.txt",
                                              "content": f"x{NUL_MARK}y {BAD_MARK}"}
    assert by_tool["notes"].tool_args["text"] == f"v{NUL_MARK} {BAD_MARK}"
    # The tool's bytes stay exact; the model saw them described.
    assert by_tool["read_file"].is_binary
    assert base64.b64decode(by_tool["read_file"].content) == NUL_BYTES
    assert (session.workspace / f"out{NUL_MARK}.txt").read_text() == f"x{NUL_MARK}y {BAD_MARK}"

    task = Task.objects.get(session=session)
    assert (task.subject, task.description) == (f"Check {NUL_MARK} rows", BAD_MARK)
    assert session.notes["findings"] == [{"text": f"v{NUL_MARK} {BAD_MARK}",
                                          "source": f"s{NUL_MARK}"}]

    events = list(SessionEvent.objects.filter(session=session).values_list("type", "payload"))
    assert not [kind for kind, payload in events if unstorable_in(payload)]
    said = [p["text"] for kind, p in events if kind == "USER_MESSAGE"]
    assert f"Also keep E{NUL_MARK}F." in said and storable(SCENARIO["goal"]) in said
    replies = [p["content"] for kind, p in events if kind == "ASSISTANT_MESSAGE"]
    assert storable(SAID) in replies
    pinned = [p for kind, p in events if kind == "ANCHOR_CHANGED" and p.get("source") == "pin"]
    assert [p["new"] for p in pinned] == [storable(SAID)]

    # The state a resume would read back holds the marks too.
    state = DjangoStore().load_state(str(session.pk))
    assert not unstorable_in(state) and NUL_MARK in json.dumps(state, ensure_ascii=False)

    pages = [reverse("web:session", args=[session.pk]), reverse("web:archive", args=[session.pk]),
             reverse("web:inspect", args=[session.pk]),
             reverse("web:events", args=[session.pk]) + "?after=0",
             reverse("web:call_json", args=[session.pk, 1]),
             reverse("web:ref", args=[session.pk, rows[1].ref])]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)


def test_a_pin_or_a_message_with_a_nul_is_stored_with_the_mark_not_refused(
        make_session, plain_user, client):
    session = make_session(owner=plain_user, status=Session.Status.RUNNING)
    client.force_login(plain_user)
    store = DjangoStore()
    ref = store.archive(str(session.pk), 0, "assistant", f"Keep A{NUL}B in the report.")
    assert store.read_ref(str(session.pk), ref) == f"Keep A{NUL_MARK}B in the report."

    pin = client.post(reverse("web:pin", args=[session.pk]),
                      {"text": f"Keep A{NUL}B in the report."}, HTTP_HX_REQUEST="true")
    assert pin.status_code == 200, pin.content
    assert Anchor.objects.get(session=session, source="pin").text == \
        f"Keep A{NUL_MARK}B in the report."
    # The page shows the mark; selecting it there pins the same sentence.
    again = client.post(reverse("web:pin", args=[session.pk]),
                        {"text": f"Keep A{NUL_MARK}B in the report."}, HTTP_HX_REQUEST="true")
    assert again.status_code == 200 and b"Already" in again.content

    message = client.post(reverse("web:message", args=[session.pk]),
                          {"text": f"Stop at {NUL} row 9."}, HTTP_HX_REQUEST="true")
    assert message.status_code == 200, message.content
    assert store.take_user_messages(str(session.pk)) == [f"Stop at {NUL_MARK} row 9."]


def test_a_goal_with_a_nul_or_a_lone_surrogate_starts_a_session_with_the_marks(
        sim_profile, plain_user, client, monkeypatch):
    # runtask's argument may hold a lone surrogate (an undecodable byte of the command line)
    made = services.create_session(None, f"Sum {NUL} rows \udc80.", "", sim_profile, None, {})
    assert Session.objects.get(pk=made.pk).goal == f"Sum {NUL_MARK} rows {BAD_MARK}."
    monkeypatch.setattr("taskos.web.views.start_session", lambda session: None)
    client.force_login(plain_user)
    response = client.post(reverse("web:new"), {
        "goal": f"Count {NUL} rows.", "scenario": "", "profile": sim_profile.pk, "window": "",
        "trigger_ratio": "0.8", "reserve_ratio": "0.1", "context_buffer_ratio": "0.2",
        "tool_result_limit": "50000", "max_rounds": "5", "timezone": "UTC"})
    assert response.status_code == 302, response.content[:2000]
    assert Session.objects.get(owner=plain_user).goal == f"Count {NUL_MARK} rows."


def test_a_provider_error_with_a_nul_fails_the_session_with_its_message_marked(
        make_session, monkeypatch):
    """The model's error body is text from outside as much as its reply: the session ends
    with that error, readable, instead of an internal error about storing it."""
    def refuse(request):
        return httpx2.Response(400, json={"error": {"message": f"bad byte {NUL} at 3",
                                                    "type": "invalid_request_error"}})

    def refusing_provider(*args, **kwargs):  # no simulated model's transport to report on
        return httpx2.Client(transport=httpx2.MockTransport(refuse)), None

    monkeypatch.setattr(agents.runner, "sim_http_client", refusing_provider)
    session = make_session(goal="", scenario="sales-report")
    report = execute_session(session)
    session.refresh_from_db()
    assert (report["status"], session.status) == ("failed", "failed")
    assert f"bad byte {NUL_MARK} at 3" in session.error and "internal error" not in session.error
    errors = SessionEvent.objects.filter(session=session, type="ERROR")
    assert [e.payload["code"] for e in errors] == ["bad_request"]


def test_an_anchor_or_a_task_saved_by_hand_takes_the_marks(make_session):
    """The admin and a shell write through the ORM, not the engine's store."""
    session = make_session()
    anchor = Anchor.objects.create(session=session, tier=1, text=f"Never {NUL} delete rows",
                                   key=f"k{NUL}")
    task = Task.objects.create(session=session, task_id="1", subject=f"Sum {NUL}",
                               description=f"lone {LONE}", metadata={f"n{NUL}": [LONE]})
    anchor.refresh_from_db()
    task.refresh_from_db()
    assert (anchor.text, anchor.key) == (f"Never {NUL_MARK} delete rows", f"k{NUL_MARK}")
    assert (task.subject, task.description) == (f"Sum {NUL_MARK}", f"lone {BAD_MARK}")
    assert task.metadata == {f"n{NUL_MARK}": [BAD_MARK]}


def test_an_engine_crash_whose_message_holds_a_nul_is_recorded_with_the_mark(sim_profile,
                                                                             monkeypatch):
    # The failure's own record must not fail: Session.error and the ERROR event are text.
    def crash(spec, **kwargs):
        raise RuntimeError("bad byte \x00 in \ud800 a file")

    monkeypatch.setattr(agents, "run_session", crash)
    session = services.create_session(None, "Say hello.", "", sim_profile, None, {})
    with pytest.raises(RuntimeError):
        execute_session(Session.objects.get(pk=session.pk))
    session.refresh_from_db()
    assert session.status == "failed"
    assert f"bad byte {NUL_MARK} in {BAD_MARK} a file" in session.error
    [error] = SessionEvent.objects.filter(session=session, type="ERROR")
    assert NUL_MARK in error.payload["message"]
