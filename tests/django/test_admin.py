"""Admin (features W1, W4): staff-only, inlines on a session, edits marked as admin edits."""
import pytest
from django.urls import reverse

from taskos.runs.models import Anchor, Task

pytestmark = pytest.mark.django_db


def _inline_management(prefix: str, total: int, initial: int) -> dict:
    return {f"{prefix}-TOTAL_FORMS": str(total), f"{prefix}-INITIAL_FORMS": str(initial),
            f"{prefix}-MIN_NUM_FORMS": "0", f"{prefix}-MAX_NUM_FORMS": "1000"}


def test_staff_see_the_session_changelist_with_status_and_tokens(client, staff_user, make_session):
    make_session(goal="Analyse regional sales", status="running", turns=7,
                 total_input_tokens=12345)
    client.force_login(staff_user)
    response = client.get(reverse("admin:runs_session_changelist"))
    assert response.status_code == 200
    body = response.content.decode()
    assert "Analyse regional sales" in body and "12345" in body and "running" in body


def test_session_change_page_has_anchor_and_task_inlines(client, staff_user, make_session):
    session = make_session()
    Anchor.objects.create(session=session, tier=1, text="budget must stay under 50k")
    Task.objects.create(session=session, task_id="1", subject="load the CSV")
    client.force_login(staff_user)
    response = client.get(reverse("admin:runs_session_change", args=[session.pk]))
    assert response.status_code == 200
    body = response.content.decode()
    assert "anchors-TOTAL_FORMS" in body and "tasks-TOTAL_FORMS" in body
    assert "budget must stay under 50k" in body and "load the CSV" in body


def test_non_staff_are_sent_to_the_admin_login(client, plain_user, make_session):
    session = make_session()
    client.force_login(plain_user)
    for url in (reverse("admin:runs_session_changelist"),
                reverse("admin:runs_session_change", args=[session.pk]),
                reverse("admin:runs_anchor_changelist")):
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_saving_an_anchor_in_the_admin_marks_it_as_an_admin_edit(client, staff_user, make_session):
    session = make_session()
    anchor = Anchor.objects.create(session=session, tier=2, text="region A sales -12%",
                                   source="tool", turn=4)
    client.force_login(staff_user)
    response = client.post(reverse("admin:runs_anchor_change", args=[anchor.pk]), {
        "session": session.pk, "tier": 1, "text": "region A sales -15%", "key": "region-a",
        "active": "on", "turn": 4})
    assert response.status_code == 302, response.content.decode()[:2000]
    anchor.refresh_from_db()
    assert (anchor.text, anchor.tier, anchor.source) == ("region A sales -15%", 1, "admin")
    # The replaced version stays in the database, inactive (issue 13).
    old = Anchor.objects.get(session=session, active=False)
    assert (old.text, old.tier, old.source, old.turn) == ("region A sales -12%", 2, "tool", 4)
    client.post(reverse("admin:runs_anchor_change", args=[anchor.pk]), {
        "session": session.pk, "tier": 1, "text": "region A sales -15%", "key": "region-a",
        "active": "on", "turn": 4})
    assert Anchor.objects.filter(session=session).count() == 2  # same text: no copy


def test_inline_edits_on_the_session_page_mark_anchors_and_tasks(client, staff_user, make_session):
    # "initial-…" fields: what the admin page renders for fields with a callable default.
    session = make_session(status="running")
    anchor = Anchor.objects.create(session=session, tier=2, text="old conclusion", source="tool")
    task = Task.objects.create(session=session, task_id="1", subject="load", metadata={"k": 1})
    untouched = Task.objects.create(session=session, task_id="2", subject="report")
    client.force_login(staff_user)
    data = {"goal": session.goal, "scenario": "", "owner": "", "profile": session.profile_id,
            "window": session.window, "context_settings": "{}", "compact_request": "",
            **_inline_management("anchors", 1, 1), **_inline_management("tasks", 2, 2),
            "anchors-0-id": anchor.pk, "anchors-0-session": session.pk, "anchors-0-tier": 2,
            "anchors-0-text": "new conclusion", "anchors-0-key": "", "anchors-0-active": "on",
            "tasks-0-id": task.pk, "tasks-0-session": session.pk, "tasks-0-task_id": "1",
            "tasks-0-subject": "load", "tasks-0-state": "completed", "tasks-0-owner": "",
            "tasks-0-blocked_by": "[]", "initial-tasks-0-blocked_by": "[]",
            "tasks-0-description": "",
            "tasks-1-id": untouched.pk, "tasks-1-session": session.pk, "tasks-1-task_id": "2",
            "tasks-1-subject": "report", "tasks-1-state": "pending", "tasks-1-owner": "",
            "tasks-1-blocked_by": "[]", "initial-tasks-1-blocked_by": "[]",
            "tasks-1-description": ""}
    response = client.post(reverse("admin:runs_session_change", args=[session.pk]), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    anchor.refresh_from_db()
    task.refresh_from_db()
    untouched.refresh_from_db()
    assert (anchor.text, anchor.source) == ("new conclusion", "admin")
    assert task.state == "completed" and task.metadata == {"k": 1, "edited_by": "admin"}
    assert "edited_by" not in untouched.metadata  # only changed rows count as admin edits


def test_saving_a_task_in_the_admin_records_the_edit(client, staff_user, make_session):
    session = make_session()
    task = Task.objects.create(session=session, task_id="3", subject="plot")
    client.force_login(staff_user)
    response = client.post(reverse("admin:runs_task_change", args=[task.pk]), {
        "session": session.pk, "task_id": "3", "subject": "plot by quarter",
        "description": "", "state": "pending", "owner": "", "blocks": "[]",
        "blocked_by": "[]", "metadata": "{}", "created_at_0": "2025-01-01",
        "created_at_1": "00:00:00"})
    assert response.status_code == 302, response.content.decode()[:2000]
    task.refresh_from_db()
    assert task.subject == "plot by quarter" and task.metadata["edited_by"] == "admin"


def test_task_ids_and_metadata_are_readable_and_editable_in_the_admin():
    from taskos.runs.admin import TaskForm

    form = TaskForm()
    assert form.fields["blocked_by"].prepare_value(["1", "2"]) == "1, 2"
    assert form.fields["metadata"].prepare_value({"a": 1}) == '{\n  "a": 1\n}'
    assert form.fields["blocked_by"].clean("1, 2 ,") == ["1", "2"]
    assert form.fields["blocks"].clean('["3"]') == ["3"]


def test_a_profile_with_an_assumed_window_is_flagged_in_the_admin(client, staff_user):
    from taskos.runs.models import ModelProfile
    profile = ModelProfile.objects.create(name="mine", model="my-llm", api_key_env="",
                                          base_url="http://127.0.0.1:9/v1")
    client.force_login(staff_user)
    listing = client.get(reverse("admin:runs_modelprofile_changelist")).content.decode()
    assert "128,000 (assumed: set the real one)" in listing
    page = client.get(reverse("admin:runs_modelprofile_change", args=[profile.pk]),
                      follow=True).content.decode()
    assert "is unknown and profile" in page and "sets no context size" in page
