"""A fake OpenAI-compatible server on a real socket, scripted to misbehave.

Each request to /v1/chat/completions takes the next behaviour from the script (then the
default). Behaviours:

- "ok"            a normal final answer
- "tool"          an answer calling the list_files tool
- "hang"          read the request, then send nothing until the server stops
- "drip"          send headers, then one body byte every 0.2 s, never finishing
- "truncated"     200 with a JSON body cut off in the middle
- "empty"         200 with `choices: []`
- "length"        a final answer cut with finish_reason "length"
- "429"           429 with `Retry-After: <retry_after>`
- "500"           a plain 500
- "echo401"       401 whose message echoes the bearer key it was sent
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def completion(content: str | None = "All done.", finish: str = "stop",
               tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"id": "fake-1", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105}}


class FakeProvider:
    def __init__(self, script: list[str] | None = None, default: str = "ok",
                 retry_after: str = "7") -> None:
        self.script = list(script or [])
        self.default = default
        self.retry_after = retry_after
        self.requests: list[dict[str, Any]] = []  # {"behaviour", "authorization", "body"}
        self.received = threading.Event()  # set when any request has arrived
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep the test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with provider._lock:
                    behaviour = provider.script.pop(0) if provider.script else provider.default
                    provider.requests.append({"behaviour": behaviour, "body": body,
                                              "authorization": self.headers.get("Authorization")})
                provider.received.set()
                provider.behaviours[behaviour](self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.behaviours = {
            "ok": self._ok, "tool": self._tool, "hang": self._hang, "drip": self._drip,
            "truncated": self._truncated, "empty": self._empty, "length": self._length,
            "429": self._rate_limited, "500": self._server_error, "echo401": self._echo_key}

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> "FakeProvider":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    # --- behaviours
    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: bytes,
              headers: dict[str, str] | None = None, length: int | None = None) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload) if length is None else length))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(payload)
        handler.wfile.flush()

    def _ok(self, handler) -> None:
        self._send(handler, 200, json.dumps(completion()).encode())

    def _tool(self, handler) -> None:
        call = {"id": f"call_{len(self.requests)}", "type": "function",
                "function": {"name": "list_files", "arguments": "{}"}}
        self._send(handler, 200, json.dumps(completion(None, "tool_calls", [call])).encode())

    def _hang(self, handler) -> None:
        self.stopping.wait()

    def _drip(self, handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", "100000")
        handler.end_headers()
        while not self.stopping.is_set():
            try:
                handler.wfile.write(b" ")
                handler.wfile.flush()
            except OSError:
                return
            time.sleep(0.2)

    def _truncated(self, handler) -> None:
        whole = json.dumps(completion("A complete answer that gets cut.")).encode()
        self._send(handler, 200, whole[: len(whole) // 2])

    def _empty(self, handler) -> None:
        self._send(handler, 200, json.dumps({**completion(), "choices": []}).encode())

    def _length(self, handler) -> None:
        self._send(handler, 200, json.dumps(completion("piece of a long answ", "length")).encode())

    def _rate_limited(self, handler) -> None:
        body = {"error": {"message": "Rate limit reached, slow down.", "type": "rate_limit"}}
        self._send(handler, 429, json.dumps(body).encode(), {"Retry-After": self.retry_after})

    def _server_error(self, handler) -> None:
        self._send(handler, 500, json.dumps({"error": {"message": "server exploded"}}).encode())

    def _echo_key(self, handler) -> None:
        key = (handler.headers.get("Authorization") or "").removeprefix("Bearer ")
        body = {"error": {"message": f"Incorrect API key provided: {key}.", "code": "invalid_api_key"}}
        self._send(handler, 401, json.dumps(body).encode())
