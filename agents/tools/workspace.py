"""Workspace tools (feature T5): list, read and write files in the session's own folder.

Every path is resolved (symlinks followed) and must stay inside the workspace; anything
else — `..`, absolute paths, a symlink pointing out — is refused with a clear error.
"""
from __future__ import annotations

import os
from pathlib import Path

from agents.tools.base import Table, Tool, ToolBoundary, ToolContext, ToolError

MAX_READ_BYTES = 20_000_000
MAX_WRITE_CHARS = 5_000_000


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """The absolute path of `path` inside the workspace, or a ToolError saying why not."""
    if not isinstance(path, str) or not path.strip() or "\x00" in path:
        raise ToolError("Give a file path relative to the workspace, e.g. 'sales.csv'.")
    if Path(path).is_absolute():
        raise ToolError(f"Path {path!r} is absolute; use a path relative to the workspace, "
                        "e.g. 'sales.csv'.")
    root = workspace.resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root):
        raise ToolError(f"Path {path!r} resolves outside the workspace; only files inside it "
                        "can be used.")
    return target


def existing_file(workspace: Path, path: str) -> Path:
    target = resolve_in_workspace(workspace, path)
    if target.is_dir():
        raise ToolError(f"{path!r} is a folder; use list_files(path={path!r}) to see its files.")
    if not target.is_file():
        raise ToolError(f"No file {path!r} in the workspace. Use list_files to see what is there.")
    return target


def list_files(path: str = ".", *, _ctx: ToolContext) -> Table | str:
    root = _ctx.workspace.resolve()
    folder = resolve_in_workspace(_ctx.workspace, path)
    if not folder.is_dir():
        raise ToolError(f"No folder {path!r} in the workspace. Use list_files() for the top level.")
    rows = []
    for current, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            full = Path(current) / name
            if not full.resolve().is_relative_to(root):
                continue  # a symlink pointing out of the workspace is not the session's file
            rows.append([full.relative_to(root).as_posix(), full.stat().st_size])
    rows.sort()
    if not rows:
        return f"No files under {path!r} in the workspace."
    noun = "file" if len(rows) == 1 else "files"
    return Table(columns=["path", "bytes"], rows=rows, title=f"{len(rows)} {noun} under {path!r}:")


def read_file(path: str, *, _ctx: ToolContext) -> bytes:
    target = existing_file(_ctx.workspace, path)
    size = target.stat().st_size
    if size > MAX_READ_BYTES:
        raise ToolError(f"{path!r} is {size} bytes; read_file reads at most {MAX_READ_BYTES}. "
                        "For CSV files use csv_describe or csv_load and sql_query instead.")
    return target.read_bytes()  # the registry decides text or binary, so nothing is lost


def write_file(path: str, content: str, append: bool = False, *, _ctx: ToolContext) -> str:
    if len(content) > MAX_WRITE_CHARS:
        raise ToolError(f"content is {len(content)} characters; write_file writes at most "
                        f"{MAX_WRITE_CHARS} at once (use append=true for more).")
    target = resolve_in_workspace(_ctx.workspace, path)
    if target.is_dir():
        raise ToolError(f"{path!r} is a folder; give a file name inside it.")
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a" if append else "w", encoding="utf-8", newline="") as handle:
        handle.write(content)
    verb = "Appended" if append else "Wrote"
    shown = target.relative_to(_ctx.workspace.resolve()).as_posix()
    return f"{verb} {len(content)} characters to {shown}."


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
