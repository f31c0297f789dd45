"""Workspace tools (feature T5): list, read and write files in the session's own folder.

Every tool opens a workspace file through `open_in_workspace` (the SQL tools check the
session database with `check_workspace_file`), which walks the path one name at a time from
a descriptor of the workspace folder, never following a link: a symlink anywhere in the
path, a `..` that leaves the folder, an absolute path, or a file that is not a regular file
of exactly one link is refused with a clear error. The checks are made with fstat on the
descriptor that is then read or written, so a name swapped for a link between a check and
the open is caught too (issue 25 item 5).

A hard link is refused for writing as well as reading: the name and the file outside are
one file, so writing to it would change the outside file, and replacing the name with a new
file would still leave the model believing it edited what it had read. The model is told
to write to another name; a file it creates itself always has one link.
"""
from __future__ import annotations

import os
import stat
from contextlib import ExitStack
from pathlib import Path, PurePosixPath
from typing import IO

from agents.tools.base import Table, Tool, ToolBoundary, ToolContext, ToolError

MAX_READ_BYTES = 20_000_000
MAX_WRITE_CHARS = 5_000_000
MAX_LISTED = 20_000  # entries list_files looks at; a folder of millions is not walked whole
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
# O_NONBLOCK: opening a FIFO must not wait for a writer before fstat can refuse it.
_FILE = os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
NEVER_THROUGH_A_LINK = "the tools use only real files inside the workspace, never through a link"


def workspace_parts(path: str) -> list[str]:
    """The names of `path` below the workspace ([] for the workspace itself), or a ToolError.

    `..` is applied to the names given, not to where a link would lead: links are never
    followed, so the names are all there is."""
    if not isinstance(path, str) or not path.strip() or "\x00" in path:
        raise ToolError("Give a file path relative to the workspace, e.g. 'sales.csv'.")
    if Path(path).is_absolute():
        raise ToolError(f"Path {path!r} is absolute; use a path relative to the workspace, "
                        "e.g. 'sales.csv'.")
    parts: list[str] = []
    for name in PurePosixPath(path).parts:
        if name == "..":
            if not parts:
                raise ToolError(f"Path {path!r} resolves outside the workspace; only files "
                                "inside it can be used.")
            parts.pop()
        elif name != ".":
            parts.append(name)
    return parts


def _open_root(workspace: Path, create: bool) -> int:
    if create:
        workspace.mkdir(parents=True, exist_ok=True)
    try:
        # The workspace folder itself is where the operator put it, links and all.
        return os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    except FileNotFoundError:
        raise ToolError("The session's workspace folder does not exist (yet); write a file "
                        "first.") from None


def _refusal(path: str, shown: str, mode: int, links: int) -> ToolError:
    if stat.S_ISLNK(mode):
        where = f"{path!r} is a link" if shown == "/".join(workspace_parts(path)) else \
            f"Path {path!r} goes through the link {shown!r}"
        return ToolError(f"{where}; {NEVER_THROUGH_A_LINK}.")
    if stat.S_ISREG(mode) and links > 1:
        return ToolError(f"{shown!r} is a hard link (one file with {links} names, another may be "
                         f"outside the workspace); {NEVER_THROUGH_A_LINK}.")
    return ToolError(f"{shown!r} is not a regular file; {NEVER_THROUGH_A_LINK}.")


def _lstat(name: str, folder: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _open_folder(folder: int, name: str, path: str, shown: str, create: bool) -> int:
    """Descriptor of the sub-folder `name` of `folder`, made when `create`; never a link."""
    try:
        return os.open(name, _FOLDER, dir_fd=folder)
    except FileNotFoundError:
        if not create:
            raise ToolError(f"No folder {shown!r} in the workspace. Use list_files() for the "
                            "top level.") from None
        try:
            os.mkdir(name, dir_fd=folder)
        except FileExistsError:
            pass  # made meanwhile; the open below checks what it is
        return _open_folder(folder, name, path, shown, create=False)
    except OSError:
        found = _lstat(name, folder)
        if found is not None and stat.S_ISLNK(found.st_mode):
            raise _refusal(path, shown, found.st_mode, found.st_nlink) from None
        inside = "" if shown == "/".join(workspace_parts(path)) else \
            f", so {path!r} cannot be in it"
        raise ToolError(f"{shown!r} is a file, not a folder{inside}.") from None


def _checked(fd: int, path: str, shown: str) -> os.stat_result:
    """fstat of an opened name: a regular file of one link, or the descriptor is closed and
    a ToolError says what it is."""
    found = os.fstat(fd)
    if stat.S_ISREG(found.st_mode) and found.st_nlink == 1:
        return found
    os.close(fd)
    if stat.S_ISDIR(found.st_mode):
        raise ToolError(f"{path!r} is a folder; use list_files(path={path!r}) to see its files.")
    raise _refusal(path, shown, found.st_mode, found.st_nlink)


def _open_file(folder: int, name: str, flags: int, path: str, shown: str) -> int:
    try:
        fd = os.open(name, flags | _FILE, 0o666, dir_fd=folder)
    except FileNotFoundError:
        raise ToolError(f"No file {path!r} in the workspace. Use list_files to see what is "
                        "there.") from None
    except OSError:  # a link (ELOOP), a folder opened for writing, a FIFO without a reader
        found = _lstat(name, folder)
        if found is not None and stat.S_ISDIR(found.st_mode):
            raise ToolError(f"{path!r} is a folder; give a file name inside it.") from None
        if found is None:
            raise
        raise _refusal(path, shown, found.st_mode, found.st_nlink) from None
    _checked(fd, path, shown)
    os.set_blocking(fd, True)
    return fd


class _Folder:
    """The descriptor of a workspace folder reached without following a link."""

    def __init__(self, workspace: Path, parts: list[str], path: str, create: bool) -> None:
        self.fd = _open_root(workspace, create)
        try:
            for depth, name in enumerate(parts):
                shown = "/".join(parts[:depth + 1])
                folder = _open_folder(self.fd, name, path, shown, create)
                os.close(self.fd)
                self.fd = folder
        except BaseException:
            os.close(self.fd)
            raise

    def __enter__(self) -> int:
        return self.fd

    def __exit__(self, *exc) -> None:
        os.close(self.fd)


def open_in_workspace(workspace: Path, path: str, mode: str = "rb", *,
                      encoding: str | None = None, newline: str | None = None) -> IO:
    """The workspace file `path` opened in `mode` ("rb", "r", "w" or "a"), or a ToolError.

    Every tool opens workspace files here. Writing makes missing folders and creates the
    file; it truncates only after the descriptor is checked, so a hard link is refused
    before anything of the file outside changes."""
    if mode not in ("rb", "r", "w", "a"):
        raise ValueError(f"open_in_workspace: unsupported mode {mode!r}")
    parts = workspace_parts(path)
    writing = mode in ("w", "a")
    if not parts:
        raise ToolError(f"{path!r} is a folder; give a file name inside it." if writing else
                        f"{path!r} is a folder; use list_files(path={path!r}) to see its files.")
    flags = (os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode == "a" else 0)) if writing \
        else os.O_RDONLY
    with _Folder(workspace, parts[:-1], path, create=writing) as folder:
        fd = _open_file(folder, parts[-1], flags, path, "/".join(parts))
    try:
        if mode == "w":
            os.ftruncate(fd, 0)
        text = {} if mode == "rb" else {"encoding": encoding or "utf-8", "newline": newline}
        return os.fdopen(fd, mode, **text)
    except BaseException:
        os.close(fd)
        raise


def check_workspace_file(workspace: Path, name: str, stack: ExitStack) -> os.stat_result | None:
    """fstat of the top-level workspace file `name` when it exists (None when it does not),
    refusing a link or anything but a regular file of one link. Its descriptor stays open
    on `stack`: while it is open, no other file can take over its inode number, so the
    caller can compare what an opener that goes by name found."""
    if not workspace.is_dir():
        return None  # nothing in it yet; whoever creates the file goes through the checks
    with _Folder(workspace, [], name, create=False) as folder:
        try:
            fd = os.open(name, os.O_RDONLY | _FILE, dir_fd=folder)
        except FileNotFoundError:
            return None
        except OSError:
            found = _lstat(name, folder)
            if found is None:
                return None
            raise _refusal(name, name, found.st_mode, found.st_nlink) from None
    found = _checked(fd, name, name)
    stack.callback(os.close, fd)
    return found


def same_file(workspace: Path, name: str, expected: os.stat_result | None) -> bool:
    """True when the workspace name still is the file `expected` was (or, for None, a new
    regular file of one link): the check after an opener that goes by name."""
    try:
        found = os.stat(workspace.resolve() / name, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(found.st_mode) or found.st_nlink != 1:
        return False
    return expected is None or (found.st_dev, found.st_ino) == (expected.st_dev,
                                                                 expected.st_ino)


def _walk(workspace: Path, parts: list[str], path: str) -> tuple[list[list], list[str], bool]:
    """(rows of regular one-link files with their sizes, names not listed, stopped early)
    under the folder `parts`. Each folder is reached again from the workspace one name at a
    time, so a folder swapped for a link is never entered and no descriptor is held open
    while its sub-folders are listed."""
    rows: list[list] = []
    skipped: list[str] = []
    pending = [parts]
    seen = 0
    while pending:
        current = pending.pop()
        try:
            with _Folder(workspace, current, path, create=False) as fd, os.scandir(fd) as it:
                found = sorted((entry.name, entry.stat(follow_symlinks=False)) for entry in it)
        except ToolError:
            if current is parts:
                raise
            skipped.append("/".join(current))  # swapped for a link since it was listed
            continue
        for name, info in found:
            seen += 1
            if seen > MAX_LISTED:
                return rows, skipped, True
            if stat.S_ISDIR(info.st_mode):
                pending.append(current + [name])
            elif stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
                rows.append(["/".join(current + [name]), info.st_size])
            else:
                skipped.append("/".join(current + [name]))
    return rows, skipped, False


def list_files(path: str = ".", *, _ctx: ToolContext) -> Table | str:
    rows, skipped, stopped = _walk(_ctx.workspace, workspace_parts(path), path)
    rows.sort()
    skipped.sort()
    notes = []
    if skipped:
        shown = ", ".join(skipped[:5]) + (", ..." if len(skipped) > 5 else "")
        notes.append(f"Not listed, links or not regular files: {shown}; {NEVER_THROUGH_A_LINK}.")
    if stopped:
        notes.append(f"Stopped after {MAX_LISTED} entries; list a sub-folder for the rest.")
    note = " ".join(notes)
    if not rows:
        return f"No files under {path!r} in the workspace." + (f" {note}" if note else "")
    noun = "file" if len(rows) == 1 else "files"
    return Table(columns=["path", "bytes"], rows=rows, title=f"{len(rows)} {noun} under {path!r}:",
                 note=note)


def read_file(path: str, *, _ctx: ToolContext) -> bytes:
    with open_in_workspace(_ctx.workspace, path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > MAX_READ_BYTES:
            raise ToolError(f"{path!r} is {size} bytes; read_file reads at most "
                            f"{MAX_READ_BYTES}. For CSV files use csv_describe or csv_load and "
                            "sql_query instead.")
        # Read to the cap, not to the size fstat saw: the file may grow meanwhile.
        return handle.read(MAX_READ_BYTES)  # the registry decides text or binary


def write_file(path: str, content: str, append: bool = False, *, _ctx: ToolContext) -> str:
    if len(content) > MAX_WRITE_CHARS:
        raise ToolError(f"content is {len(content)} characters; write_file writes at most "
                        f"{MAX_WRITE_CHARS} at once (use append=true for more).")
    with open_in_workspace(_ctx.workspace, path, "a" if append else "w", newline="") as handle:
        handle.write(content)
    verb = "Appended" if append else "Wrote"
    return f"{verb} {len(content)} characters to {'/'.join(workspace_parts(path))}."


def tools() -> list[Tool]:
    path_arg = {"type": "string", "description": "Path relative to the workspace."}
    return [
        Tool(name="list_files",
             description="List the files in the session workspace with their sizes.",
             parameters={"type": "object", "properties": {
                 "path": {**path_arg, "description": "Folder to list; default the top level."}}},
             func=list_files, boundary=ToolBoundary(max_result_rows=200, max_result_length=8000)),
        Tool(name="read_file", description=(
                 "Read a file from the session workspace. Long files are cut to head and tail; "
                 "the full text stays readable with read_ref."),
             parameters={"type": "object", "properties": {"path": path_arg}, "required": ["path"]},
             func=read_file, boundary=ToolBoundary(max_result_rows=100, max_result_length=8000)),
        Tool(name="write_file", description="Write (or append) a UTF-8 text file in the workspace.",
             parameters={"type": "object", "properties": {
                 "path": path_arg, "content": {"type": "string"},
                 "append": {"type": "boolean", "description": "Append instead of replacing."}},
                 "required": ["path", "content"]},
             func=write_file, boundary=ToolBoundary(max_result_length=1000)),
    ]
