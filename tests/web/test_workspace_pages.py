"""The person's files on the dashboard (feature T9): the start form takes files and zips,
the session page lists, previews and downloads them and takes more, a new task starts
from a workspace; every bad upload is refused by its field with nothing stored."""
from __future__ import annotations

import io
import stat
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from taskos.runs.models import Session, SessionEvent, WorkspaceFile

from .test_pages import form_data

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def small_limits(settings, tmp_path):
    settings.TASKOS_WORKSPACES = tmp_path / "workspaces"
    settings.TASKOS_UPLOAD_MAX_FILE_BYTES = 2000
    settings.TASKOS_UPLOAD_MAX_SESSION_BYTES = 5000
    settings.TASKOS_UPLOAD_MAX_FILES = 5
    settings.TASKOS_UPLOAD_MAX_ZIP_RATIO = 100


def upload(name: str, data: bytes | str = b"a,b\n1,2\n") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data.encode() if isinstance(data, str) else data)


def zipped(members: dict[str, bytes], link: str | None = None) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, data in members.items():
            bundle.writestr(name, data)
        if link:
            info = zipfile.ZipInfo(link)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            bundle.writestr(info, "/etc/passwd")
    return SimpleUploadedFile("bundle.zip", buffer.getvalue())


def start(client, files=(), **overrides):
    return client.post("/sessions/new", {**form_data(**overrides), "files": list(files)})


def files_in(session: Session) -> dict[str, bytes]:
    root = session.workspace
    if not root.exists():
        return {}
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file()}


def field_errors(response, field: str = "files") -> list[str]:
    return list(response.context["form"].errors.get(field, []))


# --- the start form

def test_the_start_form_takes_several_files_and_a_zip(ann_client, ann):
    response = start(ann_client, [upload("q1.csv"), upload("brief.txt", "Write a report."),
                                  zipped({"data/q2.csv": b"x,y\n3,4\n", "data/": b""})])
    session = Session.objects.get()
    assert response.status_code == 302 and response.url == f"/sessions/{session.pk}/"
    assert files_in(session) == {"q1.csv": b"a,b\n1,2\n", "brief.txt": b"Write a report.",
                                 "data/q2.csv": b"x,y\n3,4\n"}
    rows = {(r.path, r.size, r.origin, r.added_by_id, r.after_turn, r.announced_turn)
            for r in WorkspaceFile.objects.all()}
    assert rows == {("q1.csv", 8, "upload", ann.pk, 0, None),
                    ("brief.txt", 15, "upload", ann.pk, 0, None),
                    ("data/q2.csv", 8, "upload", ann.pk, 0, None)}


def test_the_start_form_says_what_files_it_takes(ann_client):
    html = ann_client.get("/sessions/new").content.decode()
    assert 'enctype="multipart/form-data"' in html and 'type="file"' in html
    assert "multiple" in html and "Up to 2.0 KB a file, 4.9 KB and 5 files per task." in html


BAD_UPLOADS = [
    ([upload("big.csv", b"x" * 2001)], "'big.csv' is 2.0 KB; one file may be at most 2.0 KB."),
    ([upload(f"f{i}.txt") for i in range(6)],
     "6 files, and the workspace has 0 from you already: at most 5 are taken per session."),
    ([upload(f"f{i}.txt", b"x" * 1500) for i in range(4)],
     "5.9 KB of files, with 0 bytes you brought already: at most 4.9 KB are taken per session."),
    ([upload("same.csv"), upload("same.csv")],
     "Two files would be named 'same.csv' ('same.csv' and 'same.csv'); rename one and upload "
     "again."),
    ([upload("Same.csv"), zipped({"same.csv": b"1"})], "Two files would be named 'same.csv'"),
    ([zipped({"../escape.txt": b"x"})],
     "'bundle.zip: ../escape.txt': the path holds '..', which would leave the workspace; only "
     "paths inside it are taken."),
    ([zipped({"/etc/cron.d/x": b"x"})],
     "'bundle.zip: /etc/cron.d/x': an absolute path; only paths inside the workspace are taken."),
    ([zipped({"ok.txt": b"x"}, link="innocent.txt")],
     "'bundle.zip': member 'innocent.txt' is a symbolic link; a zip may hold only files and "
     "folders."),
    ([zipped({"zeros.bin": b"\0" * 1_900})], None),  # small: ratio not judged, within limits
    ([zipped({f"f{i}": b"x" for i in range(6)})],
     "'bundle.zip' holds more than 5 files, the most one workspace takes."),
    ([SimpleUploadedFile("fake.zip", b"not a zip")], "'fake.zip': not a readable zip file"),
    ([upload("x" * 230 + ".csv")], "the name is 234 characters long; at most 200 are taken."),
    ([upload("y" * 300 + ".csv")], "the name is 255 characters or more long; at most 200 are "
                                   "taken."),  # Django cuts the name at 255
]


@pytest.mark.parametrize("files, says", BAD_UPLOADS)
def test_a_bad_upload_on_the_start_form_is_refused_by_its_field(ann_client, files, says):
    response = start(ann_client, files)
    if says is None:
        assert response.status_code == 302
        return
    assert response.status_code == 400
    [error] = field_errors(response)
    assert says in error
    assert Session.objects.count() == 0 and WorkspaceFile.objects.count() == 0
    assert says.split(";")[0][:40] in response.content.decode().replace("&#x27;", "'")


@pytest.mark.parametrize("name", ["bad\x00name.csv", "tab\tname.csv", "new\nline.csv"])
def test_a_nul_or_control_character_in_a_browser_name_is_dropped_and_the_name_shown(
        ann_client, name):
    # Django's multipart parser hands the form the name without them; a zip member or a
    # command-line path keeps them and is refused (test_workspace_intake.py).
    response = start(ann_client, [upload(name)])
    assert response.status_code == 302
    session = Session.objects.get()
    [stored] = files_in(session)
    assert stored == name.replace("\x00", "").replace("\t", "").replace("\n", "")
    assert f'data-path="{stored}"' in ann_client.get(response.url).content.decode()


def test_a_nul_in_a_zip_members_name_cuts_it_there(ann_client):
    # Python's zipfile ends a member's name at its first NUL, as the zip format says.
    assert start(ann_client, [zipped({"bad\x00name.txt": b"x"})]).status_code == 302
    assert files_in(Session.objects.get()) == {"bad": b"x"}


def test_a_zip_bomb_is_refused_before_unpacking(ann_client, settings):
    settings.TASKOS_UPLOAD_MAX_FILE_BYTES = 50 * 2**20
    settings.TASKOS_UPLOAD_MAX_SESSION_BYTES = 100 * 2**20
    response = start(ann_client, [zipped({"zeros.bin": b"\0" * (20 * 2**20)})])
    assert response.status_code == 400
    [error] = field_errors(response)
    assert "expands" in error and "looks like a zip bomb" in error
    assert Session.objects.count() == 0


def test_an_empty_file_is_kept_and_said(ann_client, client):
    response = start(ann_client, [upload("empty.txt", b""), upload("q1.csv")])
    assert response.status_code == 302
    session = Session.objects.get()
    assert files_in(session)["empty.txt"] == b""
    html = ann_client.get(f"/sessions/{session.pk}/").content.decode()
    assert '<span class="tag">empty</span>' in html
    preview = ann_client.get(f"/sessions/{session.pk}/workspace/preview?path=empty.txt")
    assert "This file is empty (0 bytes)." in preview.content.decode()


def test_files_that_cannot_be_written_leave_no_session_and_no_file(ann_client, monkeypatch):
    from taskos.workspaces import intake

    real = intake._copy
    calls = []

    def full_disk(workspace, item):
        calls.append(item.path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(workspace, item)
    monkeypatch.setattr(intake, "_copy", full_disk)
    response = start(ann_client, [upload("a.csv"), upload("b.csv")])
    assert response.status_code == 400
    assert "could not be written (No space left on device)" in field_errors(response)[0]
    assert "No task was started" in response.content.decode()
    assert Session.objects.count() == 0 and WorkspaceFile.objects.count() == 0


# --- the session page

def started(client, files) -> Session:
    assert start(client, files).status_code == 302
    return Session.objects.order_by("-pk").first()


def test_the_session_page_lists_the_workspace_with_who_wrote_what(ann_client, ann):
    session = started(ann_client, [upload("q1.csv")])
    (session.workspace / "report.md").write_text("# Report\n")
    (session.workspace / "sales.csv").write_text("demo")  # the demo data's name
    SessionEvent.objects.create(session=session, seq=1, type="TOOL_CALL", turn=3,
                                at=session.created_at.replace(year=2100),
                                payload={"call_id": "c", "name": "write_file",
                                         # as the engine stores it: the model's JSON text
                                         "args": '{"path": "report.md", "content": "x"}'})
    html = ann_client.get(f"/sessions/{session.pk}/").content.decode()
    assert 'id="workspace"' in html and "3 files" in html
    assert '<tr data-path="q1.csv"><td><code>q1.csv</code></td>' in html
    rows = {path: html.split(f'data-path="{path}"')[1].split("</tr>")[0]
            for path in ("q1.csv", "report.md", "sales.csv")}
    assert "you (ann), at the start" in rows["q1.csv"]
    assert "agent, turn 3" in rows["report.md"]
    assert "TaskOS demo data" in rows["sales.csv"]
    assert f"/sessions/{session.pk}/workspace.zip" in html
    assert f'href="/sessions/new?from={session.pk}"' in html


def test_preview_shows_csv_as_a_table_text_as_text_and_binary_as_binary(ann_client):
    session = started(ann_client, [upload("q1.csv", "region,revenue\nnorth,12\n<b>s</b>,3\n"),
                                   upload("notes.txt", "héllo <script>"),
                                   upload("photo.png", b"\x89PNG\r\n\x1a\n\x00\x00")])
    base = f"/sessions/{session.pk}/workspace/preview?path="
    table = ann_client.get(base + "q1.csv").content.decode()
    assert "<th>region</th><th>revenue</th>" in table and "<td>&lt;b&gt;s&lt;/b&gt;</td>" in table
    text = ann_client.get(base + "notes.txt").content.decode()
    assert "héllo &lt;script&gt;" in text
    binary = ann_client.get(base + "photo.png").content.decode()
    assert "A binary file (10 bytes): it has no text preview." in binary


def test_one_file_and_the_whole_workspace_download(ann_client):
    session = started(ann_client, [upload("q1.csv"), zipped({"d/e.txt": b"deep"})])
    one = ann_client.get(f"/sessions/{session.pk}/workspace/file?path=d/e.txt")
    assert one.status_code == 200 and b"".join(one.streaming_content) == b"deep"
    assert 'attachment; filename="e.txt"' in one["Content-Disposition"]
    whole = ann_client.get(f"/sessions/{session.pk}/workspace.zip")
    bundle = zipfile.ZipFile(io.BytesIO(b"".join(whole.streaming_content)))
    assert {n: bundle.read(n) for n in bundle.namelist()} == {"q1.csv": b"a,b\n1,2\n",
                                                             "d/e.txt": b"deep"}


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/passwd", "missing.txt", "link"])
def test_a_download_never_leaves_the_workspace(ann_client, path):
    session = started(ann_client, [upload("q1.csv")])
    (session.workspace / "link").symlink_to("/etc/passwd")
    for view in ("file", "preview"):
        assert ann_client.get(f"/sessions/{session.pk}/workspace/{view}?path={path}"
                              ).status_code == 404


def test_someone_elses_workspace_is_not_found(client, bob, ann_client):
    session = started(ann_client, [upload("q1.csv")])
    client.force_login(bob)
    for url in ("workspace/file?path=q1.csv", "workspace/preview?path=q1.csv",
                "workspace.zip"):
        assert client.get(f"/sessions/{session.pk}/{url}").status_code == 404
    assert client.post(f"/sessions/{session.pk}/workspace/add",
                       {"files": [upload("x.txt")]}).status_code == 404


def test_files_added_to_a_running_session_are_recorded_for_the_agent(ann_client):
    session = started(ann_client, [upload("q1.csv")])
    Session.objects.filter(pk=session.pk).update(status="running", turns=4)
    response = ann_client.post(f"/sessions/{session.pk}/workspace/add",
                               {"files": [upload("q2.csv"), upload("blank.txt", b"")]})
    assert response.status_code == 302 and response.url.endswith("#workspace")
    added = WorkspaceFile.objects.filter(path__in=["q2.csv", "blank.txt"])
    assert {(r.path, r.after_turn, r.announced_turn) for r in added} == {
        ("q2.csv", 4, None), ("blank.txt", 4, None)}
    html = ann_client.get(response.url).content.decode()
    assert ("Added 2 files to the workspace: q2.csv, blank.txt. Empty (0 bytes), kept as "
            "empty files: blank.txt. The agent is told on its next turn.") in html
    assert "you (ann), after turn 4" in html


def test_files_added_to_a_finished_session_say_how_to_use_them(ann_client):
    session = started(ann_client, [upload("q1.csv")])
    Session.objects.filter(pk=session.pk).update(status="finished")
    response = ann_client.post(f"/sessions/{session.pk}/workspace/add",
                               {"files": [upload("later.txt", "x")]}, follow=True)
    assert "start a new task from this workspace" in response.content.decode()


@pytest.mark.parametrize("files, says", [
    ([upload("q1.csv")], "'q1.csv' is already in the workspace; rename the file and upload "
                         "again (nothing in the workspace is replaced)."),
    ([upload("q2.csv", b"x" * 1500), upload("q3.csv", b"x" * 1500),
      upload("q4.csv", b"x" * 1500)],
     "at most 4.9 KB are taken per session"),
    ([], "Choose at least one file."),
    ([upload("a.txt"), upload("b.txt"), upload("c.txt"), upload("d.txt"), upload("e.txt")],
     "5 files, and the workspace has 1 from you already: at most 5 are taken per session."),
])
def test_a_bad_addition_is_refused_and_the_workspace_is_as_it_was(ann_client, files, says):
    session = started(ann_client, [upload("q1.csv", b"x" * 1000)])
    before = files_in(session)
    response = ann_client.post(f"/sessions/{session.pk}/workspace/add", {"files": files})
    assert response.status_code == 400
    html = response.content.decode().replace("&#x27;", "'")
    assert says in html and "Nothing was uploaded: the workspace is as it was." in html
    assert files_in(session) == before and WorkspaceFile.objects.count() == 1


# --- a new task from a workspace

def test_a_new_task_starts_from_a_sessions_workspace(ann_client, ann):
    source = started(ann_client, [upload("q1.csv"), zipped({"d/e.txt": b"deep"})])
    (source.workspace / "report.md").write_text("the agent's report")
    form = ann_client.get(f"/sessions/new?from={source.pk}").content.decode()
    assert f'name="from_session" value="{source.pk}"' in form
    assert f"The files of session <a href=\"/sessions/{source.pk}/\">#{source.pk}</a>" in form
    response = ann_client.post("/sessions/new", {**form_data(), "from_session": source.pk,
                                                 "files": [upload("extra.txt", "more")]})
    assert response.status_code == 302
    copy = Session.objects.order_by("-pk").first()
    assert files_in(copy) == {"q1.csv": b"a,b\n1,2\n", "d/e.txt": b"deep",
                              "report.md": b"the agent's report", "extra.txt": b"more"}
    origins = dict(copy.workspace_files.values_list("path", "origin"))
    assert origins == {"q1.csv": "copy", "d/e.txt": "copy", "report.md": "copy",
                       "extra.txt": "upload"}
    assert files_in(source)["report.md"] == b"the agent's report"  # the source is untouched


def test_copying_someone_elses_workspace_is_refused(client, bob, ann_client):
    source = started(ann_client, [upload("q1.csv")])
    client.force_login(bob)
    response = client.post("/sessions/new", {**form_data(), "from_session": source.pk})
    assert response.status_code == 400
    assert field_errors(response, "from_session") == [
        f"Session #{source.pk} is not one of yours; its workspace cannot be copied."]
    assert Session.objects.count() == 1


def test_a_copy_and_an_upload_with_the_same_name_are_refused(ann_client):
    source = started(ann_client, [upload("q1.csv")])
    response = ann_client.post("/sessions/new", {**form_data(), "from_session": source.pk,
                                                 "files": [upload("q1.csv", "mine")]})
    assert response.status_code == 400
    assert "Two files would be named 'q1.csv'" in field_errors(response)[0]
    assert Session.objects.count() == 1


def test_the_admin_lists_the_persons_files_read_only(admin_client, ann_client):
    session = started(ann_client, [upload("q1.csv")])
    listing = admin_client.get("/admin/runs/workspacefile/").content.decode()
    assert "q1.csv" in listing and f"#{session.pk}" in listing
    row = WorkspaceFile.objects.get()
    assert admin_client.get("/admin/runs/workspacefile/add/").status_code == 403
    assert admin_client.post(f"/admin/runs/workspacefile/{row.pk}/change/",
                             {"path": "other.csv"}).status_code == 403
    assert WorkspaceFile.objects.get().path == "q1.csv"
