"""The session's workspace on the dashboard (feature T9): the file list, a preview of text
and CSV files, downloads (one file, or the whole workspace as a zip) and files added to a
running or ended session."""
from __future__ import annotations

import csv
import io
import os
import tempfile
import zipfile

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from agents import ToolError
from agents import open_in_workspace
from taskos.runs.models import Session
from taskos.web.views import owned_session
from taskos.workspaces.files import add_files, walk
from taskos.workspaces.forms import AddFilesForm
from taskos.workspaces.intake import UploadRefused, megabytes
from taskos.workspaces.page import workspace_context

PREVIEW_BYTES = 64 * 1024
PREVIEW_ROWS = 50


def _file_path(request: HttpRequest) -> str:
    path = request.GET.get("path", "")
    if not path:
        raise Http404("Say which file: ?path=NAME.")
    return path


def _open(session: Session, path: str):
    try:
        return open_in_workspace(session.workspace, path, "rb")
    except ToolError as exc:
        raise Http404(str(exc)) from None


@login_required
@require_GET
def download_file(request: HttpRequest, pk: int) -> FileResponse:
    session = owned_session(request, pk)
    path = _file_path(request)
    handle = _open(session, path)
    return FileResponse(handle, as_attachment=True, filename=path.rsplit("/", 1)[-1])


@login_required
@require_GET
def download_zip(request: HttpRequest, pk: int) -> FileResponse:
    """The whole workspace as one zip (regular files only, as the listing shows them)."""
    session = owned_session(request, pk)
    entries, _ = walk(session.workspace, cap=10**9)
    spool = tempfile.SpooledTemporaryFile(max_size=16 * 2**20)
    with zipfile.ZipFile(spool, "w", zipfile.ZIP_DEFLATED) as bundle:
        for entry in entries:
            try:
                with open_in_workspace(session.workspace, entry.path, "rb") as source, \
                        bundle.open(entry.path, "w", force_zip64=True) as target:
                    while chunk := source.read(1 << 20):
                        target.write(chunk)
            except ToolError:
                continue  # gone or swapped for a link since the walk: left out
    spool.seek(0)
    return FileResponse(spool, as_attachment=True,
                        filename=f"session-{session.pk}-workspace.zip")


def preview_of(raw: bytes, path: str, truncated: bool) -> dict[str, object]:
    """How the preview page shows `raw` (the file's first bytes): a table for CSV, text for
    text, a note for binary content."""
    if b"\x00" in raw:
        return {"kind": "binary"}
    if truncated:  # a character cut at the end of the read is not a binary file
        raw = raw[:len(raw) - 3] + raw[len(raw) - 3:].decode("utf-8", "ignore").encode()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return {"kind": "binary"}
    if path.lower().endswith((".csv", ".tsv")):
        delimiter = "\t" if path.lower().endswith(".tsv") else ","
        rows = []
        try:
            for row in csv.reader(io.StringIO(text), delimiter=delimiter):
                rows.append(row)
                if len(rows) > PREVIEW_ROWS:
                    break
        except csv.Error:
            return {"kind": "text", "text": text}
        if rows:
            return {"kind": "table", "header": rows[0], "rows": rows[1:PREVIEW_ROWS + 1],
                    "more_rows": len(rows) > PREVIEW_ROWS or truncated}
    return {"kind": "text", "text": text}


@login_required
@require_GET
def preview(request: HttpRequest, pk: int) -> HttpResponse:
    session = owned_session(request, pk)
    path = _file_path(request)
    with _open(session, path) as handle:
        size = os.fstat(handle.fileno()).st_size  # of the file opened, never through a link
        raw = handle.read(PREVIEW_BYTES + 1)
    truncated = len(raw) > PREVIEW_BYTES
    raw = raw[:PREVIEW_BYTES]
    return render(request, "web/workspace_preview.html", {
        "session": session, "path": path, "size": size, "shown_size": megabytes(size),
        "truncated": truncated, **preview_of(raw, path, truncated)})


@login_required
@require_POST
def add(request: HttpRequest, pk: int) -> HttpResponse:
    """Files added to the session's workspace; the agent hears of them on its next turn.
    A refusal re-shows the page with the reason by the field; nothing was stored."""
    session = owned_session(request, pk)
    form = AddFilesForm(request.POST, request.FILES, session=session)
    if form.is_valid():
        try:
            rows = add_files(session, form.incoming, by=request.user)
        except UploadRefused as exc:
            form.add_error("files", str(exc))
        else:
            messages.success(request, stored_message(rows, session))
            return redirect(f"{session_url(session)}#workspace")
    return render(request, "web/workspace_add.html",
                  {"session": session, **workspace_context(session, form)}, status=400)


def session_url(session: Session) -> str:
    return reverse("web:session", args=[session.pk])


def stored_message(rows, session: Session | None = None) -> str:
    """What the person reads after files were stored: how many, which were empty, and when
    the agent hears of them."""
    names = [row.path for row in rows]
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    text = f"Added {len(rows)} file{'s' if len(rows) != 1 else ''} to the workspace: {shown}."
    empty = [row.path for row in rows if row.size == 0]
    if empty:
        text += f" Empty (0 bytes), kept as empty files: {', '.join(empty[:5])}."
    if session is not None:
        text += (" The agent is told on its next turn." if session.is_active else
                 " The session has ended: start a new task from this workspace to work on "
                 "them.")
    return text
