"""Static files served by daphne itself, from memory, compressed once.

Django's ASGIStaticFilesHandler serves each file through a worker thread and streams it
in chunks, each chunk another hop between the event loop and a thread: on a busy 2-core
machine the session page's five scripts and stylesheet took 40-150 ms each, most of a
finished page's time in the browser (scripts/drawer_bench.py), and went uncompressed.
Here a file found once (by the same finders) is held in memory with its gzip copy, its
ETag and type, and answered in one message from the event loop. A file changed on disk
is read again (its size and mtime are checked on each request), so editing a script in
development needs no restart. Anything not found goes to the wrapped handler, which
answers as before (404).
"""
from __future__ import annotations

import gzip
import hashlib
import mimetypes
import os
import posixpath
from dataclasses import dataclass
from email.utils import formatdate
from urllib.parse import unquote

from django.conf import settings
from django.contrib.staticfiles import finders
from django.core.exceptions import SuspiciousFileOperation

# Types worth compressing: text. Images and fonts are compressed already.
COMPRESSIBLE = ("text/", "application/javascript", "application/json", "image/svg+xml")
MIN_COMPRESSED = 256  # below this, gzip's header outweighs what it saves
# Unversioned URLs (static/js/taskos.js): a browser keeps its copy but asks again on each
# use, and gets "304 Not Modified" (no body) while the ETag still matches.
CACHE_CONTROL = b"no-cache"


@dataclass(frozen=True)
class StaticFile:
    body: bytes
    gzipped: bytes | None  # None when compressing does not pay
    content_type: bytes
    etag: bytes
    last_modified: bytes
    stamp: tuple[int, int]  # (size, mtime_ns) of the file it was read from


def read_static(path: str) -> StaticFile:
    stat = os.stat(path)
    with open(path, "rb") as handle:
        body = handle.read()
    kind, encoding = mimetypes.guess_type(path)
    kind = kind or "application/octet-stream"
    if kind.startswith("text/") or kind == "application/javascript":
        kind += "; charset=utf-8"
    gzipped = None
    if encoding is None and kind.startswith(COMPRESSIBLE) and len(body) >= MIN_COMPRESSED:
        packed = gzip.compress(body, compresslevel=9, mtime=0)
        gzipped = packed if len(packed) < len(body) else None
    return StaticFile(body=body, gzipped=gzipped, content_type=kind.encode(),
                      etag=f'"{hashlib.sha1(body).hexdigest()[:20]}"'.encode(),
                      last_modified=formatdate(stat.st_mtime, usegmt=True).encode(),
                      stamp=(stat.st_size, stat.st_mtime_ns))


class InMemoryStaticFiles:
    """ASGI middleware: GET and HEAD under STATIC_URL answered from memory; the rest,
    and files the finders do not know, passed to `app`."""

    def __init__(self, app) -> None:
        self.app = app
        self.prefix = settings.STATIC_URL if settings.STATIC_URL.startswith("/") else f"/{settings.STATIC_URL}"
        self.paths: dict[str, str] = {}  # URL path -> the file found for it
        self.files: dict[str, StaticFile] = {}  # file -> as read

    async def __call__(self, scope, receive, send) -> None:
        if (scope["type"] != "http" or scope["method"] not in ("GET", "HEAD")
                or not scope["path"].startswith(self.prefix)):
            await self.app(scope, receive, send)
            return
        served = self.lookup(scope["path"][len(self.prefix):])
        if served is None:
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        common = [(b"etag", served.etag), (b"last-modified", served.last_modified),
                  (b"cache-control", CACHE_CONTROL), (b"vary", b"Accept-Encoding")]
        if served.etag in _etags(headers.get(b"if-none-match", b"")):
            await send({"type": "http.response.start", "status": 304, "headers": common})
            await send({"type": "http.response.body", "body": b""})
            return
        body, extra = served.body, []
        if served.gzipped is not None and _accepts_gzip(headers.get(b"accept-encoding", b"")):
            body, extra = served.gzipped, [(b"content-encoding", b"gzip")]
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", served.content_type), (b"content-length", str(len(body)).encode()),
            *extra, *common]})
        await send({"type": "http.response.body",
                    "body": b"" if scope["method"] == "HEAD" else body})

    def lookup(self, relative: str) -> StaticFile | None:
        """The file at `relative` (a URL path under STATIC_URL), read again when it changed
        on disk; None when no finder has it (or it went away)."""
        path = self.paths.get(relative)
        if path is None:
            # As django.views.static.serve reads it; a path leaving the folders is not
            # looked up here (the wrapped handler answers it, as it always did). Only
            # files found are remembered: any URL may be asked for.
            name = posixpath.normpath(unquote(relative)).lstrip("/")
            if not name or name == "." or name.startswith("..") or relative.endswith("/"):
                return None
            try:
                found = finders.find(name)
            except SuspiciousFileOperation:
                return None
            if not isinstance(found, str):
                return None
            path = self.paths[relative] = found
        try:
            stat = os.stat(path)
        except OSError:
            self.paths.pop(relative, None)
            self.files.pop(path, None)
            return None
        served = self.files.get(path)
        if served is None or served.stamp != (stat.st_size, stat.st_mtime_ns):
            served = self.files[path] = read_static(path)
        return served


def _etags(header: bytes) -> set[bytes]:
    return {tag.strip().removeprefix(b"W/") for tag in header.split(b",") if tag.strip()}


def _accepts_gzip(header: bytes) -> bool:
    for part in header.lower().split(b","):
        coding, _, params = part.strip().partition(b";")
        if coding.strip() in (b"gzip", b"*"):
            return params.replace(b" ", b"") not in (b"q=0", b"q=0.0", b"q=0.00", b"q=0.000")
    return False
