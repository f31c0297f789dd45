"""Sub-agents (feature T6) as child sessions on the real Celery worker, and their hand-over."""
from __future__ import annotations

import json

import pytest

from agents.scenarios import SCENARIO_DIR
from taskos.runs import delegation, services
from taskos.runs.models import Session
from taskos.store.django_store import DjangoStore
from tests.django.test_celery import _wait_until_done, worker  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db(transaction=True)

RAW_ROW = "2025-01-31,2025,Q1,North,Solar Panel"  # a line of sales.csv the children read


def research_file(tmp_path, mutate=None) -> str:
    data = json.loads((SCENARIO_DIR / "research-subagents.json").read_text())
    if mutate:
        mutate(data)
    path = tmp_path / "research.json"
    path.write_text(json.dumps(data))
    return str(path)


def agent_inputs(session: Session) -> list[str]:
    """The text of each agent request, rebuilt as sent (rows store what is new, by ref)."""
    from taskos.store.call_messages import full_payload
    rows = session.events.filter(type="MODEL_CALL", payload__kind="agent").order_by("seq")
    return ["\n".join(str(m.get("content") or "")
                      for m in full_payload(session.pk, seq, payload)["messages"])
            for seq, payload in rows.values_list("seq", "payload")]


def test_a_parent_with_three_children_on_the_worker(worker, sim_profile):  # noqa: F811
    # One solo worker: a parent that held its slot while waiting would never finish.
    parent = services.create_session(None, "", "research-subagents", sim_profile, None, {})
    services.start_session(parent)
    done = _wait_until_done(parent.pk)
    assert done.status == "finished", done.error
    children = list(done.children.order_by("id"))
    assert [c.status for c in children] == ["finished"] * 3
    assert all(c.celery_task_id and c.parent_turn == 0 for c in children)
    before, after = agent_inputs(done)
    for child in children:
        assert child.final_answer in after and child.final_answer not in before
        assert RAW_ROW in "\n".join(agent_inputs(child))
        assert child.anchors.filter(tier=1, text__contains="must include a table").exists()
    assert RAW_ROW not in after
    types = list(done.events.values_list("type", flat=True))
    assert types.count("SESSION_WAITING") == 1 and types[-1] == "SESSION_FINISHED"
    results = [p for p in done.events.filter(type="TOOL_RESULT", payload__name="delegate")
               .values_list("payload", flat=True) if p.get("child")]
    assert sorted(p["child"] for p in results) == sorted(str(c.pk) for c in children)
    assert all(p["ref"].startswith(f"arc:{done.pk}:") for p in results)
    assert done.cost_with_children() == done.cost + sum(c.cost for c in children)


def test_a_failed_child_reaches_the_parent_as_a_tool_error(worker, sim_profile,  # noqa: F811
                                                           tmp_path):
    def empty_answers(data):
        data["subtasks"]["quality"]["steps"] = [{"final": ""}]
    parent = services.create_session(None, "", research_file(tmp_path, empty_answers),
                                     sim_profile, None, {})
    services.start_session(parent)
    done = _wait_until_done(parent.pk)
    assert done.status == "finished", done.error
    failed = done.children.get(status="failed")
    assert "empty answer" in failed.error
    errors = [p["error"] for p in done.events.filter(type="TOOL_RESULT", payload__name="delegate")
              .values_list("payload", flat=True) if p.get("child") == str(failed.pk)]
    assert errors == [f"sub-agent session {failed.pk} failed: {failed.error}"]
    assert f"Error: sub-agent session {failed.pk} failed" in agent_inputs(done)[-1]


def test_cancelling_the_parent_cancels_its_children(worker, sim_profile, monkeypatch):  # noqa: F811
    save_state = DjangoStore.save_state
    parent_pk = []

    def cancel_from_the_first_child_turn(self, session_id, state):
        save_state(self, session_id, state)
        row = Session.objects.get(pk=int(session_id))
        if row.parent_id and not row.cancel_requested:  # a person presses Cancel now
            services.request_cancel(row.parent)

    monkeypatch.setattr(DjangoStore, "save_state", cancel_from_the_first_child_turn)
    parent = services.create_session(None, "", "research-subagents", sim_profile, None, {})
    parent_pk.append(parent.pk)
    services.start_session(parent)
    done = _wait_until_done(parent.pk)
    assert done.status == "cancelled"
    children = list(done.children.order_by("id"))
    assert len(children) == 3 and all(c.status == "cancelled" for c in children)
    assert children[0].turns >= 1  # the first was cancelled mid-run, the others before starting
    assert all(c.cancel_requested for c in children)
    # The parent ran once more: its delegate calls were answered with the cancellations.
    errors = [p["error"] for p in done.events.filter(type="TOOL_RESULT", payload__name="delegate")
              .values_list("payload", flat=True) if p.get("child")]
    assert errors == [f"sub-agent session {c.pk} was cancelled" for c in children]
    assert done.events.order_by("-seq").values_list("type", flat=True)[0] == "SESSION_FINISHED"


def test_a_waiting_parent_is_woken_once_whoever_finishes_last(sim_profile, make_session):
    parent = make_session(status="waiting")
    first, second = (make_session(status="running", parent=parent) for _ in range(2))
    sent = []
    Session.objects.filter(pk=first.pk).update(status="finished")
    delegation.after_run(first.pk, send=sent.append)
    assert sent == []  # the second child still runs
    Session.objects.filter(pk=second.pk).update(status="failed")
    delegation.after_run(second.pk, send=sent.append)
    delegation.after_run(first.pk, send=sent.append)  # a late duplicate hand-over
    assert sent == [parent.pk]
    assert Session.objects.get(pk=parent.pk).status == "queued"


def test_the_sweeper_wakes_a_parent_whose_wake_up_was_lost(sim_profile, make_session):
    from taskos.worker.sweeper import sweep
    parent = make_session(status="waiting")
    make_session(status="finished", parent=parent)
    busy = make_session(status="waiting")
    make_session(status="running", parent=busy)
    sent = []
    assert parent.pk in sweep(send=sent.append) and busy.pk not in sent
    assert Session.objects.get(pk=parent.pk).status == "queued"
