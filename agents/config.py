"""Context settings (feature C4) and model profiles (feature C18)."""
from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agents.secrets import check_key_env

log = logging.getLogger(__name__)


class ConfigError(ValueError):
    """A setting a person gave is out of range; the message says which and why."""

    code = "settings_invalid"  # the error reference's entry (agents/errors.py)


class ProfileInvalid(ConfigError):
    """A model profile that cannot work (a number out of range, a URL that may not be
    asked): the session fails at once instead of retrying or crashing."""

    code = "profile_invalid"


def _plain(number: float) -> str:
    """1000 → "1000", 0.9 → "0.9", 1e308 → "1e+308": the number as a person typed it."""
    if isinstance(number, float) and number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    return repr(number) if isinstance(number, float) else str(number)


@dataclass(frozen=True)
class Bounds:
    """The range a person may set a number to (issue 25 item 6), declared once next to the
    field it bounds and checked by check_number wherever the number comes in: the start
    form, the admin, scenario files, the command line and the engine itself."""

    low: float
    high: float
    low_open: bool = False  # the low end itself is refused: "greater than 0"
    high_open: bool = False  # the high end itself is refused: "less than 0.5"
    whole: bool = False  # a whole number (never a bool)
    unit: str = ""  # " tokens", " seconds"
    why: str = ""  # said after the range when a value is refused

    def describe(self) -> str:
        low = f"{'greater than' if self.low_open else 'at least'} {_plain(self.low)}{self.unit}"
        high = f"{'less than' if self.high_open else 'at most'} {_plain(self.high)}{self.unit}"
        return f"{low} and {high}"

    def holds(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below


def check_number(name: str, value: Any, bounds: Bounds) -> Any:
    """`value` when it is a number inside `bounds`; else ConfigError naming the setting,
    the value and the allowed range. The one check every number a person sets goes through."""
    kind = "a whole number" if bounds.whole else "a number"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            bounds.whole and not isinstance(value, int)):
        raise ConfigError(f"{name} must be {kind}, {bounds.describe()} (got {value!r}).")
    if not math.isfinite(value) or not bounds.holds(value):
        raise ConfigError(f"{name} must be {bounds.describe()} (got {_plain(value)})."
                          f"{' ' + bounds.why if bounds.why else ''}")
    return value


def bounded(default: Any, low: float, high: float, **how: Any) -> Any:
    """A ContextConfig field with the range a person may set it to."""
    return field(default=default, metadata={"bounds": Bounds(low, high, **how)})


# A context window in tokens: a session's, a scenario's, a profile's context size. The top is
# ten times the largest window a model offers today, room for the benchmark's unmanaged runs.
WINDOW = Bounds(1000, 100_000_000, whole=True, unit=" tokens")
MAX_TURNS = 100_000  # a session's turn cap, and the most model steps a scenario expands to


MAX_INPUT_CHARS = 100_000  # longest goal or message (the dashboard's TASKOS_MAX_INPUT_CHARS)
TOOLS_OFF_NOTICE = ("Tools are off for this session: the model is offered no tool and "
                    "answers from the goal and the messages alone.")


def input_too_long(text: str, what: str, limit: int = MAX_INPUT_CHARS) -> str | None:
    """Why `text` is refused as longer than `limit` characters, or None when it fits."""
    if len(text or "") <= limit:
        return None
    return (f"the {what} is too long: {len(text):,} characters, at most {limit:,}; it was "
            "not used. Put long material in a workspace file and refer to it instead.")


@dataclass
class ContextConfig:
    """AgentScope's ContextConfig fields and defaults, plus TaskOS's zone knobs. Every number
    carries its range (Bounds); from_dict is the check for settings that come from outside."""

    trigger_ratio: float = bounded(
        0.8, 0, 0.9, low_open=True,
        why="Near 1.0 compaction would start only once the window is already full, leaving "
            "no room for the summary request or the answer.")
    reserve_ratio: float = bounded(0.1, 0, 0.5, high_open=True)
    context_buffer_ratio: float = bounded(0.2, 0, 1, high_open=True)
    # tokens of one tool result allowed into the context
    tool_result_limit: int = bounded(50_000, 100, WINDOW.high, whole=True, unit=" tokens")
    compression_fallback_to_truncation: bool = True
    compression_tool_enabled: bool = False
    # The clearing tier (feature C20): old tool results become one-line digests before any
    # summary. Off, only summaries and truncation make room.
    clear_tool_results: bool = True
    delegation_enabled: bool = False  # offer the delegate tool (sub-agents, feature T6)
    max_image_num: int = bounded(5, 0, 100, whole=True)
    # rolling-window trigger: more rounds than this kept → compact
    max_rounds: int = bounded(5, 1, 1000, whole=True)
    # The person's words (feature C19): every message the person wrote is sent verbatim
    # while all of them fit this share of the input limit, taken before the history; only
    # past it are the older ones condensed.
    words_share: float = bounded(
        0.25, 0, 0.5, low_open=True,
        why="Above half of the input limit the history and the summary would have too "
            "little room to work in.")
    timezone: str = "UTC"
    time_interval_hours: float = bounded(0.5, 0, 8760, unit=" hours")  # at most a year
    tool_retries_limit: int = bounded(3, 1, 100, whole=True)
    max_turns: int = bounded(400, 1, MAX_TURNS, whole=True)
    tools: list[str] = field(default_factory=list)  # tools offered; empty: all (or the scenario's)
    # No tool at all: set for a session on a profile whose model check found that the
    # server's chat template drops tools (agents/model_check.py), where the model would
    # never see one and every tool turn would be a guess.
    tools_off: bool = False

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        for spec in fields(self):
            self.check(spec.name, getattr(self, spec.name))

    @classmethod
    def bounds_of(cls, name: str) -> Bounds:
        """The range of the number setting `name` (a form sizes its field by it)."""
        return next(f for f in fields(cls) if f.name == name).metadata["bounds"]

    @classmethod
    def check(cls, name: str, value: Any) -> Any:
        """One setting, checked alone (the start form puts an error on its own field)."""
        spec = next((f for f in fields(cls) if f.name == name), None)
        if spec is None:
            known = ", ".join(f.name for f in fields(cls))
            raise ConfigError(f"Unknown context setting {name!r}. Settings: {known}.")
        if "bounds" in spec.metadata:
            return check_number(name, value, spec.metadata["bounds"])
        if spec.type == "bool" and not isinstance(value, bool):
            raise ConfigError(f"{name} must be true or false (got {value!r}).")
        if name == "timezone":
            check_zone(value)
        if name == "tools" and not (isinstance(value, list)
                                    and all(isinstance(t, str) for t in value)):
            raise ConfigError(f"tools must be a list of tool names (got {value!r}).")
        return value

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, *, strict: bool = False) -> "ContextConfig":
        """Settings from outside (a form, the admin's JSON, a stored row, the command line),
        every one checked; ConfigError says which is wrong and what is allowed. A name that
        is no setting is ignored (a row stored by another version), or refused if `strict`
        (what a person types)."""
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise ConfigError("Context settings must be an object of setting names and values "
                              f"such as {{\"max_rounds\": 5}}, not {type(data).__name__} "
                              f"{str(data)[:80]}.")
        known = {f.name for f in fields(cls)}
        for name, value in data.items():
            if strict or name in known:
                cls.check(name, value)
        return cls(**{k: v for k, v in data.items() if k in known})


def check_zone(name: Any) -> None:
    """An IANA time zone name, or ConfigError."""
    try:
        if not isinstance(name, str):
            raise ValueError(name)
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"Unknown timezone {name!r}: use an IANA name such as 'UTC' or "
                          "'Asia/Shanghai'.") from None


# Known windows; an unknown model without an explicit context_size gets a warning (C18).
KNOWN_CONTEXT_SIZES = {
    "gpt-4o": 128_000, "gpt-4o-mini": 128_000, "gpt-4.1": 1_047_576, "gpt-4.1-mini": 1_047_576,
    "deepseek-chat": 65_536, "qwen-plus": 131_072, "qwen-max": 32_768,
}


MAX_PRICE = 10_000  # per 1M tokens: far above any model's price, far below a typo's
DAY_S = 86_400  # the longest timeout or retry budget: a day


def url_shape_problem(url: str) -> str:
    """Why `url` can never be a model endpoint (not http or https, no host, a bad port), or
    "" (blank is the simulated model). Which hosts are allowed: agents/provider/hosts.py."""
    if not url:
        return ""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not 0-65535
    except ValueError as exc:
        return f"The base URL {url!r} cannot be read ({exc})."
    if parts.scheme.lower() not in ("http", "https"):
        scheme = f"{parts.scheme}://" if parts.scheme else "no scheme"
        return (f"The base URL {url!r} uses {scheme}: a model endpoint is reached over "
                "http:// or https:// only.")
    if not parts.hostname:
        return f"The base URL {url!r} names no host."
    return ""


@dataclass(frozen=True)
class Setting:
    """How one profile field is kept and edited. The web app builds its ModelProfile table
    and form from these (taskos/runs/models.py), so a field is defined once."""

    help: str = ""
    kept: bool = True  # False: given for each run, never stored with the profile
    required: bool = False  # a person must give it; no default is offered
    optional: bool = False  # may be left blank (None): the engine then uses its own default
    unique: bool = False
    max_chars: int = 0  # text: the longest value accepted
    minimum: float | None = None  # numbers: the range a person may set (both ends are
    maximum: float | None = None  # given for every number a person sets: issue 25 item 8)
    money: bool = False  # a price per 1M tokens, kept to 4 decimals
    learnt: bool = False  # written by the sessions, not by people
    check: Callable[[Any], None] | None = None  # raises ValueError saying what is wrong
    unit: str = ""

    def bounds(self, spec: dataclasses.Field) -> Bounds | None:
        """The range of a number field, as check_number reads it; None for other fields."""
        if self.minimum is None and self.maximum is None:
            return None
        return Bounds(self.minimum, self.maximum, whole=spec.type.startswith("int"),
                      unit=self.unit)


def setting(default: Any = dataclasses.MISSING, *, factory: Any = dataclasses.MISSING,
            **how: Any) -> Any:
    """A ModelProfile field and how it is kept (Setting)."""
    return field(default=default, default_factory=factory, metadata={"setting": Setting(**how)})


def profile_settings() -> list[tuple[dataclasses.Field, Setting]]:
    """The fields of a model profile that are kept with it, in order, with their Setting."""
    return [(f, f.metadata["setting"]) for f in fields(ModelProfile)
            if f.metadata["setting"].kept]


@dataclass
class ModelProfile:
    """Where a model lives, how big its window is and what it costs (feature C18)."""

    name: str = setting("sim", max_chars=80, unique=True, required=True)
    model: str = setting("taskos-sim", max_chars=200, required=True,
                         help="Model name sent to the API.")
    base_url: str = setting(
        "", max_chars=500,
        help="OpenAI-compatible endpoint, e.g. https://api.openai.com/v1. Leave blank for the "
             "built-in simulated model. http or https only; loopback and private addresses "
             "only for a local model (or hosts listed in TASKOS_MODEL_HOSTS).")
    # Whether the URL may name a loopback or private address (agents/provider/hosts.py).
    local: bool = setting(
        False, help="A model server on this machine or your private network (llama.cpp, "
                    "Ollama, vLLM): its base URL may name a loopback or private address. "
                    "Off: public addresses only, unless the operator lists the host in "
                    "TASKOS_MODEL_HOSTS.")
    # The key is read from this variable, never stored.
    api_key_env: str = setting(
        "OPENAI_API_KEY", max_chars=100, check=check_key_env,
        help="Name of the environment variable holding the API key (blank: no key, for local "
             "servers). Allowed: names starting with TASKOS_KEY_ and those the operator lists "
             "in TASKOS_ALLOWED_KEY_ENVS.")
    context_size: int = setting(
        128_000, optional=True, minimum=WINDOW.low, maximum=WINDOW.high, unit=" tokens",
        help="The model's window in tokens, as its server enforces it. Blank: the known window "
             "of a well-known model; for any other model TaskOS assumes 128 000 and warns on "
             "every page that shows the profile.")
    encoding: str = setting("", max_chars=50, help="tiktoken encoding; blank: the model's own.")
    price_input: float = setting(0.0, money=True, minimum=0, maximum=MAX_PRICE,
                                 help="Per 1M input tokens.")
    price_cached_input: float = setting(0.0, money=True, minimum=0, maximum=MAX_PRICE,
                                        help="Per 1M cached input tokens.")
    price_output: float = setting(0.0, money=True, minimum=0, maximum=MAX_PRICE,
                                  help="Per 1M output tokens.")
    summary_model: str = setting("", max_chars=200,
                                 help="Cheaper model for summaries; blank: the same.")
    num_ctx: int | None = setting(None, optional=True, minimum=WINDOW.low,
                                  maximum=WINDOW.high, unit=" tokens",
                                  help="Window to request from local servers.")
    # Model faults: the SDK's own retries are off, so these bound a bad provider.
    connect_timeout: float = setting(10.0, minimum=0.1, maximum=600, unit=" seconds",
                                     help="Seconds to open a connection to the endpoint.")
    read_timeout: float = setting(
        120.0, minimum=0.1, maximum=DAY_S, unit=" seconds",
        help="Seconds to wait for the next byte; long prompts take long to prefill.")
    call_timeout: float = setting(
        300.0, minimum=0.1, maximum=DAY_S, unit=" seconds",
        help="Seconds one whole call may take, however slowly the bytes arrive.")
    retry_budget: float = setting(
        300.0, minimum=0, maximum=DAY_S, unit=" seconds",
        help="Seconds a session may spend on failed calls and backoff waits (rate limits, "
             "timeouts, 5xx, malformed answers) before it fails.")
    # Sampling; None leaves the server's default.
    temperature: float | None = setting(
        None, optional=True, minimum=0, maximum=2,
        help="Sampling temperature; blank: the server's default. Small local models call "
             "tools more reliably at 0–0.3.")
    top_p: float | None = setting(None, optional=True, minimum=0.01, maximum=1,
                                  help="Nucleus sampling; blank: the server's default.")
    # Counting per model: the server's /tokenize (llama.cpp, llama-cpp-python), else the
    # provider/engine ratio learnt by earlier sessions (agents/counting/calibration.py).
    server_tokenizer: bool = setting(
        False, help="Count with the server's /tokenize (llama.cpp, llama-cpp-python); "
                    "otherwise calibrate from usage.")
    # llama-cpp-python's chatml-function-calling template renders a "tool" message without
    # its content: the model never sees a tool result. Sent as user messages instead.
    tool_results_as_user: bool = setting(
        False, help="Send tool results as user messages (llama-cpp-python's "
                    "chatml-function-calling format drops tool messages' text).")
    # Weak local models: a summary or probe request that repeats the agent's prefix (tool
    # calls and all) is continued like one more agent turn — SmolLM2-135M answered every
    # summary request with "functions.list_files:". With this, those requests are fresh.
    # Off for paid profiles, where the repeated prefix is billed as cached (C17).
    tool_free_summaries: bool = setting(
        False, help="Send summary and probe requests as a fresh request without tools (a "
                    "short instruction, the material as one user message). Small local models "
                    "continue a request that repeats the agent's prefix with one more tool "
                    "call; paid models bill that prefix as cached, so leave it off there.")
    # llama-cpp-python's chatml-function-calling template writes the tool schemas into
    # every system message: the leading system messages go as one, so the tools are paid once.
    single_system_message: bool = setting(
        False, help="Merge the system messages into one (a later one goes as a user message). "
                    "For llama-cpp-python's chatml-function-calling template, which writes the "
                    "tool schemas into every system message.")
    # Anthropic's prompt cache is opt-in: only prefixes a request marks are written and
    # read. OpenAI-compatible gateways to such models (OpenRouter, LiteLLM) take the marks
    # as `cache_control` on text content parts; plain OpenAI-compatible servers are never
    # sent one (some refuse content parts they do not know), so it is off by default.
    cache_marks: bool = setting(
        False, help="Mark the prefixes worth caching with cache_control (Anthropic-style "
                    "prompt caching through an OpenAI-compatible gateway such as OpenRouter "
                    "or LiteLLM). Off for OpenAI, local servers and any provider that caches "
                    "by itself.")
    token_ratio: float = setting(
        1.0, learnt=True,
        help="Provider's prompt tokens ÷ the engine's count, learnt from past calls.")
    token_ratio_calls: int = setting(0, learnt=True,
                                     help="Calls the learnt ratio is based on.")
    # E3 probe questions after each compaction (agents/compaction/probes.py).
    probe_questions: bool = setting(
        False, help="After each compaction, ask the model a few short questions (constraints, "
                    "key figures, open tasks) against the new context and grade the answers "
                    "against the archive. Costs one call per compaction: on for local models, "
                    "off for paid ones unless you want the check.")
    token_overheads: dict[str, float] = setting(
        factory=dict, learnt=True,
        help="Tokens the server adds per kind of request (tools offered, tool_choice), learnt "
             "with the ratio: provider ≈ overhead + ratio × engine count.")
    # Given for each run, never kept with the profile:
    warnings: list[str] = setting(factory=list, kept=False)  # e.g. a window that is a guess
    # How long the simulated model takes to answer each call (real models take seconds);
    # 0 answers at once, as bench and runtask want. Ignored for real models.
    sim_latency_ms: float = setting(0.0, kept=False, minimum=0, maximum=60_000)
    # Which hosts the base URL may name (TASKOS_MODEL_HOSTS; agents/provider/hosts.py), and
    # host:port endpoints it may never name (the broker's, the database's). Standalone, the
    # engine refuses only link-local and metadata addresses.
    model_hosts: tuple[str, ...] = setting(("public", "private"), kept=False)
    refused_endpoints: tuple[str, ...] = setting((), kept=False)

    def __post_init__(self) -> None:
        for spec in fields(self):
            how: Setting = spec.metadata["setting"]
            bounds = how.bounds(spec)
            value = getattr(self, spec.name)
            if bounds is not None and value is not None:
                check_number(spec.name, value, bounds)
        problem = url_shape_problem(self.base_url)
        if problem:
            raise ConfigError(problem)

    def sampling(self) -> dict[str, float]:
        """The sampling settings this profile sets, as request fields."""
        return {name: value for name in ("temperature", "top_p")
                if (value := getattr(self, name)) is not None}

    @property
    def simulated(self) -> bool:
        return not self.base_url

    @classmethod
    def resolve(cls, model: str, context_size: int | None = None, **kw: Any) -> "ModelProfile":
        """Build a profile, warning when the window of an unknown model is a guess."""
        warnings: list[str] = []
        if context_size is None:
            context_size = KNOWN_CONTEXT_SIZES.get(model)
            if context_size is None:
                context_size = 128_000
                msg = (f"Model {model!r} is unknown and no context_size was given; assuming "
                       f"128000 tokens. Set context_size on the profile to the real window.")
                log.warning(msg)
                warnings.append(msg)
        return cls(model=model, context_size=context_size, warnings=warnings, **kw)

    def cost(self, input_tokens: int, cached_tokens: int, output_tokens: int) -> float:
        fresh = max(0, input_tokens - cached_tokens)
        return (fresh * self.price_input + cached_tokens * self.price_cached_input
                + output_tokens * self.price_output) / 1_000_000

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelProfile":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
