"""A fake local model server for the model check: llama-cpp-python's or llama.cpp's, with a
chat template that renders tools or drops them.

Written from what those servers do (nothing here imports the engine):

- llama-cpp-python (kind "llama-cpp-python") lists its model at GET /v1/models without
  saying its window, counts text at POST /extras/tokenize and refuses a prompt of n_ctx
  tokens or more with "Requested tokens (N) exceed context window of W".
  Under chatml-function-calling (template "chatml-function-calling") it renders the tools
  into the system message when tool_choice is "auto" and reports, for a text reply, the
  prompt plus `message:\\n`; for one tool call the prompt plus `functions.NAME:\\n`. Under
  a model's own template that ignores `tools` (template "own") the prompt is the same with
  or without tools, and the reply is plain text whatever the request asks.
- llama.cpp's llama-server (kind "llama.cpp") says its window at GET /props
  (default_generation_settings.n_ctx), renders a request at POST /apply-template and counts
  text at POST /tokenize {"content"}.

- Ollama (kind "ollama") says its version at GET /api/version and a model's parameters and
  capabilities at POST /api/show (num_ctx only when the Modelfile sets it: `show_num_ctx`);
  it offers no tokenizer, cuts a prompt longer than its window to the window without a
  word, and refuses any request with tools for a model whose template has none (template
  "own"): "MODEL does not support tools".

`ignores_none`: tool_choice "none" is treated as "auto" (the tools are rendered and the
model calls one when asked). `garbage`: every answer is an HTML page. The "model" calls
get_time when the request renders tools and the last user message names get_time; else it
says "Hello."; asked to count, it counts up to max_tokens numbers.
"""
from __future__ import annotations

import json
import threading
from typing import Any

from tests.engine.chatml_server import count, render
from tests.engine.fake_http import FakeServer, QuietHandler


class CheckServer(FakeServer):
    def __init__(self, *, kind: str = "llama-cpp-python",
                 template: str = "chatml-function-calling", n_ctx: int = 4096,
                 ignores_none: bool = False, garbage: bool = False,
                 model: str = "smollm2-135m-instruct", show_num_ctx: bool = False,
                 tokenizer_start: int = 0) -> None:
        self.kind, self.template, self.n_ctx = kind, template, n_ctx
        # Tokens the tokenizer endpoint adds to any text (a start token, a prefix space),
        # which the chat prompt does not carry: a real tokenizer's count of a short sample
        # overstates what each further word costs.
        self.tokenizer_start = tokenizer_start
        self.ignores_none, self.garbage, self.model = ignores_none, garbage, model
        self.show_num_ctx = show_num_ctx
        self.requests: list[dict[str, Any]] = []  # chat request bodies, in order
        self.refused: list[int] = []  # prompt tokens of each refused request
        self._lock = threading.Lock()
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:  # noqa: N802
                if server.garbage:
                    return self._html()
                if self.path.rstrip("/").endswith("/v1/models"):
                    return self.send_json(200, {"object": "list", "data": [
                        {"id": server.model, "object": "model", "owned_by": "me"}]})
                if self.path == "/api/version" and server.kind == "ollama":
                    return self.send_json(200, {"version": "0.6.2"})
                if self.path == "/props" and server.kind == "llama.cpp":
                    return self.send_json(200, {"default_generation_settings": {
                        "n_ctx": server.n_ctx}, "total_slots": 1})
                self.send_json(404, {"detail": "Not Found"})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if server.garbage:
                    return self._html()
                path = self.path.rstrip("/")
                if path == "/extras/tokenize" and server.kind == "llama-cpp-python":
                    return self.send_json(200, {"tokens": list(range(
                        count(body["input"]) + server.tokenizer_start))})
                if path == "/tokenize" and server.kind == "llama.cpp":
                    return self.send_json(200, {"tokens": list(range(
                        count(body["content"]) + server.tokenizer_start))})
                if path == "/apply-template" and server.kind == "llama.cpp":
                    tools, choice = server.rendered_tools(body)
                    return self.send_json(200, {"prompt": render(body["messages"], tools, choice)})
                if path == "/api/show" and server.kind == "ollama":
                    tools = [] if server.template == "own" else ["tools"]
                    return self.send_json(200, {
                        "capabilities": ["completion", *tools],
                        "parameters": f"num_ctx {server.n_ctx}" if server.show_num_ctx
                        else "stop \"<|im_end|>\""})
                if path.endswith("/chat/completions"):
                    return self.send_json(*server.chat(body))
                self.send_json(404, {"detail": "Not Found"})

            def _html(self) -> None:
                self.send_body(200, b"<html><body><h1>Welcome to nginx!</h1></body></html>",
                               "text/html")

        self.serve(Handler)

    def rendered_tools(self, body: dict[str, Any]) -> tuple[Any, Any]:
        """(tools, tool_choice) as the template sees them."""
        if self.template == "own":
            return None, None
        choice = body.get("tool_choice")
        if self.ignores_none and choice == "none":
            choice = "auto"
        return body.get("tools"), choice

    def chat(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self.kind == "ollama" and self.template == "own" and body.get("tools"):
            return 400, {"error": {"message": f"registry.ollama.ai/library/{self.model} does "
                                              "not support tools", "type": "api_error"}}
        tools, choice = self.rendered_tools(body)
        prompt = render(body["messages"], tools, choice)
        tokens = count(prompt)
        with self._lock:
            self.requests.append(body)
            if tokens >= self.n_ctx and self.kind == "ollama":
                return 200, reply("hello", self.n_ctx, 1)  # cut to the window, silently
            if tokens >= self.n_ctx:
                self.refused.append(tokens)
                return 400, {"error": {"message": f"Requested tokens ({tokens}) exceed "
                                                  f"context window of {self.n_ctx}"}}
        last = body["messages"][-1].get("content") or ""
        with_tools = bool(tools) and choice == "auto"
        if with_tools and "get_time" in last:
            opened = prompt + "functions.get_time:\n"
            call = {"id": "call_0", "type": "function",
                    "function": {"name": "get_time", "arguments": '{"zone": "UTC"}'}}
            return 200, reply(None, count(opened), 8, [call])
        if "Count from 1" in last:
            text = " ".join(str(n) for n in range(1, (body.get("max_tokens") or 16) + 1))
        else:
            text = "Hello."
        reported = count(prompt + "message:\n") if with_tools else tokens
        return 200, reply(text, reported, count(text))


def reply(content: str | None, prompt_tokens: int, completion_tokens: int,
          calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {"id": "chatcmpl-check", "object": "chat.completion", "created": 0,
            "model": "fake", "choices": [{"index": 0, "message": message,
                                          "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}
