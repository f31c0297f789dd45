"""A long session's admin change page can be saved: its inlines show a bounded number of
rows (the active anchors first) with a link to the rest, so Save no longer posts more than
DATA_UPLOAD_MAX_NUMBER_FIELDS fields (it was a 400 and the edit was lost)."""
from __future__ import annotations

from html.parser import HTMLParser

import pytest

from taskos.runs.admin import INLINE_ROWS
from taskos.runs.models import Anchor, Task

pytestmark = pytest.mark.django_db


class FormFields(HTMLParser):
    """The fields the change form posts, as a browser would post them unchanged."""

    def __init__(self) -> None:
        super().__init__()
        self.data: list[tuple[str, str]] = []
        self.textarea: str | None = None
        self.select: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        name = a.get("name")
        if tag == "input" and name and a.get("type") not in ("submit", "button", "file"):
            if a.get("type") in ("checkbox", "radio") and "checked" not in a:
                return
            self.data.append((name, a.get("value") or ("on" if a.get("type") == "checkbox"
                                                        else "")))
        elif tag == "textarea" and name:
            self.textarea = name
            self.data.append((name, ""))
        elif tag == "select" and name:
            self.select = name
        elif tag == "option" and self.select and "selected" in a:
            self.data.append((self.select, a.get("value") or ""))

    def handle_endtag(self, tag):
        if tag == "textarea":
            self.textarea = None
        elif tag == "select":
            self.select = None

    def handle_data(self, data):
        if self.textarea:
            name, text = self.data[-1]
            self.data[-1] = (name, text + data)


def form_of(html: str) -> dict[str, list[str]]:
    parser = FormFields()
    parser.feed(html)
    fields: dict[str, list[str]] = {}
    for name, value in parser.data:
        fields.setdefault(name, []).append(value)
    # A textarea's content starts after one newline the browser drops.
    return {k: [v[1:] if v.startswith("\n") else v for v in vs] for k, vs in fields.items()}


@pytest.fixture
def long_session(make_session, staff_user):
    session = make_session(owner=staff_user, goal="A long run", status="running")
    Anchor.objects.bulk_create(
        [Anchor(session=session, tier=2, text=f"conclusion {n}", turn=n) for n in range(400)]
        + [Anchor(session=session, tier=2, text=f"old text {n}", active=False) for n in range(30)])
    Task.objects.bulk_create([Task(session=session, task_id=str(n), subject=f"step {n}")
                              for n in range(120)])
    return session


def test_a_session_with_400_anchors_is_saved_from_its_admin_page(client, staff_user,
                                                                  long_session):
    client.force_login(staff_user)
    url = f"/admin/runs/session/{long_session.pk}/change/"
    page = client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    data = form_of(html)
    assert sum(len(v) for v in data.values()) < 1000
    assert data["anchors-INITIAL_FORMS"] == [str(INLINE_ROWS)]
    assert data["tasks-INITIAL_FORMS"] == [str(INLINE_ROWS)]
    # The page says what it leaves out and links to the session's anchors and tasks.
    assert "400 active of them; below, the first 50 active" in html
    assert f'href="/admin/runs/anchor/?session__id__exact={long_session.pk}"' in html
    assert f'href="/admin/runs/task/?session__id__exact={long_session.pk}"' in html
    assert "old text" not in html

    data["goal"] = ["A long run, edited in the admin"]
    first = data["anchors-0-id"][0]
    data["anchors-0-text"] = ["conclusion 0, corrected"]
    response = client.post(url, data)
    assert response.status_code == 302, response.content[:2000]
    long_session.refresh_from_db()
    assert long_session.goal == "A long run, edited in the admin"
    edited = Anchor.objects.get(pk=first)
    assert (edited.text, edited.source) == ("conclusion 0, corrected", "admin")
    assert Anchor.objects.filter(session=long_session).count() == 431  # + the old version
    assert Task.objects.filter(session=long_session).count() == 120


def test_the_linked_lists_show_the_session_rows(client, staff_user, long_session):
    client.force_login(staff_user)
    anchors = client.get(f"/admin/runs/anchor/?session__id__exact={long_session.pk}")
    tasks = client.get(f"/admin/runs/task/?session__id__exact={long_session.pk}")
    assert anchors.status_code == tasks.status_code == 200
    assert anchors.context["cl"].result_count == 430
    assert tasks.context["cl"].result_count == 120


def test_a_short_session_shows_every_row(client, staff_user, make_session):
    session = make_session(owner=staff_user, goal="Short")
    Anchor.objects.create(session=session, text="only one")
    client.force_login(staff_user)
    html = client.get(f"/admin/runs/session/{session.pk}/change/").content.decode()
    assert "1 anchor below" in html and "only one" in html
