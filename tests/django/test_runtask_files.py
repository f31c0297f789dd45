"""runtask --file (feature T9): files and folders put into the workspace before the run,
the agent told of them by its first turn's files hint, and every bad path refused before
a session exists."""
from __future__ import annotations

import io
import os
import zipfile

import pytest
from django.core.management import CommandError, call_command

from taskos.runs.models import Session, SessionEvent, WorkspaceFile

pytestmark = pytest.mark.django_db


def runtask(*paths, **kw):
    out, err = io.StringIO(), io.StringIO()
    call_command("runtask", "--goal", "List the files.", "--file", *map(str, paths),
                 stdout=out, stderr=err, **kw)
    return out.getvalue(), err.getvalue()


def test_files_folders_and_zips_reach_the_workspace_and_the_agent(sim_profile,
                                                                  channels_redis_url, tmp_path):
    brief = tmp_path / "brief.txt"
    brief.write_text("Write a short report.")
    folder = tmp_path / "data"
    (folder / "deep").mkdir(parents=True)
    (folder / "q1.csv").write_text("region,revenue\nnorth,12\n")
    (folder / "deep" / "blank.txt").write_text("")
    bundle = tmp_path / "more.zip"
    with zipfile.ZipFile(bundle, "w") as archive:
        archive.writestr("z/inside.md", "# zipped")
    _, err = runtask(brief, folder, bundle)
    assert "Workspace: 4 file(s) added from --file." in err
    session = Session.objects.get()
    assert session.status == "finished"
    workspace = session.workspace
    assert (workspace / "brief.txt").read_text() == "Write a short report."
    assert (workspace / "data/q1.csv").read_text().startswith("region")
    assert (workspace / "data/deep/blank.txt").read_bytes() == b""
    assert (workspace / "z/inside.md").read_text() == "# zipped"
    rows = sorted(WorkspaceFile.objects.values_list("path", "origin", "announced_turn"))
    assert rows == [("brief.txt", "command_line", 0), ("data/deep/blank.txt", "command_line", 0),
                    ("data/q1.csv", "command_line", 0), ("z/inside.md", "command_line", 0)]
    [hint] = [e.payload["text"] for e in SessionEvent.objects.filter(session=session,
                                                                      type="HINT_BLOCK")
              if e.payload["kind"] == "files"]
    assert hint == ("The person added 4 files to the workspace: brief.txt (21 bytes), "
                    "data/q1.csv (24 bytes), data/deep/blank.txt (empty, 0 bytes), "
                    "z/inside.md (8 bytes). Use list_files and read_file to look at them.")


@pytest.mark.parametrize("make, says", [
    (lambda d: d / "missing.csv", "no such file or folder"),
    (lambda d: _link(d), "is a link; give the file or folder itself"),
    (lambda d: _folder_with_link(d), "is a link; links are never copied into a workspace"),
    (lambda d: _fifo(d), "is not a regular file (a device, pipe or socket)"),
    (lambda d: _big(d), "one file may be at most"),
    (lambda d: _bad_zip(d), "the path holds '..'"),
])
def test_a_bad_path_is_refused_before_a_session_exists(sim_profile, tmp_path, settings,
                                                       make, says):
    settings.TASKOS_UPLOAD_MAX_FILE_BYTES = 1000
    with pytest.raises(CommandError) as refused:
        runtask(make(tmp_path))
    assert str(refused.value).startswith("--file: ") and says in str(refused.value)
    assert Session.objects.count() == 0 and WorkspaceFile.objects.count() == 0


def test_two_paths_with_the_same_name_are_refused(sim_profile, tmp_path):
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "same.csv").write_text("1")
    with pytest.raises(CommandError, match="Two files would be named 'same.csv'"):
        runtask(tmp_path / "a" / "same.csv", tmp_path / "b" / "same.csv")
    assert Session.objects.count() == 0


def _link(d):
    (d / "real.csv").write_text("1")
    (d / "link.csv").symlink_to(d / "real.csv")
    return d / "link.csv"


def _folder_with_link(d):
    (d / "f").mkdir()
    (d / "f" / "ok.txt").write_text("1")
    (d / "f" / "escape").symlink_to("/etc")
    return d / "f"


def _fifo(d):
    os.mkfifo(d / "pipe")
    return d / "pipe"


def _big(d):
    (d / "big.bin").write_bytes(b"x" * 1001)
    return d / "big.bin"


def _bad_zip(d):
    with zipfile.ZipFile(d / "bad.zip", "w") as archive:
        archive.writestr("../up.txt", "x")
    return d / "bad.zip"
