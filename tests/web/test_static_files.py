"""daphne serves /static/ from memory (taskos/ops/static_files.py): the file as on disk,
gzip-compressed to a browser that accepts it, 304 for a copy the browser holds, read
again once it changed on disk; what no finder has goes to Django's handler (404)."""
from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
from asgiref.testing import ApplicationCommunicator
from django.conf import settings

from taskos.ops.static_files import InMemoryStaticFiles

STATIC = Path(settings.BASE_DIR) / "static"


async def fallback(scope, receive, send) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b"from the wrapped app"})


async def get(app, path: str, **headers: str) -> tuple[int, dict[bytes, bytes], bytes]:
    scope = {"type": "http", "method": "GET", "path": path, "query_string": b"",
             "headers": [(k.replace("_", "-").lower().encode(), v.encode())
                         for k, v in headers.items()]}
    talk = ApplicationCommunicator(app, scope)
    await talk.send_input({"type": "http.request", "body": b""})
    start = await talk.receive_output(5)
    body = b""
    while True:
        message = await talk.receive_output(5)
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    return start["status"], dict(start["headers"]), body


@pytest.mark.asyncio
async def test_a_script_comes_compressed_then_not_modified():
    app = InMemoryStaticFiles(fallback)
    on_disk = (STATIC / "js" / "taskos.js").read_bytes()
    status, headers, body = await get(app, "/static/js/taskos.js", accept_encoding="gzip, br")
    assert status == 200 and headers[b"content-encoding"] == b"gzip"
    assert gzip.decompress(body) == on_disk and len(body) < len(on_disk) / 2
    assert headers[b"content-type"].startswith(b"text/javascript")
    assert int(headers[b"content-length"]) == len(body)
    status, plain_headers, plain = await get(app, "/static/js/taskos.js")
    assert status == 200 and plain == on_disk and b"content-encoding" not in plain_headers
    status, _, empty = await get(app, "/static/js/taskos.js", if_none_match=headers[b"etag"].decode())
    assert status == 304 and empty == b""


@pytest.mark.asyncio
async def test_a_changed_file_is_read_again_and_a_missing_one_is_the_wrapped_apps(tmp_path, settings):
    settings.STATICFILES_DIRS = [tmp_path]
    (tmp_path / "a.css").write_text("body { color: red }")
    app = InMemoryStaticFiles(fallback)
    assert (await get(app, "/static/a.css"))[2] == b"body { color: red }"
    (tmp_path / "a.css").write_text("body { color: blue; }")
    os.utime(tmp_path / "a.css", ns=(1, 10**18))  # a new mtime even on a coarse clock
    assert (await get(app, "/static/a.css"))[2] == b"body { color: blue; }"
    assert await get(app, "/static/nothing.css") == (404, {}, b"from the wrapped app")
    assert (await get(app, "/static/../taskos/settings.py"))[2] == b"from the wrapped app"
