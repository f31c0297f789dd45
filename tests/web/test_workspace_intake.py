"""Names made safe, zips checked and uploads stored all or nothing (feature T9), without
Django: taskos/workspaces/intake.py."""
from __future__ import annotations

import io
import os
import stat
import zipfile

import pytest

from taskos.workspaces.intake import (MAX_NAME_CHARS, Incoming, Limits, UploadRefused,
                                      check_plan, safe_path, store, zip_members)

LIMITS = Limits(file_bytes=1000, session_bytes=5000, files=10, zip_ratio=100)
BIG = Limits(file_bytes=50 * 2**20, session_bytes=100 * 2**20, files=10, zip_ratio=100)


def item(path: str, data: bytes = b"x") -> Incoming:
    return Incoming(path=path, size=len(data), opener=lambda: io.BytesIO(data), shown=repr(path))


def make_zip(members: dict[str, bytes], *, links: dict[str, str] | None = None,
             modes: dict[str, int] | None = None) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, data in members.items():
            bundle.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            bundle.writestr(info, target)
        for name, mode in (modes or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            bundle.writestr(info, b"")
    buffer.seek(0)
    return buffer


@pytest.mark.parametrize("name, expected", [
    ("sales.csv", "sales.csv"), ("data/q1.csv", "data/q1.csv"), ("./a//b.txt", "a/b.txt"),
    ("dir\\win.txt", "dir/win.txt"), ("ünïcode name.txt", "ünïcode name.txt")])
def test_safe_names_pass(name, expected):
    assert safe_path(name) == expected


@pytest.mark.parametrize("name, says", [
    ("../etc/passwd", "'..'"), ("a/../../b", "'..'"), ("/etc/passwd", "absolute path"),
    ("C:/Windows/x.txt", "absolute path"), ("\\\\server\\share.txt", "absolute path"),
    ("bad\x00name.txt", "NUL"), ("tab\tname", "control character"),
    ("x" * 300, f"300 characters long; at most {MAX_NAME_CHARS}"),
    ("é" * 150, "300 bytes long in UTF-8"), ("..", "'..'"), ("", "without a name"),
    ("/".join(["d"] * 25) + "/f", "folders deep")])
def test_unsafe_names_are_refused_with_the_reason(name, says):
    with pytest.raises(UploadRefused) as refused:
        safe_path(name)
    assert says in str(refused.value)


def test_a_refused_name_is_shown_readably():
    with pytest.raises(UploadRefused) as refused:
        safe_path("bad\x00name.txt")
    assert "bad\\x00name.txt" in str(refused.value)


def test_zip_members_keep_their_folders():
    members = zip_members(make_zip({"report/a.csv": b"a,b\n1,2\n", "report/": b"",
                                    "notes.txt": b"hi"}), "up.zip", LIMITS)
    assert sorted(m.path for m in members) == ["notes.txt", "report/a.csv"]


@pytest.mark.parametrize("members, links, modes, says", [
    ({"../evil.txt": b"x"}, None, None, "'..'"),
    ({"/abs.txt": b"x"}, None, None, "absolute path"),
    ({}, {"link": "/etc/passwd"}, None, "is a symbolic link"),
    ({}, None, {"dev": stat.S_IFCHR | 0o600}, "is a device file"),
    ({}, None, {"fifo": stat.S_IFIFO | 0o600}, "is a named pipe"),
    ({"big.bin": b"x" * 1001}, None, None, "one file may be at most"),
    ({f"f{i}.txt": b"x" for i in range(11)}, None, None, "holds more than 10 files"),
    ({f"f{i}.txt": b"x" * 900 for i in range(6)}, None, None, "unpacks to more than")])
def test_bad_zips_are_refused_before_anything_is_unpacked(members, links, modes, says):
    with pytest.raises(UploadRefused) as refused:
        zip_members(make_zip(members, links=links, modes=modes), "up.zip", LIMITS)
    assert says in str(refused.value)


def test_a_zip_bomb_is_refused_by_its_ratio():
    bomb = make_zip({"zeros.bin": b"\0" * (20 * 2**20)})  # ~1000x on deflate
    with pytest.raises(UploadRefused) as refused:
        zip_members(bomb, "bomb.zip", BIG)
    assert "looks like a zip bomb" in str(refused.value)
    assert zip_members(bomb, "bomb.zip", Limits(BIG.file_bytes, BIG.session_bytes, 10,
                                                  zip_ratio=10_000))  # the limit decides


def test_a_file_that_is_not_a_zip_says_so():
    with pytest.raises(UploadRefused, match="not a readable zip file"):
        zip_members(io.BytesIO(b"PK but not really"), "x.zip", LIMITS)


@pytest.mark.parametrize("items, existing, says", [
    ([item("a.txt"), item("a.txt")], {}, "Two files would be named 'a.txt'"),
    ([item("A.txt"), item("a.txt")], {}, "Two files would be named"),
    ([item("a.txt")], {"a.txt": 3}, "already in the workspace"),
    ([item("data")], {"data/x.csv": 3}, "is a folder in the workspace"),
    ([item("a.txt/b.txt")], {"a.txt": 3}, "is a file in the workspace"),
    ([item("big", b"x" * 1001)], {}, "one file may be at most"),
    ([item("a"), item("a/b.txt")], {}, "'a' is a file and 'a/b.txt' would be inside it"),
    ([item(f"f{i}") for i in range(11)], {}, "at most 10 are taken per session")])
def test_a_plan_is_refused_as_a_whole(items, existing, says):
    with pytest.raises(UploadRefused) as refused:
        check_plan(items, existing, LIMITS)
    assert says in str(refused.value)


def test_the_session_limit_counts_what_was_brought_before():
    check_plan([item("a", b"x" * 900)], {}, LIMITS, brought_bytes=4000)
    with pytest.raises(UploadRefused, match="you brought already"):
        check_plan([item("a", b"x" * 900)], {}, LIMITS, brought_bytes=4200)
    with pytest.raises(UploadRefused, match="has 9 from you already"):
        check_plan([item("a"), item("b")], {}, LIMITS, brought_files=9)


def test_store_writes_files_and_folders(tmp_path):
    store(tmp_path / "ws", [item("a.txt", b"hello"), item("d/e/b.csv", b"1,2"),
                            item("empty.txt", b"")])
    assert (tmp_path / "ws/a.txt").read_bytes() == b"hello"
    assert (tmp_path / "ws/d/e/b.csv").read_bytes() == b"1,2"
    assert (tmp_path / "ws/empty.txt").stat().st_size == 0


def test_store_is_all_or_nothing(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "keep.txt").write_text("mine")

    def broken():
        raise OSError(28, "No space left on device")
    items = [item("a.txt", b"one"), item("new/b.txt", b"two"),
             Incoming(path="new/c.txt", size=3, opener=broken, shown="'c.txt'")]
    with pytest.raises(UploadRefused, match="No space left on device"):
        store(workspace, items)
    assert sorted(os.listdir(workspace)) == ["keep.txt"]


def test_store_refuses_a_member_that_is_not_its_declared_size(tmp_path):
    lying = Incoming(path="a.bin", size=3, opener=lambda: io.BytesIO(b"more than 3"),
                     shown="'a.bin'")
    with pytest.raises(UploadRefused, match="not the size it said"):
        store(tmp_path, [lying])
    assert not (tmp_path / "a.bin").exists()


def test_store_never_writes_through_a_link(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "sub").symlink_to(outside)
    with pytest.raises(UploadRefused):
        store(workspace, [item("sub/x.txt", b"escape")])
    assert not (outside / "x.txt").exists()
