"""Ask before a tool acts (feature T11) on the database: the wait, the decisions in the
drawer's views, who may decide, the timeout, and a worker restarted while a call waits."""
from __future__ import annotations

import datetime as dt
import json
import time

import pytest
from django.urls import reverse
from django.utils import timezone

from taskos.runs import approvals, queue, services
from taskos.runs.models import ArchivedTurn, Session, ToolApproval
from taskos.worker import sweeper
from taskos.worker.execute import execute_session
from tests.django.test_celery import on_broker, solo_worker

pytestmark = pytest.mark.django_db(transaction=True)

REASON = "keep the old draft as it is"


def scenario_file(tmp_path) -> str:
    data = {"name": "approvals", "goal": "Write the report and replace the draft.",
            "tools": ["list_files", "write_file", "read_file"],
            "steps": [
                {"say": "Writing both.", "tools": [
                    {"tool": "write_file", "args": {"path": "report.md", "content": "# Report\n"}},
                    {"tool": "list_files", "args": {}},
                    {"tool": "write_file", "args": {"path": "sales.csv", "content": "gone\n"}}]},
                {"final": "Report written."}]}
    path = tmp_path / "approvals.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.fixture
def sent(monkeypatch):
    """What was sent to the queue (no broker needed for the in-process runs)."""
    pks = []
    monkeypatch.setattr(queue, "run_session", lambda pk: pks.append(pk))
    return pks


@pytest.fixture
def waiting(tmp_path, sim_profile, django_user_model):
    """A session run once in this process: it stopped waiting for two approvals."""
    owner = django_user_model.objects.create_user("ann", password="ann-secret-42")
    session = services.create_session(owner, "", scenario_file(tmp_path), sim_profile, None, {})
    session.ask_first = ["write_file"]
    session.save(update_fields=["ask_first"])
    execute_session(session)
    session.refresh_from_db()
    return session


def by_path(session: Session) -> dict[str, ToolApproval]:
    return {json.loads(a.arguments)["path"]: a for a in session.approvals.all()}


def post(client, approval: ToolApproval, **data):
    return client.post(reverse("web:approval_decide", args=[approval.session_id, approval.pk]),
                       data, HTTP_HX_REQUEST="true")


def agent_inputs(session: Session) -> list[str]:
    from taskos.store.call_messages import full_payload
    rows = session.events.filter(type="MODEL_CALL", payload__kind="agent").order_by("seq")
    return ["\n".join(str(m.get("content") or "")
                      for m in full_payload(session.pk, seq, payload)["messages"])
            for seq, payload in rows.values_list("seq", "payload")]


def test_the_session_waits_with_the_calls_recorded(waiting):
    assert waiting.status == "waiting_for_approval"
    calls = by_path(waiting)
    assert sorted(calls) == ["report.md", "sales.csv"]
    assert all(a.status == "pending" for a in calls.values())
    assert "-2025-01-31" in calls["sales.csv"].preview  # the diff of the demo file it replaces
    assert "+gone" in calls["sales.csv"].preview
    assert (waiting.workspace / "sales.csv").read_text().startswith("date")  # untouched
    types = list(waiting.events.values_list("type", flat=True))
    assert types.count("APPROVAL_REQUESTED") == 2 and types[-1] == "SESSION_WAITING"
    assert "SESSION_FINISHED" not in types
    # list_files, asked in the same reply, ran at once.
    assert waiting.events.filter(type="TOOL_RESULT", payload__name="list_files").count() == 1


def test_approve_and_deny_from_the_drawer(waiting, client, sent):
    calls = by_path(waiting)
    client.force_login(waiting.owner)
    page = client.get(reverse("web:session", args=[waiting.pk])).content.decode()
    assert page.count('class="approval approval-pending"') == 2 and "+gone" in page
    assert page.count('class="ev ev-approval_requested"') == 2  # in the transcript too
    assert "A tool call waits for your decision" in page  # the status bar says what to do
    answer = post(client, calls["report.md"], decision="approve")
    assert answer.status_code == 200 and "Other calls still wait" in answer.content.decode()
    assert 'id="panel-approvals-body"' in answer.content.decode()  # the panel, out of band
    assert sent == []  # one call still waits
    refused = post(client, calls["sales.csv"], decision="deny", reason="  ")
    assert refused.status_code == 422 and "Say why" in refused.content.decode()
    assert post(client, calls["sales.csv"], decision="deny", reason=REASON).status_code == 200
    waiting.refresh_from_db()
    assert waiting.status == "queued" and sent == [waiting.pk]  # woken once, by the last
    again = post(client, calls["report.md"], decision="deny", reason="changed my mind")
    assert again.status_code == 422 and "already approved" in again.content.decode()

    execute_session(waiting)  # what the worker does with the message sent
    waiting.refresh_from_db()
    assert waiting.status == "finished", waiting.error
    assert (waiting.workspace / "report.md").read_text() == "# Report\n"
    assert (waiting.workspace / "sales.csv").read_text().startswith("date")  # denied
    assert REASON in agent_inputs(waiting)[-1]
    decided = {p["call_id"]: p for p in waiting.events.filter(type="APPROVAL_DECIDED")
               .values_list("payload", flat=True)}
    assert decided[calls["report.md"].call_id]["decision"] == "approved"
    assert decided[calls["sales.csv"].call_id]["decided_by"] == "ann"
    page = client.get(reverse("web:session", args=[waiting.pk])).content.decode()
    assert page.count('class="ev ev-approval_decided"') == 2 and REASON in page
    rows = ArchivedTurn.objects.filter(session=waiting, role="approval")
    assert sorted(r.content.split()[0] for r in rows) == ["approved", "denied"]


def test_only_the_owner_or_staff_decide(waiting, client, django_user_model, sent):
    call = by_path(waiting)["report.md"]
    url = reverse("web:approval_decide", args=[waiting.pk, call.pk])
    assert client.post(url, {"decision": "approve"}).status_code == 302  # to sign in
    client.force_login(django_user_model.objects.create_user("bob", password="bob-secret-42"))
    assert client.post(url, {"decision": "approve"}).status_code == 404
    assert client.get(url).status_code == 405
    call.refresh_from_db()
    assert call.status == "pending"
    client.force_login(django_user_model.objects.create_user("boss", password="x-boss-42",
                                                             is_staff=True))
    assert client.post(url, {"decision": "approve"}).status_code == 302  # plain form: back
    call.refresh_from_db()
    assert call.status == "approved" and call.decided_by.username == "boss"


def test_the_timeout_denies_with_its_reason(waiting, settings, sent):
    settings.TASKOS_APPROVAL_TIMEOUT_S = 60
    assert approvals.deny_overdue(timezone.now()) == []  # not yet overdue
    later = timezone.now() + dt.timedelta(minutes=2)
    woken = []
    sweeper.sweep(send=woken.append, now=later)  # the sweeper's round does it
    assert woken == [waiting.pk]
    assert set(waiting.approvals.values_list("status", "decided_how")) == {("denied", "timeout")}
    execute_session(Session.objects.get(pk=waiting.pk))
    waiting.refresh_from_db()
    assert waiting.status == "finished"
    assert "nobody approved it in time" in agent_inputs(waiting)[-1]


def test_no_timeout_by_default(waiting, sent):
    assert approvals.deny_overdue(timezone.now() + dt.timedelta(days=30)) == []
    assert waiting.approvals.filter(status="pending").count() == 2


def test_a_lost_wake_up_is_repeated_by_the_sweeper(waiting, sent):
    # Decided while the run was still stopping: the status move found it `running`.
    Session.objects.filter(pk=waiting.pk).update(status="running")
    for call in waiting.approvals.all():
        approvals.decide(call, approve=True)
    Session.objects.filter(pk=waiting.pk).update(status="waiting_for_approval")
    assert approvals.stranded_waits(send=sent.append) == [waiting.pk]
    assert Session.objects.get(pk=waiting.pk).status == "queued"


def test_cancel_denies_the_waiting_calls(waiting, sent):
    services.request_cancel(waiting)
    assert set(waiting.approvals.values_list("status", flat=True)) == {"denied"}
    execute_session(Session.objects.get(pk=waiting.pk))
    assert Session.objects.get(pk=waiting.pk).status == "cancelled"


def wait_for(pk: int, statuses: tuple[str, ...], timeout: float = 120) -> Session:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        session = Session.objects.get(pk=pk)
        if session.status in statuses:
            return session
        time.sleep(0.2)
    raise AssertionError(f"session {pk} still {Session.objects.get(pk=pk).status}")


def released(pk: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while Session.objects.filter(pk=pk).exclude(lease_owner="").exists():
        assert time.monotonic() < deadline, f"session {pk} still leased"
        time.sleep(0.2)


def test_a_pending_approval_survives_a_worker_restart(tmp_path, sim_profile, client,
                                                      django_user_model, celery_redis_url,
                                                      channels_redis_url):
    owner = django_user_model.objects.create_user("ann", password="ann-secret-42")
    session = services.create_session(owner, "", scenario_file(tmp_path), sim_profile, None, {})
    session.ask_first = ["write_file"]
    session.save(update_fields=["ask_first"])
    with on_broker(celery_redis_url):
        with solo_worker():
            services.start_session(session)
            session = wait_for(session.pk, ("waiting_for_approval", "failed", "finished"))
        assert session.status == "waiting_for_approval", session.error
        # No worker holds it: the run ended and let its lease go.
        released(session.pk)
        # The worker is gone; the decisions are made while none runs.
        client.force_login(owner)
        calls = by_path(session)
        assert post(client, calls["report.md"], decision="approve").status_code == 200
        assert post(client, calls["sales.csv"], decision="deny", reason=REASON).status_code == 200
        assert Session.objects.get(pk=session.pk).status == "queued"
        with solo_worker():  # a new worker takes the message sent meanwhile
            done = wait_for(session.pk, ("finished", "failed", "cancelled"))
    assert done.status == "finished", done.error
    assert (done.workspace / "report.md").exists()
    assert REASON in agent_inputs(done)[-1]


def test_a_sub_agent_asks_before_what_its_parent_does(waiting):
    from taskos.store.django_store import DjangoStore
    child = DjangoStore().create_child(str(waiting.pk), {"goal": "Check the draft.", "turn": 1})
    assert Session.objects.get(pk=child).ask_first == ["write_file"]


def test_runtask_says_a_session_waits_for_approval(tmp_path, sim_profile, settings, sent):
    from django.core.management import CommandError, call_command
    settings.TASKOS_ASK_FIRST = ["write_file"]  # every session asks before write_file
    with pytest.raises(CommandError) as stopped:
        call_command("runtask", "--scenario", scenario_file(tmp_path), "--profile", "sim")
    assert stopped.value.returncode == 5
    session = Session.objects.get()
    assert "waits for a person's approval" in str(stopped.value)
    assert session.status == "waiting_for_approval" and session.approvals.count() == 2
