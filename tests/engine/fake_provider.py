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
- "text_tool"     a Hermes/Qwen `<tool_call>` tag calling list_files, in the content
- "fenced_tool"   a ```json fence {"name": "list_files", "parameters": {}} in the content
- "unknown_json"  a bare JSON call of a tool no task has, as the whole content
- "echo"          the task snapshot of the request, sent back as the answer
- "bad_read"      a tool call reading a file that does not exist (always fails)
- "gated_tool"    set `gated`, wait until the test sets `gate`, then answer as "tool" (a
                  worker frozen in its model call, woken when the test decides)

Options: `null_content_500` answers any message with `content: null` with a 500, as
llama-cpp-python's server does; `prompt_tokens` (a function of the request body) sets
`usage.prompt_tokens`; with `window` too, a request whose prompt_tokens is over it is
refused with the overflow text of `overflow_style` (llamacpp, vllm or ollama), as that
server words it; `tokenizer` (text -> token count) serves llama.cpp's /tokenize.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.engine.fake_http import FakeServer, QuietHandler


def completion(content: str | None = "All done.", finish: str = "stop",
               tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"id": "fake-1", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105}}


OVERFLOW_TEXTS = {
    "llamacpp": "request ({prompt} tokens) exceeds the available context size ({window} "
                "tokens), try increasing it",
    "vllm": "This model's maximum context length is {window} tokens. However, your request "
            "has {prompt} input tokens. Please reduce the length of the input messages.",
    "ollama": "the input length exceeds the context length",
}


class FakeProvider(FakeServer):
    def __init__(self, script: list[str] | None = None, default: str = "ok",
                 retry_after: str = "7", null_content_500: bool = False,
                 prompt_tokens: Any = None, tokenizer: Any = None, window: int | None = None,
                 overflow_style: str = "llamacpp") -> None:
        self.window = window
        self.overflow_text = OVERFLOW_TEXTS[overflow_style]
        self.overflows = 0
        self.script = list(script or [])
        self.null_content_500 = null_content_500
        self.prompt_tokens = prompt_tokens
        self.tokenizer = tokenizer
        self.tokenize_calls = 0
        self.default = default
        self.retry_after = retry_after
        self.requests: list[dict[str, Any]] = []  # {"behaviour", "authorization", "body"}
        self.received = threading.Event()  # set when any request has arrived
        self.stopping = threading.Event()
        self.gated, self.gate = threading.Event(), threading.Event()  # "gated_tool"
        self._lock = threading.Lock()
        provider = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/").endswith("/tokenize"):
                    provider._tokenize(self, body)
                    return
                if provider.null_content_500 and any(
                        "content" in m and m["content"] is None for m in body.get("messages", [])):
                    provider._send(self, 500, b'{"error": {"message": "content null"}}')
                    return
                if provider.window and provider.prompt_tokens(body) > provider.window:
                    provider._overflow(self, provider.prompt_tokens(body))
                    return
                with provider._lock:
                    behaviour = provider.script.pop(0) if provider.script else provider.default
                    provider.requests.append({"behaviour": behaviour, "body": body,
                                              "authorization": self.headers.get("Authorization")})
                provider.received.set()
                provider.behaviours[behaviour](self)

        self.serve(Handler)
        self.behaviours = {
            "ok": self._ok, "tool": self._tool, "hang": self._hang, "drip": self._drip,
            "truncated": self._truncated, "empty": self._empty, "length": self._length,
            "429": self._rate_limited, "500": self._server_error, "echo401": self._echo_key,
            "text_tool": self._text_tool, "fenced_tool": self._fenced_tool,
            "unknown_json": self._unknown_json, "echo": self._echo, "bad_read": self._bad_read,
            "gated_tool": self._gated_tool}

    def __exit__(self, *exc: Any) -> None:
        self.stopping.set()  # a hanging or dripping answer stops before the server does
        super().__exit__(*exc)

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

    def _reply(self, handler, payload: dict[str, Any]) -> None:
        if self.prompt_tokens is not None:
            body = self.requests[-1]["body"]
            payload["usage"] = {**payload["usage"], "prompt_tokens": self.prompt_tokens(body)}
        self._send(handler, 200, json.dumps(payload).encode())

    def _ok(self, handler) -> None:
        self._reply(handler, completion())

    def _tool(self, handler, name: str = "list_files", arguments: str = "{}") -> None:
        call = {"id": f"call_{len(self.requests)}", "type": "function",
                "function": {"name": name, "arguments": arguments}}
        self._reply(handler, completion(None, "tool_calls", [call]))

    def _gated_tool(self, handler) -> None:
        self.gated.set()
        self.gate.wait(120)
        self._tool(handler)

    def _bad_read(self, handler) -> None:
        self._tool(handler, "read_file", '{"path": "no/such/file.txt"}')

    def _text_tool(self, handler) -> None:
        self._reply(handler, completion(
            '<tool_call>\n{"name": "list_files", "arguments": {}}\n</tool_call>'))

    def _fenced_tool(self, handler) -> None:
        self._reply(handler, completion(
            'I will look at the files.\n```json\n{"name": "list_files", "parameters": {}}\n```'))

    def _unknown_json(self, handler) -> None:
        self._reply(handler, completion('{"name": "web_search", "arguments": {"query": "x"}}'))

    def _echo(self, handler) -> None:
        body = self.requests[-1]["body"]
        snapshot = next(m["content"] for m in body["messages"]
                        if "<task-snapshot>" in (m.get("content") or ""))
        self._reply(handler, completion(snapshot))

    def _overflow(self, handler, prompt: int) -> None:
        with self._lock:
            self.overflows += 1
        message = self.overflow_text.format(prompt=prompt, window=self.window)
        body = {"error": {"code": 400, "message": message, "type": "invalid_request_error"}}
        self._send(handler, 400, json.dumps(body).encode())

    def _tokenize(self, handler, body: dict[str, Any]) -> None:
        if self.tokenizer is None:
            self._send(handler, 404, b'{"error": {"message": "File Not Found"}}')
            return
        with self._lock:
            self.tokenize_calls += 1
        tokens = list(range(self.tokenizer(body.get("content", ""))))
        self._send(handler, 200, json.dumps({"tokens": tokens}).encode())

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
