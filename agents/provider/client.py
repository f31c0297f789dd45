"""The model client (feature T7): one chat-completion call through the `openai` SDK.

This is the only module that imports `openai`. The simulated model is reached through
the same SDK with an in-process HTTP transport, so every run exercises this code path.

Local servers are asked to stream (`streaming`): a server that ignores `max_tokens` while
the model writes tool-call arguments would otherwise hold its only slot until the window
is full, minutes on a CPU. The streamed answer is counted as it comes, one chunk at least
one token, and the stream is closed once it runs past `max_tokens` (AnswerCut, an output
overflow); closing the connection is what ends the generation on llama.cpp's server,
Ollama and vLLM. A call abandoned at its deadline or by a cancel is closed the same way
(`abort`). Not streamed: the simulated model and paid APIs (they honour max_tokens),
and llama-cpp-python, whose server streams neither a tool call chosen by the model
("Automatic streaming tool choice is not supported") nor `usage`, which exact counting
needs — the caller turns streaming off there (its tokenizer was found). A server that
answers a streamed request whole, or streams without `usage`, is read as it answered; one
that breaks off a streamed request with tools before its first event (llama-cpp-python
when its tokenizer was not asked for) is asked again whole; none of them is asked to
stream again. What bounds llama-cpp-python's tool calls instead is the grammar it builds
from the tool schemas, bounded for local servers (agents.provider.argument_bounds), and
the stop sequences sent with them; a call whose argument reached its bound is refused as
cut (ArgumentsCut, an output overflow).
"""
from __future__ import annotations

import datetime as dt
import email.utils
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai

from agents.config import ModelProfile
from agents.provider.argument_bounds import argument_at_bound, call_stops
from agents.provider.hosts import HostUnresolved, Resolver, UrlRefused, check_model_url
from agents.provider.overflow import parse_overflow
from agents.secrets import KeyEnvRefused, check_key_env, redact, register_secret
from agents.storable import storable_text

log = logging.getLogger(__name__)

# A streamed answer may run this many chunks past max_tokens before it is cut: a chunk
# holds one token or more, so a server that honours max_tokens never comes near it.
STREAM_SLACK = 8

# Codes worth asking again after a wait; anything else ends the session at once.
TRANSIENT_CODES = frozenset({"rate_limited", "provider_error", "connection",
                             "deadline_exceeded", "malformed_response"})


class ModelError(RuntimeError):
    """A model call failed; `code` classifies it for the error reference (W8).

    The message is redacted here, where the error becomes text, so a provider that echoes
    the API key cannot carry it into an event, the session row or a log line; and made
    storable (agents/storable.py): an error body may hold a NUL as well as a reply."""

    def __init__(self, code: str, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(storable_text(redact(message)))
        self.code = code
        self.retry_after = retry_after  # seconds the provider asked us to wait, if it did
        self.elapsed_s = 0.0  # how long the failed call took (set by the caller that timed it)

    @property
    def transient(self) -> bool:
        return self.code in TRANSIENT_CODES


class ContextOverflow(ModelError):
    """The provider refused the request as longer than its window (feature C16)."""

    def __init__(self, limit: int, requested: int, message: str,
                 code: str = "context_length_exceeded") -> None:
        super().__init__(code, message)
        self.limit = limit
        self.requested = requested


class OutputOverflow(ContextOverflow):
    """The window ran out while the server wrote the answer, not while it read the request.

    llama-cpp-python's chatml-function-calling format writes tool-call arguments without
    any max_tokens and then completes again from the prompt plus what it wrote: a small
    model looping inside its arguments fills the window, and the refusal names more prompt
    tokens than were sent. Read as our miscount, it would shrink the window for good."""

    def __init__(self, overflow: ContextOverflow, sent_tokens: int,
                 counted: str = "the server's own count") -> None:
        super().__init__(overflow.limit, overflow.requested,
                         f"The model's answer ran out of the window: the request was "
                         f"{sent_tokens} tokens by {counted}, the server reported "
                         f"{overflow.requested} after writing part of its answer (tool-call "
                         f"arguments, which max_tokens does not bound there). Server: {overflow}",
                         code="output_overflow")
        self.sent_tokens = sent_tokens


class AnswerCut(OutputOverflow):
    """A streamed answer ran past max_tokens (the output reserve) and the stream was closed:
    the server was not bounding it (tool-call arguments), and would have gone on to the
    end of the window while holding its slot."""

    def __init__(self, written: int, max_tokens: int, tool: str = "") -> None:
        where = f"the arguments of a {tool} call" if tool else "its answer"
        ContextOverflow.__init__(
            self, 0, 0, f"The model's answer ran past the output reserve: it had written "
                        f"{written} pieces of {where} where max_tokens was {max_tokens}, so "
                        f"TaskOS closed the connection to stop the server generating.",
            code="output_overflow")
        self.sent_tokens = 0
        self.written = written


class ArgumentsCut(OutputOverflow):
    """A tool call whose string argument reached the length the local server's grammar
    allowed it (agents.provider.argument_bounds): the model was still writing it — looping,
    as a small model does — when the grammar closed it, so the call is not run."""

    def __init__(self, tool: str, argument: str, limit: int) -> None:
        ContextOverflow.__init__(
            self, 0, 0, f"The model's {tool} call was cut at the output reserve: its argument "
                        f"{argument!r} reached the {limit} characters this local server's "
                        f"grammar allows it, so the call was not run (what it holds is cut "
                        f"off, not finished).", code="output_overflow")
        self.sent_tokens = 0


@dataclass
class ModelReply:
    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {"id", "name", "arguments"}
    finish_reason: str = "stop"
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    latency_ms: float = 0.0
    # What a provider with breakpoint caching reports it read from and wrote to its cache
    # (Anthropic's usage fields, as gateways pass them on); None where it reports neither.
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None


class ModelClient:
    """Chat completions against an OpenAI-compatible endpoint or the simulated model."""

    def __init__(self, profile: ModelProfile, *, http_client: Any = None,
                 base_url: str | None = None, api_key: str | None = None,
                 resolve: Resolver | None = None) -> None:
        self.profile = profile
        self.resolve = resolve  # how the endpoint's host name is resolved (None: the system's)
        self._key_error: ModelError | None = None
        if api_key is None:
            try:
                api_key = resolve_api_key(profile)
            except KeyEnvRefused as exc:
                # Raised at the first call, so the session ends with a clear ERROR event.
                self._key_error = ModelError("key_env_refused", str(exc))
        register_secret(api_key)
        # max_retries=0: the loop retries within the session's budget; SDK retries on top
        # would multiply every wait (120 s x 3 tries x 4 loop tries made 24 minutes).
        self._client = openai.OpenAI(
            api_key=api_key or "not-needed", base_url=base_url or profile.base_url or None,
            http_client=http_client, max_retries=0, timeout=client_timeout(profile))
        # Streamed and cut at max_tokens: local servers (see the module's note).
        self.streaming = profile.local and not profile.simulated
        # Tool calls bounded by their schemas and the stop sequences: local servers too.
        self.bounds_arguments = profile.local and not profile.simulated
        self._in_flight: Any = None  # the stream being read, for abort()
        self._lock = threading.Lock()

    def request_params(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                       max_tokens: int, model: str | None = None,
                       tool_choice: str | None = None,
                       cache_marks: tuple[int, ...] = ()) -> dict[str, Any]:
        """The SDK's keyword arguments for one call: what the inspector reconstructs from.
        `cache_marks`: indices of `messages` whose prefix is worth caching; on the wire only
        where the profile says the provider takes marks (cache_marks)."""
        profile = self.profile
        wired = wire_with_marks(messages, cache_marks if profile.cache_marks else (),
                                tool_results_as_user=profile.tool_results_as_user,
                                single_system_message=profile.single_system_message)
        kwargs: dict[str, Any] = {"model": model or self.profile.model,
                                  "messages": wired, "max_tokens": max_tokens}
        kwargs.update(self.profile.sampling())
        if tools:
            kwargs["tools"] = tools
            # Sent always: llama-cpp-python's function-calling format drops every tool
            # silently when no tool_choice is given.
            kwargs["tool_choice"] = tool_choice or "auto"
            if self.bounds_arguments:  # one call per reply (agents.provider.argument_bounds)
                kwargs["stop"] = call_stops(tools)
        if self.profile.num_ctx:
            kwargs["extra_body"] = {"options": {"num_ctx": self.profile.num_ctx}}
        return kwargs

    def wire(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The messages as this profile sends them (see wire_messages)."""
        return wire_messages(messages, self.profile.tool_results_as_user,
                             self.profile.single_system_message)

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 max_tokens: int, model: str | None = None,
                 tool_choice: str | None = None, stream: bool | None = None,
                 cache_marks: tuple[int, ...] = ()) -> ModelReply:
        """One call; `stream` None: as `streaming` says for this client."""
        kwargs = self.request_params(messages, tools, max_tokens, model, tool_choice,
                                     cache_marks)
        if self._key_error is not None:
            raise self._key_error
        self.check_endpoint()
        started = time.perf_counter()
        try:
            if self.streaming if stream is None else stream:
                try:
                    return self._checked(self._streamed(kwargs, max_tokens, started), tools)
                except _NotStreamed as exc:
                    log.warning("the model server could not stream a request with tools (%s); "
                                "asking it again whole, and not streaming from now on", exc)
                    self.streaming = False
            response = self._client.chat.completions.create(**kwargs)
        except openai.APIStatusError as exc:
            text = _error_text(exc)
            window = parse_overflow(text)
            if window:
                raise ContextOverflow(window[0], window[1], text) from exc
            raise ModelError(_classify_status(exc.status_code, text), text,
                             retry_after=retry_after_seconds(exc.response)) from exc
        except openai.APITimeoutError as exc:
            raise ModelError("deadline_exceeded", f"context deadline exceeded: {exc}") from exc
        except openai.APIConnectionError as exc:
            raise ModelError("connection", f"cannot reach the model endpoint: {exc}") from exc
        except (openai.APIResponseValidationError, ValueError) as exc:
            # A body cut off mid-JSON (or not JSON at all): the next try is usually whole.
            raise ModelError("malformed_response",
                             f"the model endpoint sent a malformed response: {exc}") from exc
        except openai.APIError as exc:  # an error sent inside a stream
            text = _error_text(exc)
            window = parse_overflow(text)
            if window:
                raise ContextOverflow(window[0], window[1], text) from exc
            raise ModelError("provider_error", text) from exc
        latency = (time.perf_counter() - started) * 1000
        return self._checked(_to_reply(response, latency), tools)

    def _checked(self, reply: ModelReply, tools: list[dict[str, Any]] | None) -> ModelReply:
        """`reply`, unless a tool call's argument reached the bound its schema set."""
        if self.bounds_arguments and tools:
            for call in reply.tool_calls:
                cut = argument_at_bound(tools, call.get("name", ""), call.get("arguments", ""))
                if cut is not None:
                    raise ArgumentsCut(call.get("name", ""), *cut)
        return reply

    def _streamed(self, kwargs: dict[str, Any], max_tokens: int, started: float) -> ModelReply:
        """The call streamed: the answer put together from its chunks, the stream closed
        (and the generation with it) once it runs past max_tokens."""
        stream = self._client.chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True})
        with self._lock:
            self._in_flight = stream
        try:
            if not stream.response.headers.get("content-type", "").startswith(
                    "text/event-stream"):  # answered whole: read it so
                self.streaming = False
                body = json.loads(stream.response.read())
                response = openai.types.chat.ChatCompletion.model_validate(body)
                return _to_reply(response, (time.perf_counter() - started) * 1000)
            reply = _StreamedReply()
            try:
                for chunk in stream:
                    reply.add(chunk)
                    if reply.written > max_tokens + STREAM_SLACK:
                        stream.close()  # the server sees the connection close and stops
                        raise AnswerCut(reply.written, max_tokens, reply.tool)
            except openai.APIConnectionError as exc:
                if reply.chunks or isinstance(exc, openai.APITimeoutError) \
                        or not kwargs.get("tools"):
                    raise
                raise _NotStreamed(f"{type(exc).__name__}: {exc}") from exc
            if not reply.chunks and kwargs.get("tools"):
                raise _NotStreamed("the stream ended before its first event")
        finally:
            with self._lock:
                self._in_flight = None
            stream.close()
        if reply.usage is None and self.streaming:
            log.info("the model server sends no usage with a streamed answer; its answers "
                     "are no longer streamed, so each call reports its token count")
            self.streaming = False
        return reply.result((time.perf_counter() - started) * 1000)

    def abort(self) -> None:
        """Close the call in flight (from another thread): a call abandoned at its deadline
        or by a cancel stops generating on servers that watch the connection."""
        with self._lock:
            stream, self._in_flight = self._in_flight, None
        if stream is not None:
            try:
                stream.close()
            except Exception:  # noqa: BLE001 - closing a connection mid-read may raise
                log.debug("closing an abandoned stream raised", exc_info=True)

    def check_endpoint(self) -> None:
        """Before each request, whether the profile's URL may still be asked (issue 25 item
        9): the row may have changed since it was saved, or the name resolve elsewhere now.
        A URL that may not be asked fails the session at once (profile_invalid is not
        transient), where a file:// URL was retried as a connection error for the budget."""
        profile = self.profile
        if profile.simulated:
            return
        try:
            check_model_url(profile.base_url, local=profile.local, hosts=profile.model_hosts,
                            refused=profile.refused_endpoints, resolve=self.resolve)
        except UrlRefused as exc:
            raise ModelError("profile_invalid", f"Model profile {profile.name!r}: {exc}") from None
        except HostUnresolved as exc:  # the SDK's own connect would fail the same way
            raise ModelError("connection", f"cannot reach the model endpoint: {exc}") from None


def wire_messages(messages: list[dict[str, Any]], tool_results_as_user: bool = False,
                  single_system_message: bool = False) -> list[dict[str, Any]]:
    """The messages as sent: an assistant message never carries `content: null` (llama.cpp's
    Python server answers it with HTTP 500); "" means the same to every other server. With
    `tool_results_as_user`, tool results go as user messages naming the tool they came from
    (by its name, not the call's id: SmolLM2 copied llama-cpp-python's long ids,
    "call__0_list_files_cmpl-82886b52-…", into the paths it asked for). With
    `single_system_message`, the leading system messages (prompt, snapshot, words, summary,
    truncation marker) go as one, in order, and a later system message as a user message:
    a template that writes the tools into each system message then writes them once. The
    merged text starts with the system prompt, so a prefix cache still matches."""
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # call id -> tool name, from the assistant turns so far
    for m in messages:
        if "content" in m and m["content"] is None:
            m = {**m, "content": ""}
        for call in m.get("tool_calls") or ():
            names[call.get("id", "")] = (call.get("function") or {}).get("name", "")
        if tool_results_as_user and m.get("role") == "tool":
            call_id = m.get("tool_call_id", "")
            m = {"role": "user", "content": f"[result of tool call {names.get(call_id) or call_id}]"
                                            f"\n{m.get('content') or ''}"}
        if single_system_message and m.get("role") == "system" and out:
            if len(out) == 1 and out[0].get("role") == "system":
                out[0] = {**out[0], "content": f"{out[0].get('content') or ''}\n\n"
                                               f"{m.get('content') or ''}"}
                continue
            m = {**m, "role": "user"}
        out.append(m)
    return out


def wired_index(messages: list[dict[str, Any]], index: int, single_system_message: bool) -> int:
    """Where message `index` is on the wire: the leading system messages go as one when
    the profile merges them (wire_messages)."""
    if not single_system_message:
        return index
    leading = next((i for i, m in enumerate(messages) if m.get("role") != "system"),
                   len(messages))
    return 0 if index < leading else index - max(0, leading - 1)


def wire_with_marks(messages: list[dict[str, Any]], cache_marks: tuple[int, ...] | list[int] = (),
                    *, tool_results_as_user: bool = False,
                    single_system_message: bool = False) -> list[dict[str, Any]]:
    """`messages` as a request sends them (wire_messages), with a cache breakpoint on each
    of `cache_marks` (indices of `messages`). The one rule for the client and for anything
    that rebuilds a sent request from the engine's messages and the marks stored with it."""
    wired = wire_messages(messages, tool_results_as_user, single_system_message)
    if cache_marks:
        wired = with_cache_marks(wired, [wired_index(messages, i, single_system_message)
                                         for i in cache_marks])
    return wired


def mark_carriers(messages: list[dict[str, Any]], wired: list[dict[str, Any]],
                  single_system_message: bool = False) -> set[int]:
    """Indices of `messages` whose text ends a prefix `wired` (their sent form, see
    wire_with_marks) marks for caching: where a mark really went, which is not where it was
    asked for when that message had no text, and for merged system messages the last."""
    carriers: dict[int, int] = {}
    for index in range(len(messages)):
        at = wired_index(messages, index, single_system_message)
        content = wired[at].get("content") if at < len(wired) else None
        if isinstance(content, list) and any(isinstance(part, dict) and "cache_control" in part
                                             for part in content):
            carriers[at] = index
    return set(carriers.values())


def with_cache_marks(messages: list[dict[str, Any]], marks: list[int]) -> list[dict[str, Any]]:
    """`messages` with a cache breakpoint on each marked one, as Anthropic-compatible
    gateways take it: the text as one content part carrying `cache_control`. A message
    without text (an assistant turn that only calls tools) passes its mark to the nearest
    earlier one with text: the cached prefix ends a little earlier, never later."""
    out = list(messages)
    for index in sorted(set(marks)):
        at = min(index, len(out) - 1)
        while at >= 0 and not out[at].get("content"):
            at -= 1
        if at < 0 or not isinstance(out[at]["content"], str):  # none, or marked already
            continue
        out[at] = {**out[at], "content": [{"type": "text", "text": out[at]["content"],
                                           "cache_control": {"type": "ephemeral"}}]}
    return out


def resolve_api_key(profile: ModelProfile) -> str | None:
    """The key from the variable the profile names, after checking the name is allowed."""
    if profile.simulated or not profile.api_key_env:
        return None  # the simulated model and keyless local servers read no variable
    check_key_env(profile.api_key_env)
    return os.environ.get(profile.api_key_env) or None


def client_timeout(profile: ModelProfile) -> httpx2.Timeout:
    """Connect and read limits from the profile; the total per call is watched by the caller."""
    return httpx2.Timeout(profile.read_timeout, connect=profile.connect_timeout)


def retry_after_seconds(response: Any) -> float | None:
    """The wait a 429/503 asked for (`Retry-After` seconds or HTTP date, `retry-after-ms`)."""
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return max(0.0, (when - dt.datetime.now(dt.timezone.utc)).total_seconds())


def _error_text(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(exc)


def _classify_status(status: int, text: str) -> str:
    lowered = text.lower()
    if "kv cache" in lowered or "failed to allocate" in lowered or "out of memory" in lowered:
        return "kv_cache_allocation"
    if status in (401, 403):
        return "auth"
    if status == 429:
        return "rate_limited"
    if status >= 500:
        return "provider_error"
    return "bad_request"


class _NotStreamed(Exception):
    """The server broke off a streamed request with tools before its first event, as
    llama-cpp-python does when the model chooses a tool ("Automatic streaming tool choice is
    not supported"): the request is sent again whole."""


class _StreamedReply:
    """The pieces of a streamed answer as they arrive."""

    def __init__(self) -> None:
        self.chunks = 0
        self.content: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}  # by the call's index in the answer
        self.finish = "stop"
        self.usage: Any = None
        self.written = 0  # chunks that carried text or arguments: at least one token each
        self.tool = ""  # the call being written, for the message when it is cut

    def add(self, chunk: Any) -> None:
        self.chunks += 1
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        for choice in getattr(chunk, "choices", None) or ():
            delta = choice.delta
            if delta is not None and delta.content:
                self.content.append(delta.content)
                self.written += 1
            for part in (delta.tool_calls if delta is not None else None) or ():
                call = self.calls.setdefault(part.index or 0,
                                             {"id": "", "name": "", "arguments": []})
                call["id"] = part.id or call["id"]
                function = part.function
                if function is not None:
                    call["name"] = call["name"] + (function.name or "")
                    if function.arguments:
                        call["arguments"].append(function.arguments)
                        self.written += 1
                self.tool = call["name"]
            if choice.finish_reason:
                self.finish = choice.finish_reason

    def result(self, latency_ms: float) -> ModelReply:
        usage = self.usage
        cached = 0
        if usage is not None and getattr(usage, "prompt_tokens_details", None) is not None:
            cached = usage.prompt_tokens_details.cached_tokens or 0
        calls = [{"id": call["id"], "name": storable_text(call["name"]),
                  "arguments": storable_text("".join(call["arguments"]) or "{}")}
                 for _, call in sorted(self.calls.items())]
        return ModelReply(
            content=storable_text("".join(self.content)), tool_calls=calls,
            finish_reason=self.finish, input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            output_tokens=getattr(usage, "completion_tokens", 0) or 0, cached_tokens=cached,
            latency_ms=latency_ms, **_reply_breakpoints(usage))


def _to_reply(response: Any, latency_ms: float) -> ModelReply:
    if isinstance(response, str):  # the SDK hands back the text of a non-JSON body
        raise ModelError("malformed_response",
                         f"the model endpoint answered with non-JSON text: {response[:200]!r}")
    if not getattr(response, "choices", None):
        raise ModelError("malformed_response", "the model returned no choices")
    choice = response.choices[0]
    message = getattr(choice, "message", None)
    if message is None:
        raise ModelError("malformed_response", "the model returned a choice without a message")
    # What the model wrote enters the engine by the storable rule (agents/storable.py): a
    # NUL or a lone surrogate in it is kept, sent back and archived as the same mark.
    calls = [{"id": c.id, "name": c.function.name and storable_text(c.function.name),
              "arguments": storable_text(c.function.arguments or "{}")}
             for c in (message.tool_calls or []) if getattr(c, "function", None)]
    usage = response.usage
    cached = 0
    if usage is not None and getattr(usage, "prompt_tokens_details", None) is not None:
        cached = usage.prompt_tokens_details.cached_tokens or 0
    return ModelReply(
        content=storable_text(message.content or ""), tool_calls=calls,
        finish_reason=choice.finish_reason or "stop",
        input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        output_tokens=getattr(usage, "completion_tokens", 0) or 0,
        cached_tokens=cached, latency_ms=latency_ms, **_reply_breakpoints(usage))


def _reply_breakpoints(usage: Any) -> dict[str, int | None]:
    """What a provider with breakpoint caching reports it read and wrote (Anthropic's
    usage fields, as gateways pass them on), else Nones."""
    read = getattr(usage, "cache_read_input_tokens", None)
    written = getattr(usage, "cache_creation_input_tokens", None)
    if not isinstance(read, int) and not isinstance(written, int):
        return {"cache_read_tokens": None, "cache_write_tokens": None}
    return {"cache_read_tokens": read if isinstance(read, int) else 0,
            "cache_write_tokens": written if isinstance(written, int) else 0}
