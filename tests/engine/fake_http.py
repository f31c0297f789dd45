"""What the fake model servers under tests/engine share: a threaded HTTP server on a free
port of 127.0.0.1, used as a context manager, and a quiet request handler that answers
JSON. Each fake (fake_provider, chatml_server, check_server, streaming_server) is written
from the server it stands for; only this plumbing is common."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QuietHandler(BaseHTTPRequestHandler):
    """Keeps the test output clean and answers JSON with its length."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def send_json(self, status: int, payload: Any) -> None:
        self.send_body(status, json.dumps(payload).encode(), "application/json")

    def send_body(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class FakeServer:
    """A ThreadingHTTPServer serving `handler` from `__enter__` to `__exit__`; its OpenAI
    base URL ends in /v1."""

    def serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
