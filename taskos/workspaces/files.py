"""A session's workspace as the dashboard shows it (feature T9): its files, who wrote each
(the person, at which turn, or the agent, at which turn), and the person's files stored
with their rows in one step."""
from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from agents import DATA_DIR, open_in_workspace
from taskos.runs.models import Session, SessionEvent, WorkspaceFile

from .intake import Incoming, Limits, UploadRefused, check_plan, is_zip_name, safe_path, \
    store, zip_members

MAX_SHOWN = 2000  # files the session page lists; a bigger workspace is cut, and says so
WRITING_TOOLS = ("write_file",)


def limits() -> Limits:
    return Limits(file_bytes=settings.TASKOS_UPLOAD_MAX_FILE_BYTES,
                  session_bytes=settings.TASKOS_UPLOAD_MAX_SESSION_BYTES,
                  files=settings.TASKOS_UPLOAD_MAX_FILES,
                  zip_ratio=settings.TASKOS_UPLOAD_MAX_ZIP_RATIO)


@dataclass
class Entry:
    path: str
    size: int
    writer: str = ""  # "person" | "agent" | "TaskOS" (the demo data) | "" (not known)
    turn: int | None = None  # the agent's turn that wrote it, or the turns run before upload
    who: str = ""  # the person's name, for a person's file

    @property
    def is_text_like(self) -> bool:
        return self.path.lower().endswith((".csv", ".tsv", ".txt", ".md", ".json", ".py",
                                           ".log", ".xml", ".html", ".yaml", ".yml"))


def walk(workspace: Path, cap: int = MAX_SHOWN) -> tuple[list[Entry], bool]:
    """(regular files under `workspace` with their sizes, sorted; whether the walk stopped
    at `cap`). Links and anything but regular files are left out, as the tools leave them."""
    entries: list[Entry] = []
    if not workspace.is_dir():
        return entries, False
    for folder, dirs, names in os.walk(workspace, followlinks=False):
        dirs.sort()
        for name in sorted(names):
            full = Path(folder) / name
            try:
                found = full.lstat()
            except OSError:
                continue
            if not stat.S_ISREG(found.st_mode):
                continue
            entries.append(Entry(full.relative_to(workspace).as_posix(), found.st_size))
            if len(entries) >= cap:
                return sorted(entries, key=lambda e: e.path), True
    return sorted(entries, key=lambda e: e.path), False


def _written_path(args: object) -> str | None:
    """The path a write call named. The engine stores a call's arguments as the model
    wrote them, a JSON text; a call whose text does not parse wrote nothing."""
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None
    path = args.get("path") if isinstance(args, dict) else None
    return path if isinstance(path, str) else None


def listing(session: Session) -> tuple[list[Entry], bool]:
    """The workspace's files, each with who wrote it last: the person's rows and the
    agent's write calls, by time; a file from the demo data that nobody touched is
    TaskOS's."""
    entries, cut = walk(session.workspace)
    people = {}
    for row in session.workspace_files.select_related("added_by").order_by("added_at", "id"):
        people[row.path] = row
    writes: dict[str, SessionEvent] = {}
    for event in SessionEvent.objects.filter(session=session, type="TOOL_CALL",
                                             payload__name__in=WRITING_TOOLS).order_by("seq"):
        path = _written_path(event.payload.get("args"))
        if path is not None:
            try:
                writes[safe_path(path)] = event
            except UploadRefused:
                continue
    for entry in entries:
        row, write = people.get(entry.path), writes.get(entry.path)
        if write is not None and (row is None or write.at >= row.added_at):
            entry.writer, entry.turn = "agent", write.turn
        elif row is not None:
            entry.writer, entry.turn = "person", row.after_turn
            entry.who = row.added_by.get_username() if row.added_by else ""
        elif (DATA_DIR / entry.path).is_file():
            entry.writer = "TaskOS"
        else:
            entry.writer = "agent"  # made by a tool other than write_file (e.g. a database)
    return entries, cut


def brought(session: Session) -> tuple[int, int]:
    """(bytes, files) the person has brought into this session's workspace so far."""
    rows = list(session.workspace_files.values_list("size", flat=True))
    return sum(rows), len(rows)


def existing(session: Session) -> dict[str, int]:
    entries, _ = walk(session.workspace, cap=10**9)
    return {entry.path: entry.size for entry in entries}


# --- taking files in

def uploaded_items(files: Iterable[UploadedFile], lim: Limits) -> list[Incoming]:
    """The browser's files as Incoming: each name made safe, a zip checked and opened into
    its members (folders kept). Raises UploadRefused for the first that cannot be taken."""
    items: list[Incoming] = []
    for upload in files:
        name = safe_path(upload.name or "")
        if is_zip_name(name):
            upload.seek(0)
            items += zip_members(upload, name, lim)
        else:
            items.append(Incoming(path=name, size=upload.size, opener=_reopen(upload),
                                  shown=repr(name)))
    return items


def _reopen(upload: UploadedFile):
    def opener():
        upload.seek(0)
        return _Unclosed(upload)
    return opener


class _Unclosed:
    """An uploaded file read by `store` and left open: the form may be checked again."""

    def __init__(self, upload: UploadedFile) -> None:
        self.upload = upload

    def read(self, size: int = -1) -> bytes:
        return self.upload.read(size)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


def path_items(paths: Iterable[Path], lim: Limits) -> list[Incoming]:
    """Files and folders on this machine (runtask --file) as Incoming: a folder brings its
    files under its own name; a link, a device or a zip's bad member is refused."""
    items: list[Incoming] = []
    for given in paths:
        given = Path(given)
        if given.is_symlink():
            raise UploadRefused(f"{str(given)!r} is a link; give the file or folder itself.")
        if given.is_dir():
            for folder, dirs, names in os.walk(given, followlinks=False):
                dirs.sort()
                for name in sorted(names + [d for d in dirs if (Path(folder) / d).is_symlink()]):
                    full = Path(folder) / name
                    relative = Path(given.name) / full.relative_to(given)
                    items.append(_local_item(full, relative.as_posix()))
        elif given.is_file() and is_zip_name(given.name):
            members = zip_members(given, given.name, lim)
            for member in members:
                member.origin = WorkspaceFile.Origin.COMMAND_LINE
            items += members
        else:
            items.append(_local_item(given, given.name))
    return items


def command_line_items(paths: Iterable[str | Path]) -> list[Incoming]:
    """runtask --file's files and folders, checked as a whole for a new session."""
    lim = limits()
    for given in paths:
        if not os.path.lexists(given):
            raise UploadRefused(f"{str(given)!r}: no such file or folder.")
    return check_plan(path_items([Path(p) for p in paths], lim), {}, lim)


def _local_item(full: Path, relative: str) -> Incoming:
    try:
        found = full.lstat()
    except OSError as exc:
        raise UploadRefused(f"{str(full)!r}: {exc.strerror}.") from None
    if stat.S_ISLNK(found.st_mode):
        raise UploadRefused(f"{str(full)!r} is a link; links are never copied into a workspace.")
    if not stat.S_ISREG(found.st_mode):
        raise UploadRefused(f"{str(full)!r} is not a regular file (a device, pipe or socket).")
    return Incoming(path=safe_path(relative, str(full)), size=found.st_size,
                    opener=lambda: open(full, "rb"), shown=repr(str(full)),
                    origin=WorkspaceFile.Origin.COMMAND_LINE)


def workspace_items(source: Session) -> list[Incoming]:
    """Every file of `source`'s workspace, to copy into a new session's."""
    entries, _ = walk(source.workspace, cap=10**9)
    return [Incoming(path=entry.path, size=entry.size,
                     opener=_workspace_opener(source.workspace, entry.path),
                     shown=f"#{source.pk}: {entry.path!r}", origin=WorkspaceFile.Origin.COPY)
            for entry in entries]


def _workspace_opener(workspace: Path, path: str):
    return lambda: open_in_workspace(workspace, path, "rb")


def plan_for(session: Session, items: list[Incoming], lim: Limits | None = None,
             fresh: bool = False) -> list[Incoming]:
    """`items` checked against the session's workspace and limits (a `fresh` session has
    nothing yet); UploadRefused otherwise."""
    lim = lim or limits()
    if fresh:
        return check_plan(items, {}, lim)
    size, count = brought(session)
    return check_plan(items, existing(session), lim, size, count)


def add_files(session: Session, items: list[Incoming], *, by=None) -> list[WorkspaceFile]:
    """Store the checked `items` into the session's workspace with a row each, all or
    nothing: the rows are written in the transaction that stores the files, and the files
    are removed again when the rows cannot be written."""
    with transaction.atomic():
        rows = WorkspaceFile.objects.bulk_create([
            WorkspaceFile(session=session, path=item.path, size=item.size, origin=item.origin,
                          added_by=by, after_turn=session.turns) for item in items])
        store(session.workspace, items)  # UploadRefused rolls the rows back
    return rows

