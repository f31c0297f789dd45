"""Context settings (feature C4) and model profiles (feature C18)."""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable

from agents.secrets import check_key_env

log = logging.getLogger(__name__)


class ConfigError(ValueError):
    """A setting a person gave is out of range; the message says which and why."""


MAX_INPUT_CHARS = 100_000  # longest goal or message (the dashboard's TASKOS_MAX_INPUT_CHARS)


def input_too_long(text: str, what: str, limit: int = MAX_INPUT_CHARS) -> str | None:
    """Why `text` is refused as longer than `limit` characters, or None when it fits."""
    if len(text or "") <= limit:
        return None
    return (f"the {what} is too long: {len(text):,} characters, at most {limit:,}; it was "
            "not used. Put long material in a workspace file and refer to it instead.")


@dataclass
class ContextConfig:
    """AgentScope's ContextConfig fields and defaults, plus TaskOS's zone knobs."""

    trigger_ratio: float = 0.8
    reserve_ratio: float = 0.1
    context_buffer_ratio: float = 0.2
    tool_result_limit: int = 50_000  # tokens of one tool result allowed into the context
    compression_fallback_to_truncation: bool = True
    compression_tool_enabled: bool = False
    delegation_enabled: bool = False  # offer the delegate tool (sub-agents, feature T6)
    max_image_num: int = 5
    max_rounds: int = 5  # rolling-window trigger: more rounds than this kept → compact
    timezone: str = "UTC"
    time_interval_hours: float = 0.5
    tool_retries_limit: int = 3
    max_turns: int = 400
    tools: list[str] = field(default_factory=list)  # tools offered; empty: all (or the scenario's)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if not 0 < self.trigger_ratio <= 0.9:
            raise ConfigError(
                f"trigger_ratio must be greater than 0 and at most 0.9 (got {self.trigger_ratio}): "
                "at 1.0 compaction would start only once the window is already full, "
                "leaving no room for the summary request or the answer.")
        if not 0 <= self.reserve_ratio < 0.5:
            raise ConfigError(f"reserve_ratio must be in [0, 0.5) (got {self.reserve_ratio}).")
        if not 0 <= self.context_buffer_ratio < 1:
            raise ConfigError(
                f"context_buffer_ratio must be in [0, 1) (got {self.context_buffer_ratio}).")
        if self.tool_result_limit < 100:
            raise ConfigError(
                f"tool_result_limit must be at least 100 tokens (got {self.tool_result_limit}).")
        if self.max_rounds < 1:
            raise ConfigError(f"max_rounds must be at least 1 (got {self.max_rounds}).")
        if self.max_image_num < 0:
            raise ConfigError(f"max_image_num must be 0 or more (got {self.max_image_num}).")
        if self.tool_retries_limit < 1:
            raise ConfigError(
                f"tool_retries_limit must be at least 1 (got {self.tool_retries_limit}).")
        if self.max_turns < 1:
            raise ConfigError(f"max_turns must be at least 1 (got {self.max_turns}).")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "ContextConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (data or {}).items() if k in known})


# Known windows; an unknown model without an explicit context_size gets a warning (C18).
KNOWN_CONTEXT_SIZES = {
    "gpt-4o": 128_000, "gpt-4o-mini": 128_000, "gpt-4.1": 1_047_576, "gpt-4.1-mini": 1_047_576,
    "deepseek-chat": 65_536, "qwen-plus": 131_072, "qwen-max": 32_768,
}


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
    minimum: float | None = None  # numbers: the range a person may set
    maximum: float | None = None
    money: bool = False  # a price per 1M tokens, kept to 4 decimals
    learnt: bool = False  # written by the sessions, not by people
    check: Callable[[Any], None] | None = None  # raises ValueError saying what is wrong


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
             "built-in simulated model.")
    # The key is read from this variable, never stored.
    api_key_env: str = setting(
        "OPENAI_API_KEY", max_chars=100, check=check_key_env,
        help="Name of the environment variable holding the API key (blank: no key, for local "
             "servers). Allowed: names starting with TASKOS_KEY_ and those the operator lists "
             "in TASKOS_ALLOWED_KEY_ENVS.")
    context_size: int = setting(
        128_000, optional=True,
        help="The model's window in tokens, as its server enforces it. Blank: the known window "
             "of a well-known model; for any other model TaskOS assumes 128 000 and warns on "
             "every page that shows the profile.")
    encoding: str = setting("", max_chars=50, help="tiktoken encoding; blank: the model's own.")
    price_input: float = setting(0.0, money=True, help="Per 1M input tokens.")
    price_cached_input: float = setting(0.0, money=True, help="Per 1M cached input tokens.")
    price_output: float = setting(0.0, money=True, help="Per 1M output tokens.")
    summary_model: str = setting("", max_chars=200,
                                 help="Cheaper model for summaries; blank: the same.")
    num_ctx: int | None = setting(None, optional=True,
                                  help="Window to request from local servers.")
    # Model faults: the SDK's own retries are off, so these bound a bad provider.
    connect_timeout: float = setting(10.0, minimum=0.1,
                                     help="Seconds to open a connection to the endpoint.")
    read_timeout: float = setting(
        120.0, minimum=0.1,
        help="Seconds to wait for the next byte; long prompts take long to prefill.")
    call_timeout: float = setting(
        300.0, minimum=0.1,
        help="Seconds one whole call may take, however slowly the bytes arrive.")
    retry_budget: float = setting(
        300.0, minimum=0,
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
    sim_latency_ms: float = setting(0.0, kept=False)

    def __post_init__(self) -> None:
        for name in ("connect_timeout", "read_timeout", "call_timeout"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be more than 0 seconds "
                                  f"(got {getattr(self, name)}).")
        if self.retry_budget < 0:
            raise ConfigError(f"retry_budget must be 0 or more seconds (got {self.retry_budget}).")
        if self.temperature is not None and not 0 <= self.temperature <= 2:
            raise ConfigError(f"temperature must be between 0 and 2 (got {self.temperature}).")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be more than 0 and at most 1 (got {self.top_p}).")

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
