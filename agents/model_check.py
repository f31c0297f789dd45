"""What a model server really does, checked before the first task (`manage.py checkmodel`,
the profile's Check button in the admin).

A profile says what the server should be; sessions on a misconfigured one said untrue
things: a template that drops `tools` left the model without a tool for a whole session
(it called none, 5 of 5 times) and its counts were labelled exact while 7x off. The check
asks the server a few small requests, through the same client sessions use
(agents.provider.client), and says per capability what it found, a verdict and the fix:

- reachable    the server answers a chat request for the profile's model;
- window       the window it serves (llama.cpp's /props n_ctx, Ollama's num_ctx from
               /api/show; on a local llama-cpp-python server, which says neither, one
               request just over the profile's window, which it refuses naming its own)
               against the profile's context size;
- tools        whether the chat template renders `tools`: the same request counted with
               and without them (llama.cpp's /apply-template and /tokenize, else the
               server's `usage.prompt_tokens`) — equal counts mean the model never sees a
               tool; where no count is given, whether the model calls a trivial tool when
               asked to;
- tool_choice  whether "none" is honoured (a summary request that repeats the agent's
               prefix sends the agent's "auto"; one whose answer called a tool instead is
               asked again with "none");
- counting     how a session will count (exact / calibrated / estimate), and its error on
               the check's requests, each figure taken before the request as a session
               takes it;
- speed        prompt and generation tokens per second.

The result is a plain structure (`CheckResult.to_dict`), stored with the profile by the
web side. A check that cannot finish — the server is down, times out, answers something
that is no OpenAI-compatible API — raises CheckFailed, and nothing is stored.

The module sits beside the runner rather than in provider/: it counts as sessions count
(agents.counting), which provider/ must not import (pyproject.toml's layers).
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
import textwrap
import time
from dataclasses import dataclass, field
from typing import Any

import httpx2

from agents.config import ModelProfile
from agents.counting.calibration import TokenCalibration, request_kind
from agents.counting.server_tokens import ServerTokenCounter, make_counter, server_root
from agents.loop.interrupt import CallDeadline, run_interruptible
from agents.provider.client import ContextOverflow, ModelClient, ModelError, resolve_api_key
from agents.provider.hosts import HostUnresolved, Resolver, UrlRefused, check_model_url
from agents.secrets import KeyEnvRefused

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"
CAPABILITIES = ("reachable", "window", "tools", "tool_choice", "counting", "speed")
LABELS = {"reachable": "Reachable", "window": "Window", "tools": "Tools rendered",
          "tool_choice": "tool_choice honoured", "counting": "Counting", "speed": "Speed"}

SYSTEM = "You are a helpful assistant. Use a tool when one fits the question."
TOOL = {"type": "function", "function": {
    "name": "get_time", "description": "The current time in a time zone.",
    "parameters": {"type": "object", "properties": {
        "zone": {"type": "string", "description": "IANA time zone, e.g. UTC"}}}}}
ASK_FOR_CALL = ("What time is it in UTC? Call the get_time tool with zone UTC to find out; "
                "do not answer from memory.")
COUNT_AFTER = "Count from 1 to 60, separated by spaces."


def greeting(n: int) -> list[dict[str, Any]]:
    """The request counted with and without tools. Each copy is numbered at its start, so
    no prefix cache shortens it: Ollama reports only the tokens it did not have cached."""
    return [{"role": "system", "content": f"Request {n}. {SYSTEM}"},
            {"role": "user", "content": "Say hello in one word."}]
# A window probe is one request just over the profile's window; past this it would keep a
# CPU server busy for minutes when the server's window turns out to be larger.
MAX_PROBED_WINDOW = 32_768
PROBE_MARGIN = 64  # tokens past the profile's window the probe asks for
AUX_TIMEOUT = 10.0  # seconds for a metadata endpoint (/props, /api/show, /tokenize)
COUNT_TOLERANCE = 0.05  # a calibrated count off by more than this is worth a warning


class CheckFailed(RuntimeError):
    """The check could not be finished; the message says what happened and what to do."""


class _ToolsRefused(Exception):
    """The server refused a request because it offered tools (Ollama, for a model whose
    template has none: "… does not support tools"): a verdict, not a failed check."""


@dataclass
class Capability:
    name: str
    verdict: str  # pass | warn | fail | skip
    found: str  # what the check saw, in words
    fix: str = ""  # what to do about it, in plain words ("" when nothing)
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return LABELS.get(self.name, self.name)


@dataclass
class CheckResult:
    profile: str
    model: str
    base_url: str
    server: str  # llama-cpp-python | llama.cpp | ollama | openai-compatible
    checked_at: str
    seconds: float = 0.0
    capabilities: list[Capability] = field(default_factory=list)

    def get(self, name: str) -> Capability | None:
        return next((c for c in self.capabilities if c.name == name), None)

    def verdict(self, name: str) -> str:
        found = self.get(name)
        return found.verdict if found else SKIP

    @property
    def ok(self) -> bool:
        return all(c.verdict != FAIL for c in self.capabilities)

    @property
    def tools_failed(self) -> bool:
        return self.verdict("tools") == FAIL

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["ok"] = self.ok
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResult:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known and k != "capabilities"}
        return cls(**values, capabilities=[Capability(**c) for c in data.get("capabilities")
                                           or ()])


# --- the check

def check_model(profile: ModelProfile, *, http_client: Any = None,
                resolve: Resolver | None = None, timeout: float | None = None) -> CheckResult:
    """Check the server of `profile`; CheckFailed when the check cannot be finished.

    `timeout`: seconds each request may take, instead of the profile's read and call
    timeouts."""
    if profile.simulated:
        raise CheckFailed(f"Profile {profile.name!r} is the built-in simulated model: it has "
                          "no server to check.")
    if timeout is not None:
        profile = dataclasses.replace(profile, read_timeout=timeout, call_timeout=timeout)
    try:
        check_model_url(profile.base_url, local=profile.local, hosts=profile.model_hosts,
                        refused=profile.refused_endpoints, resolve=resolve)
    except UrlRefused as exc:
        raise CheckFailed(f"Profile {profile.name!r} may not be asked: {exc}") from None
    except HostUnresolved as exc:
        raise CheckFailed(f"Cannot reach the server of profile {profile.name!r}: {exc}. "
                          "Check the host name in its base URL.") from None
    try:
        api_key = resolve_api_key(profile)
    except KeyEnvRefused as exc:
        raise CheckFailed(str(exc)) from None
    return _Check(profile, api_key, http_client, resolve).run()


class _Check:
    def __init__(self, profile: ModelProfile, api_key: str | None, http_client: Any,
                 resolve: Resolver | None) -> None:
        self.profile = profile
        self.root = server_root(profile.base_url)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx2.Client(headers=headers, timeout=httpx2.Timeout(
            min(AUX_TIMEOUT, profile.read_timeout), connect=profile.connect_timeout))
        self.client = ModelClient(profile, http_client=http_client, api_key=api_key or "",
                                  resolve=resolve)
        # Whole answers: the check compares usage.prompt_tokens, which a stream may not
        # carry (llama-cpp-python streams none). The check's requests are short.
        self.client.streaming = False
        self.counter = make_counter(profile)
        self.served = getattr(self.counter, "served", None)
        self.calibration = TokenCalibration(
            prior=profile.token_ratio, prior_calls=profile.token_ratio_calls,
            prior_overheads=profile.token_overheads,
            exact=isinstance(self.counter, ServerTokenCounter))
        self.counts: list[dict[str, Any]] = []  # per request: before, reported, exact
        self.calls = 0

    # --- plumbing
    def _aux(self, method: str, path: str, body: Any = None) -> Any:
        """JSON from a metadata endpoint under the server's root, or None when it offers
        none (any error: these endpoints are optional)."""
        def ask() -> Any:
            response = self.http.request(method, self.root + path, json=body)
            return response.json() if response.status_code == 200 else None

        try:  # bounded as a whole: a server may drip its answer a byte at a time
            return run_interruptible(ask, deadline_s=min(AUX_TIMEOUT, self.profile.call_timeout))
        except (httpx2.HTTPError, ValueError, CallDeadline):
            return None

    def _chat(self, what: str, messages: list[dict[str, Any]], tools: list | None = None,
              tool_choice: str | None = None, max_tokens: int = 16) -> Any:
        """One chat request through the sessions' client, its count taken before it as a
        session takes it and compared with the server's report after."""
        wire = self.client.wire(messages)
        figures = self.served.count(wire, tools, tool_choice if tools else None) \
            if self.served is not None else None
        kind = request_kind(tools, tool_choice or "auto", wire)
        engine = self.counter.request(wire, tools)
        before = figures.tokens if figures is not None else \
            self.calibration.estimate(engine, kind, len(wire))
        # Exact only where the server's report confirms the figure (below); the server's
        # tokenizer on each text still leaves the framing to a fit.
        source = "calibrated" if self.calibration.pairs or self.calibration.prior_calls \
            else "estimate"
        try:
            reply = self._complete(what, messages, tools, max_tokens, tool_choice)
        except ModelError as exc:
            if tools and exc.code == "bad_request" and "tool" in str(exc).lower():
                raise _ToolsRefused(str(exc)) from None
            raise CheckFailed(self._explain(exc, what)) from None
        self.calls += 1
        exact = None
        if figures is not None:
            exact = self.served.check(figures, reply.content, reply.tool_calls,
                                      reply.input_tokens)
        if reply.input_tokens:
            self.counts.append({"request": what, "tools": bool(tools),
                                "counted": exact if exact is not None
                                else before, "reported": reply.input_tokens,
                                "source": "exact" if exact is not None else source})
            self.calibration.observe(engine, reply.input_tokens, kind, len(wire))
        return reply

    def _complete(self, what: str, messages: list[dict[str, Any]], tools: list | None,
                  max_tokens: int, tool_choice: str | None) -> Any:
        """One call, within the profile's call_timeout however slowly the bytes come."""
        try:
            return run_interruptible(
                lambda: self.client.complete(messages, tools, max_tokens,
                                             tool_choice=tool_choice),
                deadline_s=self.profile.call_timeout)
        except CallDeadline:
            raise CheckFailed(f"The server at {self.profile.base_url} did not finish the {what} "
                              f"request within {self.profile.call_timeout:g} s (the profile's "
                              "call timeout): it sends its answer too slowly, or never "
                              "ends it.") from None

    def _explain(self, exc: ModelError, what: str) -> str:
        url = self.profile.base_url
        if exc.code == "connection":
            return (f"The server at {url} does not answer ({exc}). Start it, or correct the "
                    "profile's base URL.")
        if exc.code == "deadline_exceeded":
            return (f"The server at {url} did not answer the {what} request within "
                    f"{self.profile.read_timeout:g} s. A busy or slow server: try again, or "
                    "give more time with --timeout.")
        if exc.code == "malformed_response":
            return (f"The server at {url} answered the {what} request with something that is "
                    f"not an OpenAI-compatible chat completion ({exc}). Is the base URL the "
                    "API's (…/v1)?")
        if exc.code == "auth":
            return (f"The server at {url} refused the key ({exc}). Set the variable the "
                    f"profile names ({self.profile.api_key_env or 'none'}).")
        return f"The server at {url} refused the {what} request: {exc} [{exc.code}]"

    # --- the run
    def run(self) -> CheckResult:
        started = time.perf_counter()
        try:
            listed = self._reachable()
            server = self._server_kind()
            result = CheckResult(profile=self.profile.name, model=self.profile.model,
                                 base_url=self.profile.base_url, server=server,
                                 checked_at=dt.datetime.now(dt.timezone.utc).isoformat(
                                     timespec="seconds"))
            plain = self._chat("plain", greeting(1))
            result.capabilities.append(self._reachable_verdict(listed, plain))
            result.capabilities.append(self._window(server))
            try:
                tools = self._tools(server, plain)
                choice = self._tool_choice()
            except _ToolsRefused as exc:
                tools = Capability("tools", FAIL, f"the server refuses every request that "
                                                  f"offers tools ({exc})", _tools_fix(server))
                choice = Capability("tool_choice", SKIP,
                                    "not checked: the server refuses requests with tools")
            result.capabilities += [tools, choice]
            result.capabilities.append(self._speed())
            result.capabilities.insert(4, self._counting(tools, server))
        finally:
            self.http.close()
        result.seconds = round(time.perf_counter() - started, 2)
        return result

    def _reachable(self) -> list[str]:
        """The model ids the server lists; CheckFailed when it does not answer at all or
        answers something no OpenAI-compatible server would."""
        url = self.profile.base_url.rstrip("/") + "/models"
        try:
            response = self.http.get(url)
        except httpx2.TimeoutException:
            raise CheckFailed(f"The server at {self.profile.base_url} did not answer within "
                              f"{min(AUX_TIMEOUT, self.profile.read_timeout):g} s.") from None
        except httpx2.HTTPError as exc:
            raise CheckFailed(f"The server at {self.profile.base_url} does not answer "
                              f"({type(exc).__name__}: {exc}). Start it, or correct the "
                              "profile's base URL.") from None
        if response.status_code in (401, 403):
            raise CheckFailed(f"The server at {self.profile.base_url} refused the key (HTTP "
                              f"{response.status_code}). Set the variable the profile names "
                              f"({self.profile.api_key_env or 'none'}).")
        if response.status_code != 200:
            return []  # some servers list no models: the chat request decides
        try:
            data = response.json()
            ids = [str(m.get("id", "")) for m in data.get("data", [])]
        except (ValueError, AttributeError, TypeError):
            excerpt = response.text[:120].replace("\n", " ")
            raise CheckFailed(f"The server at {self.profile.base_url} answered /models with "
                              f"something that is not an OpenAI-compatible API (HTTP "
                              f"{response.status_code}: {excerpt!r}). Is the base URL the "
                              "API's (…/v1)?") from None
        return ids

    def _server_kind(self) -> str:
        version = self._aux("GET", "/api/version")
        if isinstance(version, dict) and "version" in version:
            return "ollama"
        if isinstance(self._aux("POST", "/extras/tokenize", {"input": "hello"}), dict):
            return "llama-cpp-python"
        props = self._aux("GET", "/props")
        if isinstance(props, dict) and ("default_generation_settings" in props
                                        or "n_ctx" in props):
            return "llama.cpp"
        return "openai-compatible"

    def _reachable_verdict(self, listed: list[str], plain: Any) -> Capability:
        figures = {"models": listed[:20], "latency_ms": round(plain.latency_ms, 1)}
        found = f"answered a chat request in {plain.latency_ms / 1000:.2f} s"
        if listed and self.profile.model not in listed:
            return Capability("reachable", WARN,
                              f"{found}, but its model list does not name "
                              f"{self.profile.model!r} (it names {', '.join(listed[:5])})",
                              "Set the profile's model to one the server lists (a server with "
                              "one model answers under any name).", figures)
        return Capability("reachable", PASS, found, "", figures)

    # --- window
    def _window(self, server: str) -> Capability:
        want = self.profile.context_size
        if not want:
            return Capability("window", SKIP, "not measured: the profile sets no window")
        served, how = self._served_window(server)
        if served is None and self.profile.local and want <= MAX_PROBED_WINDOW:
            served, how = self._probe_window(want, server)
        if served is None and server == "ollama":
            served, how = self._ollama_window()
        if served is None:
            if not how:
                how = ("not measured: the server does not say its window, and the check "
                       "sends a request as long as the window only to a local server")
            return Capability("window", WARN if self.profile.local else SKIP, how,
                              "Check the server's window by hand." if self.profile.local
                              else "", {"profile": want})
        figures = {"served": served, "profile": want, "how": how}
        if served < want:
            return Capability("window", FAIL,
                              f"the server serves {served:,} tokens ({how}), the profile "
                              f"says {want:,}", _window_fix(server, served, want), figures)
        spare = f"; the profile uses {want:,} of it" if served > want else ""
        return Capability("window", PASS, f"the server serves {served:,} tokens ({how}){spare}",
                          "", figures)

    def _served_window(self, server: str) -> tuple[int | None, str]:
        """The window the server says it serves, where it says one."""
        if server == "llama.cpp":
            props = self._aux("GET", "/props") or {}
            settings = props.get("default_generation_settings") or {}
            n_ctx = settings.get("n_ctx") or props.get("n_ctx")
            if isinstance(n_ctx, int) and n_ctx > 0:
                return n_ctx, "n_ctx from /props"
        return None, ""

    def _ollama_window(self) -> tuple[int | None, str]:
        """Ollama's num_ctx from the model's parameters (/api/show): what it serves unless
        a request asks for another."""
        shown = self._aux("POST", "/api/show", {"model": self.profile.model}) or {}
        for line in str(shown.get("parameters") or "").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "num_ctx" and parts[1].isdigit():
                return int(parts[1]), "num_ctx from /api/show"
        return None, ("not measured: Ollama serves its default window (2 048 or 4 096 "
                      "tokens by version) unless the model or the request sets num_ctx")

    def _probe_window(self, want: int, server: str) -> tuple[int | None, str]:
        """One request just over the profile's window: a server with a smaller window
        refuses it naming its own (llama-cpp-python, vLLM) or cuts it to its own (Ollama);
        a larger one reads it whole. The prompt is one word repeated."""
        unit = "hello "
        target = want + PROBE_MARGIN
        units = target + 1  # one token a word in the BPE vocabularies checked, as a start
        if isinstance(self.counter, ServerTokenCounter):
            count = self.counter.count_whole
            # What one more word costs, not the average of a sample: a tokenizer adds its
            # own start token, so the average overstated it and a probe sized from it fell
            # inside an equal window (read whole: ten minutes on a busy CPU).
            small, large = count(unit * 100), count(unit * 1100)
            if small and large and large > small:
                units = int(target * 1000 / (large - small)) + 1
            for _ in range(3):  # then check the probe itself and grow it until it passes
                counted = count(unit * units)
                if not counted or counted > target:
                    break
                units += target - counted + 8
        messages = [{"role": "user", "content": unit * units}]
        try:
            reply = self._complete("window probe", messages, None, 1, None)
        except ContextOverflow as exc:
            if exc.limit:
                return exc.limit, "the limit it named refusing a longer request"
            return None, ("the server refused a request just over the profile's window "
                          "without naming its own: it is smaller than the profile's")
        except ModelError as exc:
            raise CheckFailed(self._explain(exc, "window probe")) from None
        self.calls += 1
        read = reply.input_tokens
        if read >= want:
            return read, f"it read a {read:,}-token request whole: at least that"
        if read and server == "ollama":
            return read, (f"it cut a request of about {want + PROBE_MARGIN:,} tokens to "
                          f"{read:,} without saying so")
        return None, (f"a request meant to pass the profile's window was read as {read:,} "
                      "tokens: the server's window is not known")

    # --- tools
    def _tools(self, server: str, plain: Any) -> Capability:
        counted = self._template_counts(greeting(1))
        how = "the server's /apply-template and /tokenize"
        if counted is None:
            with_tools = self._chat("with tools", greeting(2), [TOOL], "auto")
            if plain.input_tokens and with_tools.input_tokens:
                counted = (plain.input_tokens, with_tools.input_tokens)
                how = "the server's usage.prompt_tokens"
        calling = self._chat("tool call", [{"role": "system", "content": SYSTEM},
                                           {"role": "user", "content": ASK_FOR_CALL}],
                             [TOOL], "auto", max_tokens=48)
        called = [c["name"] for c in calling.tool_calls]
        called_it = "get_time" in called
        figures: dict[str, Any] = {"called": called, "text": calling.content[:200]}
        fix = _tools_fix(server)
        if counted is not None:
            without, with_ = counted
            schema = self.counter.tools([TOOL])
            figures.update(without_tools=without, with_tools=with_, schema_tokens=schema,
                           how=how)
            if with_ - without < max(5, schema // 2):
                return Capability("tools", FAIL,
                                  f"this server's chat template drops tools: the same request "
                                  f"counts {without} tokens without tools and {with_} with "
                                  f"them ({how}); the model never sees a tool", fix, figures)
            found = (f"the template renders tools (+{with_ - without} tokens with one tool, "
                     f"{how})")
            if called_it:
                return Capability("tools", PASS, f"{found}; the model called get_time when "
                                                 "asked", "", figures)
            return Capability("tools", WARN,
                              f"{found}, but the model did not call get_time when asked "
                              f"(it wrote {calling.content[:80]!r})",
                              "A small model may not use tools reliably: try a larger or "
                              "tool-trained model, or a lower temperature.", figures)
        capabilities = (self._aux("POST", "/api/show", {"model": self.profile.model}) or {}
                        ).get("capabilities") if server == "ollama" else None
        if isinstance(capabilities, list) and "tools" not in capabilities:
            figures["capabilities"] = capabilities
            return Capability("tools", FAIL, f"Ollama lists this model's capabilities as "
                                             f"{', '.join(capabilities)}: no tools", fix, figures)
        if called_it:
            return Capability("tools", PASS, "the model called get_time when asked (the server "
                                             "gives no counts to compare)", "", figures)
        return Capability("tools", FAIL,
                          f"the model did not call get_time when asked (it wrote "
                          f"{calling.content[:80]!r}) and the server gives no counts to see "
                          "whether its template renders tools", fix, figures)

    def _template_counts(self, messages: list[dict[str, Any]]) -> tuple[int, int] | None:
        """(tokens without tools, with them) as llama.cpp's server renders and counts the
        request, or None where it offers no /apply-template."""
        counts = []
        for tools in (None, [TOOL]):
            body: dict[str, Any] = {"messages": messages}
            if tools:
                body.update(tools=tools, tool_choice="auto")
            rendered = self._aux("POST", "/apply-template", body)
            prompt = rendered.get("prompt") if isinstance(rendered, dict) else None
            if not isinstance(prompt, str):
                return None
            tokens = self._aux("POST", "/tokenize", {"content": prompt})
            if not isinstance(tokens, dict) or not isinstance(tokens.get("tokens"), list):
                return None
            counts.append(len(tokens["tokens"]))
        return counts[0], counts[1]

    def _tool_choice(self) -> Capability:
        reply = self._chat("tool_choice none", [{"role": "system", "content": SYSTEM},
                                                {"role": "user", "content": ASK_FOR_CALL}],
                           [TOOL], "none", max_tokens=48)
        figures = {"called": [c["name"] for c in reply.tool_calls]}
        if not reply.tool_calls:
            return Capability("tool_choice", PASS,
                              'tool_choice "none" was honoured: no tool call', "", figures)
        if self.profile.tool_free_summaries:
            return Capability("tool_choice", WARN,
                              'the server ignores tool_choice "none" (it called '
                              f"{', '.join(figures['called'])}); the profile sends summary "
                              "requests without tools, so sessions do not rely on it", "",
                              figures)
        return Capability("tool_choice", FAIL,
                          'the server ignores tool_choice "none": asked not to call a tool, '
                          f"the model called {', '.join(figures['called'])}",
                          "Turn on 'Tool-free summaries' on the profile: summary requests then "
                          "carry no tools instead of relying on tool_choice \"none\".", figures)

    # --- counting and speed
    def _counting(self, tools: Capability, server: str) -> Capability:
        rows = self.counts
        figures: dict[str, Any] = {"requests": rows}
        left_out = ""
        if tools.verdict == FAIL and any(not r["tools"] for r in rows):
            # Sessions on this profile run with tools off: their requests carry none.
            left_out = (f" Requests with tools left out ({sum(r['tools'] for r in rows)}): "
                        "sessions on this profile run with tools off.")
            rows = [r for r in rows if not r["tools"]]
        if not rows:
            return Capability("counting", WARN,
                              "the server reports no usage.prompt_tokens: TaskOS estimates "
                              "with its own tokenizer and cannot correct it",
                              "Use a server that reports usage.", figures)
        errors = [r["counted"] - r["reported"] for r in rows]
        worst = max(rows, key=lambda r: abs(r["counted"] - r["reported"]) / r["reported"])
        share = abs(worst["counted"] - worst["reported"]) / worst["reported"]
        figures.update(errors=errors, max_error_pct=round(share * 100, 1))
        if self.served is not None and self.served.active and self.served.confirmed \
                and all(r["source"] == "exact" for r in rows):
            return Capability("counting", PASS,
                              f"exact: the server's tokenizer and its chat format's rendering "
                              f"matched its reports on {self.served.confirmed} of "
                              f"{len(rows)} requests (error 0 tokens)", "",
                              {**figures, "source": "exact"})
        source = "calibrated" if any(r["source"] == "calibrated" for r in rows) else "estimate"
        why = left_out
        if self.served is not None and self.served.mismatch:
            why += f" Exact counting is off: {self.served.mismatch}."
        spread = ", ".join(f"{e:+d}" for e in errors)
        found = (f"{source}: counted before each request as a session counts, off by "
                 f"{spread} tokens on {len(rows)} requests (at most "
                 f"{share * 100:.1f} %).{why}")
        figures["source"] = source
        if share <= COUNT_TOLERANCE:
            return Capability("counting", PASS, found, "", figures)
        fix = "Sessions keep a margin and learn the server's counts as they go."
        if not self.profile.server_tokenizer and server in ("llama.cpp", "llama-cpp-python"):
            fix += " Turn on 'Server tokenizer' on the profile: this server counts text itself."
        return Capability("counting", WARN, found, fix, figures)

    def _speed(self) -> Capability:
        # A text no earlier request held, so no prefix cache shortens the reading.
        stamp = dt.datetime.now(dt.timezone.utc).isoformat()
        paragraph = ("The quarterly report lists sales by region, returns by product and the "
                     "stock at the end of each month. ")
        words = 12 if not self.profile.local else 40
        messages = [{"role": "user", "content": f"[{stamp}] " + paragraph * words}]
        read = self._chat("speed (prompt)", messages, max_tokens=1)
        messages.append({"role": "assistant", "content": "Noted."})
        messages.append({"role": "user", "content": COUNT_AFTER})
        written = self._chat("speed (generation)", messages, max_tokens=64)
        prompt_tps = read.input_tokens / (read.latency_ms / 1000) if read.latency_ms else 0.0
        gen_tps = written.output_tokens / (written.latency_ms / 1000) \
            if written.latency_ms else 0.0
        figures = {"prompt_tokens": read.input_tokens, "prompt_s": round(read.latency_ms / 1000,
                                                                          3),
                   "prompt_tokens_per_s": round(prompt_tps, 1),
                   "generated_tokens": written.output_tokens,
                   "generation_s": round(written.latency_ms / 1000, 3),
                   "generation_tokens_per_s": round(gen_tps, 1)}
        if not read.input_tokens or not written.output_tokens:
            return Capability("speed", WARN, "the server reports no token counts: speed not "
                                             "measured", "", figures)
        return Capability("speed", PASS,
                          f"reads about {prompt_tps:,.0f} tokens/s ({read.input_tokens} in "
                          f"{read.latency_ms / 1000:.2f} s), writes about {gen_tps:,.1f} "
                          f"tokens/s ({written.output_tokens} in "
                          f"{written.latency_ms / 1000:.2f} s, prefix cached)", "", figures)


def _window_fix(server: str, served: int, want: int) -> str:
    start = {"llama-cpp-python": f"start llama-cpp-python with --n_ctx {want}",
             "llama.cpp": f"start llama-server with --ctx-size {want} (per slot: times "
                          "--parallel)",
             "ollama": f"give the model PARAMETER num_ctx {want} in its Modelfile (or set the "
                       "profile's num_ctx)"}
    how = start.get(server, "give the server a larger window")
    return f"Set the profile's context size to {served}, or {how}."


def _tools_fix(server: str) -> str:
    fixes = {
        "llama-cpp-python": "Start llama-cpp-python with --chat_format chatml-function-calling",
        "llama.cpp": "Start llama-server with --jinja and a chat template that handles tools "
                     "(--chat-template-file)",
        "ollama": "Use a tools-capable model (`ollama show MODEL` lists tools under "
                  "Capabilities)",
    }
    how = fixes.get(server, "Use a server or model whose chat template renders tools "
                            "(llama-cpp-python: --chat_format chatml-function-calling; Ollama: "
                            "a tools-capable model)")
    return f"{how}, then check again. Until then sessions on this profile run with tools off."


# --- reading a result

MARKS = {PASS: "ok  ", WARN: "warn", FAIL: "FAIL", SKIP: "skip"}
LINE = 100  # characters a printed line is wrapped at


def format_result(result: CheckResult) -> str:
    """The result as a person reads it in a terminal."""
    lines = [f"Model check of profile {result.profile!r}: {result.model} at {result.base_url}",
             f"Server: {result.server}; checked {result.checked_at} in {result.seconds:g} s",
             ""]
    width = max(len(c.label) for c in result.capabilities) if result.capabilities else 10
    indent = " " * (width + 9)
    for cap in result.capabilities:
        head = f"[{MARKS.get(cap.verdict, cap.verdict)}] {cap.label.ljust(width)}  "
        lines.append(textwrap.fill(cap.found, LINE, initial_indent=head,
                                   subsequent_indent=indent))
        if cap.fix:
            lines.append(textwrap.fill(cap.fix, LINE, initial_indent=indent + "fix: ",
                                       subsequent_indent=indent + "     "))
    failed = [c.label for c in result.capabilities if c.verdict == FAIL]
    lines.append("")
    lines.append("Verdict: " + (f"FAILED ({', '.join(failed)})" if failed
                                else "usable" + (" with warnings" if any(
                                    c.verdict == WARN for c in result.capabilities) else "")))
    return "\n".join(lines)


def result_json(result: CheckResult) -> str:
    return json.dumps(result.to_dict(), ensure_ascii=False, indent=2)
