"""Workspace tools (feature T5): files inside the session folder only."""
from __future__ import annotations

import os

import pytest


def test_write_list_and_read(call, workspace):
    assert call("write_file", path="notes/report.md", content="# Report\n").content == \
        "Wrote 9 characters to notes/report.md."
    assert call("write_file", path="notes/report.md", content="| a |\n", append=True).content == \
        "Appended 6 characters to notes/report.md."
    (workspace / "sales.csv").write_text("region,revenue\nEast,1\n")
    assert call("list_files").content == ("2 files under '.':\npath,bytes\nnotes/report.md,15\n"
                                          "sales.csv,22")
    assert call("list_files", path="notes").content == \
        "1 file under 'notes':\npath,bytes\nnotes/report.md,15"
    assert call("read_file", path="notes/report.md").content == "# Report\n| a |\n"


@pytest.mark.parametrize("path, message", [
    ("../secret.txt", "Path '../secret.txt' resolves outside the workspace; only files inside it "
                      "can be used."),
    ("notes/../../secret.txt", "Path 'notes/../../secret.txt' resolves outside the workspace; "
                               "only files inside it can be used."),
    ("/etc/passwd", "Path '/etc/passwd' is absolute; use a path relative to the workspace, "
                    "e.g. 'sales.csv'."),
    ("", "Give a file path relative to the workspace, e.g. 'sales.csv'."),
])
def test_paths_outside_the_workspace_are_refused(call, workspace, path, message):
    (workspace.parent / "secret.txt").write_text("top secret")
    for tool, args in (("read_file", {}), ("write_file", {"content": "x"})):
        outcome = call(tool, path=path, **args)
        assert outcome.error == message
        assert "top secret" not in outcome.content
    assert (workspace.parent / "secret.txt").read_text() == "top secret"


def test_symlinks_are_refused_wherever_they_point(call, workspace):
    outside = workspace.parent / "outside"
    outside.mkdir()
    (outside / "data.csv").write_text("secret,1\n")
    os.symlink(outside / "data.csv", workspace / "link.csv")
    os.symlink(outside, workspace / "linkdir")
    (workspace / "real.csv").write_text("a,b\n1,2\n")
    os.symlink("real.csv", workspace / "inside.csv")  # pointing inside: still not followed
    never = "the tools use only real files inside the workspace, never through a link."
    assert call("read_file", path="link.csv").error == f"'link.csv' is a link; {never}"
    assert call("read_file", path="inside.csv").error == f"'inside.csv' is a link; {never}"
    assert call("write_file", path="linkdir/new.txt", content="x").error == \
        f"Path 'linkdir/new.txt' goes through the link 'linkdir'; {never}"
    assert call("write_file", path="link.csv", content="x").error == \
        f"'link.csv' is a link; {never}"
    assert call("csv_describe", path="link.csv").error == f"'link.csv' is a link; {never}"
    assert call("list_files", path="linkdir").error == f"'linkdir' is a link; {never}"
    assert not (outside / "new.txt").exists()
    assert (outside / "data.csv").read_text() == "secret,1\n"
    assert call("list_files").content == (
        "1 file under '.':\npath,bytes\nreal.csv,8\n"
        f"Not listed, links or not regular files: inside.csv, link.csv, linkdir; {never}")


def test_missing_files_and_folders(call, workspace):
    (workspace / "sub").mkdir()
    assert call("read_file", path="nope.txt").error == \
        "No file 'nope.txt' in the workspace. Use list_files to see what is there."
    assert call("read_file", path="sub").error == \
        "'sub' is a folder; use list_files(path='sub') to see its files."
    assert call("list_files", path="missing").error == \
        "No folder 'missing' in the workspace. Use list_files() for the top level."
    assert call("write_file", path="sub", content="x").error == \
        "'sub' is a folder; give a file name inside it."


def test_a_big_file_is_bounded_and_readable_in_full(call, workspace, store):
    text = "".join(f"log line {i}: status ok\n" for i in range(20_000))
    (workspace / "big.log").write_text(text)
    outcome = call("read_file", path="big.log")
    assert outcome.truncated and len(outcome.content) <= 8000
    assert outcome.original_chars == len(text) >= 20 * 8000 - 1
    assert store.read_ref("s1", outcome.ref) == text


def test_a_binary_file_is_archived_as_bytes(call, workspace, store):
    import base64

    (workspace / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    outcome = call("read_file", path="image.png")
    assert outcome.content.startswith("Binary output: 264 bytes")
    assert base64.b64decode(store.read_ref("s1", outcome.ref)).startswith(b"\x89PNG")
