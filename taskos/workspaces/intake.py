"""Files a person brings into a workspace (feature T9): names made safe, zips checked, limits
enforced, and the lot stored all or nothing.

Nothing here touches the workspace until `store` is called with a plan that passed every
check: a refused upload leaves the workspace as it was. No Django here: the web form, the
session page and `runtask --file` all go through the same checks.
"""
from __future__ import annotations

import os
import stat
import unicodedata
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from agents import ToolError
from agents import open_in_workspace

MAX_NAME_CHARS = 200  # one name of a path; file systems allow 255 bytes, we keep a margin
MAX_NAME_BYTES = 255
MAX_PATH_CHARS = 1000  # the WorkspaceFile.path column holds 1024
MAX_DEPTH = 20
COPY_CHUNK = 1 << 20
# Below this many bytes a zip member's ratio is not judged: tiny files compress wildly.
RATIO_FLOOR_BYTES = 1 << 20


class UploadRefused(ValueError):
    """Why an upload (or a part of it) cannot be taken; nothing of it was stored."""


@dataclass(frozen=True)
class Limits:
    file_bytes: int  # one file
    session_bytes: int  # everything the person brought into one workspace
    files: int  # how many files the person may bring into one workspace
    zip_ratio: int  # uncompressed / compressed, for a zip member above RATIO_FLOOR_BYTES


@dataclass
class Incoming:
    """One file to store: its safe path in the workspace, its size, and how to read it."""

    path: str
    size: int
    opener: Callable[[], IO[bytes]]
    shown: str  # the name as the person gave it, for messages
    origin: str = "upload"  # upload | command_line | copy (WorkspaceFile.Origin)

    @property
    def empty(self) -> bool:
        return self.size == 0


def megabytes(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1 << 20:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1 << 20):.1f} MB"


def _printable(name: str) -> str:
    """A name as a message may show it: NUL and control characters visible, long ones cut."""
    shown = "".join(f"\\x{ord(c):02x}" if unicodedata.category(c) == "Cc" else c for c in name)
    return f"'{shown if len(shown) <= 80 else shown[:60] + '…' + shown[-15:]}'"


def safe_name(name: str, shown: str) -> str:
    """One name of a path, when a file system takes it as it is; else UploadRefused."""
    if "\x00" in name:
        raise UploadRefused(f"{_printable(shown)}: the name holds a NUL character, which no "
                            "file system takes. Rename the file.")
    if any(unicodedata.category(c) == "Cc" for c in name):
        raise UploadRefused(f"{_printable(shown)}: the name holds a control character. "
                            "Rename the file.")
    if name in ("", ".", ".."):
        raise UploadRefused(f"{_printable(shown)}: {name or 'an empty name'!r} cannot name a "
                            "file; only names inside the workspace are taken.")
    if len(name) > MAX_NAME_CHARS:
        # Django cuts an uploaded name at 255: the person's may have been longer.
        length = f"{len(name)} characters" + (" or more" if len(name) == 255 else "")
        raise UploadRefused(f"{_printable(shown)}: the name is {length} long; at most "
                            f"{MAX_NAME_CHARS} are taken. Rename the file.")
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:
        raise UploadRefused(f"{_printable(shown)}: the name is not valid UTF-8. Rename the "
                            "file.") from None
    if len(encoded) > MAX_NAME_BYTES:
        raise UploadRefused(f"{_printable(shown)}: the name is {len(encoded)} bytes long in "
                            f"UTF-8; file systems take at most {MAX_NAME_BYTES}. Rename the "
                            "file.")
    return name


def safe_path(path: str, shown: str | None = None) -> str:
    """`path` (a file name, or a path inside a zip or a folder, "/" or "\\" separated) as a
    relative workspace path, when every name in it is safe; else UploadRefused. A `..`, an
    absolute path or a drive letter is refused, never repaired: the person sees what was
    wrong instead of finding the file somewhere else."""
    shown = path if shown is None else shown
    if not isinstance(path, str) or not path:
        raise UploadRefused("A file without a name cannot be stored.")
    if "\x00" in path:
        safe_name(path, shown)  # says so
    unified = path.replace("\\", "/")
    if unified.startswith("/") or (len(unified) > 1 and unified[1] == ":"):
        raise UploadRefused(f"{_printable(shown)}: an absolute path; only paths inside the "
                            "workspace are taken.")
    parts = [part for part in unified.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise UploadRefused(f"{_printable(shown)}: the path holds '..', which would leave "
                            "the workspace; only paths inside it are taken.")
    if not parts:
        raise UploadRefused(f"{_printable(shown)}: no file name in the path.")
    if len(parts) > MAX_DEPTH:
        raise UploadRefused(f"{_printable(shown)}: {len(parts)} folders deep; at most "
                            f"{MAX_DEPTH} are taken.")
    for part in parts:
        safe_name(part, shown)
    joined = "/".join(parts)
    if len(joined) > MAX_PATH_CHARS:
        raise UploadRefused(f"{_printable(shown)}: the path is {len(joined)} characters; at "
                            f"most {MAX_PATH_CHARS} are taken.")
    return joined


# --- zips

def _member_kind(info: zipfile.ZipInfo) -> str | None:
    """What a zip member is when it is not a plain file or folder (from its Unix mode)."""
    mode = info.external_attr >> 16
    if not mode:
        return None
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return None


def zip_members(archive: Path | IO[bytes], shown: str, limits: Limits,
                prefix: str = "") -> list[Incoming]:
    """The files of the zip `archive` as Incoming, when the zip as a whole passes: every
    path safe, no link or device, no member over the file limit, the members' total under
    the session limit, their count under the file count, no member that expands more than
    `limits.zip_ratio` times (a zip bomb). Read from the central directory only: nothing is
    unpacked until `store`, which reads each member at most to its declared size. `shown`
    is the zip's name as the person gave it."""
    label = _printable(shown)
    try:
        bundle = zipfile.ZipFile(archive)
        infos = bundle.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError) as exc:
        raise UploadRefused(f"{label}: not a readable zip file ({exc}).") from None
    members: list[Incoming] = []
    total = 0
    for info in infos:
        where = f"{label}: member {_printable(info.filename)}"
        kind = _member_kind(info)
        if kind:
            raise UploadRefused(f"{where} is {kind}; a zip may hold only files and folders.")
        if info.flag_bits & 0x1:
            raise UploadRefused(f"{where} is encrypted; unpack it yourself and upload the "
                                "files.")
        path = safe_path(info.filename, f"{shown}: {info.filename}")
        if info.is_dir():
            continue
        if info.file_size > limits.file_bytes:
            raise UploadRefused(f"{where} unpacks to {megabytes(info.file_size)}; one file "
                                f"may be at most {megabytes(limits.file_bytes)}.")
        if (info.file_size > RATIO_FLOOR_BYTES
                and info.file_size > limits.zip_ratio * max(info.compress_size, 1)):
            ratio = info.file_size // max(info.compress_size, 1)
            raise UploadRefused(f"{where} expands {ratio} times ({megabytes(info.compress_size)}"
                                f" to {megabytes(info.file_size)}); at most {limits.zip_ratio} "
                                "times is taken, more looks like a zip bomb.")
        total += info.file_size
        if total > limits.session_bytes:
            raise UploadRefused(f"{label} unpacks to more than {megabytes(limits.session_bytes)}"
                                ", the most one workspace takes.")
        if len(members) >= limits.files:
            raise UploadRefused(f"{label} holds more than {limits.files} files, the most one "
                                "workspace takes.")
        members.append(Incoming(path=f"{prefix}{path}", size=info.file_size,
                                opener=_member_opener(bundle, info), shown=where))
    return members


def _member_opener(bundle: zipfile.ZipFile, info: zipfile.ZipInfo) -> Callable[[], IO[bytes]]:
    return lambda: bundle.open(info)


def is_zip_name(name: str) -> bool:
    return name.lower().endswith(".zip")


# --- the whole upload

def check_plan(items: Iterable[Incoming], existing: dict[str, int], limits: Limits,
               brought_bytes: int = 0, brought_files: int = 0) -> list[Incoming]:
    """`items` when they may all be stored beside the workspace's `existing` files (path ->
    size): no two with the same path, none over a name already there (a file or a folder),
    each under the file limit, and with what the person brought before (`brought_bytes`,
    `brought_files`), under the session's limits. Else UploadRefused naming the first
    problem."""
    items = list(items)
    seen: dict[str, str] = {}
    folders = {str(parent) for path in existing for parent in PurePosixPath(path).parents}
    incoming = {item.path: item for item in items}
    for item in items:
        for parent in PurePosixPath(item.path).parents:
            if str(parent) in incoming:
                raise UploadRefused(f"{incoming[str(parent)].shown} is a file and "
                                    f"{item.shown} would be inside it; rename one.")
        if item.size > limits.file_bytes:
            raise UploadRefused(f"{item.shown} is {megabytes(item.size)}; one file may be at "
                                f"most {megabytes(limits.file_bytes)}.")
        key = item.path.casefold()
        if key in seen:
            raise UploadRefused(f"Two files would be named {item.path!r} ({seen[key]} and "
                                f"{item.shown}); rename one and upload again.")
        seen[key] = item.shown
        if item.path in existing:
            raise UploadRefused(f"{item.path!r} is already in the workspace; rename the file "
                                "and upload again (nothing in the workspace is replaced).")
        if item.path in folders:
            raise UploadRefused(f"{item.path!r} is a folder in the workspace; rename the file.")
        for parent in PurePosixPath(item.path).parents:
            if str(parent) in existing:
                raise UploadRefused(f"{item.shown}: {str(parent)!r} is a file in the "
                                    "workspace, so nothing can be put inside it.")
    files = brought_files + len(items)
    if files > limits.files:
        raise UploadRefused(f"{len(items)} files, and the workspace has {brought_files} from "
                            f"you already: at most {limits.files} are taken per session.")
    total = brought_bytes + sum(item.size for item in items)
    if total > limits.session_bytes:
        raise UploadRefused(f"{megabytes(total - brought_bytes)} of files, with "
                            f"{megabytes(brought_bytes)} you brought already: at most "
                            f"{megabytes(limits.session_bytes)} are taken per session.")
    return items


def store(workspace: Path, items: list[Incoming]) -> None:
    """Write `items` into `workspace`, all or nothing: when one cannot be written (the file
    system refuses its name, the disk is full, a zip member is corrupt), the files written
    so far and the folders made for them are removed and UploadRefused says why. Files are
    opened the way the agent's tools open them (agents/tools/workspace.py): never through a
    link, and a name that appeared meanwhile is refused, not overwritten."""
    workspace.mkdir(parents=True, exist_ok=True)
    written: list[str] = []  # this upload's files, the one being written last
    made: list[Path] = []
    item = None
    try:
        for item in items:
            for parent in reversed(PurePosixPath(item.path).parents):
                folder = workspace / parent
                if str(parent) != "." and not os.path.lexists(folder):
                    made.append(folder)
            if os.path.lexists(workspace / item.path):
                raise UploadRefused(f"{item.path!r} appeared in the workspace meanwhile "
                                    "(the agent wrote it?); rename the file and upload again.")
            written.append(item.path)
            _copy(workspace, item)
    except BaseException as exc:
        for path in written:
            try:
                (workspace / path).unlink()
            except OSError:
                pass
        for folder in reversed(made):
            try:
                folder.rmdir()
            except OSError:
                pass
        if isinstance(exc, UploadRefused):
            raise
        if isinstance(exc, (OSError, ToolError, zipfile.BadZipFile, EOFError)):
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise UploadRefused(f"{item.shown} could not be written ({reason}); nothing of "
                                "this upload was stored.") from None
        raise


def _copy(workspace: Path, item: Incoming) -> None:
    left = item.size
    with item.opener() as source, open_in_workspace(workspace, item.path, "w") as _text:
        target = _text.buffer
        while left > 0:
            chunk = source.read(min(COPY_CHUNK, left))
            if not chunk:
                break
            target.write(chunk)
            left -= len(chunk)
        if left or source.read(1):
            raise UploadRefused(f"{item.shown} is not the size it said it was; nothing of "
                                "this upload was stored.")
