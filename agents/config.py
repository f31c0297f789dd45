"""Context settings (SPEC C4) and model profiles (SPEC C18)."""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field, fields
from typing import Any

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
    delegation_enabled: bool = False  # offer the delegate tool (sub-agents, SPEC T6)
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


@dataclass
class ModelProfile:
    """Where a model lives, how big its window is and what it costs."""

    name: str = "sim"
    model: str = "taskos-sim"
    base_url: str = ""  # empty for the simulated model
    api_key_env: str = "OPENAI_API_KEY"  # the key is read from this variable, never stored
    context_size: int = 128_000
    encoding: str = ""  # tiktoken encoding; empty: the model's own, else cl100k
    price_input: float = 0.0  # per 1M tokens
    price_cached_input: float = 0.0
    price_output: float = 0.0
    summary_model: str = ""  # cheaper model for summaries; empty: the same model
    num_ctx: int | None = None  # local servers (Ollama) that need their window set
    warnings: list[str] = field(default_factory=list)
    # Model faults: the SDK's own retries are off, so these bound everything (issue 9).
    connect_timeout: float = 10.0  # seconds to open the connection
    read_timeout: float = 120.0  # seconds without a byte from the server (prefill is slow)
    call_timeout: float = 300.0  # seconds for one whole call, however the bytes trickle
    retry_budget: float = 300.0  # seconds a session may spend on failed calls and waits
    # Sampling; None leaves the server's default (weak local models want 0–0.3).
    temperature: float | None = None
    top_p: float | None = None
    # Counting (issue 11): the provider/engine token ratio learnt by earlier sessions, and
    # whether to count with the server's /tokenize (llama.cpp, llama-cpp-python).
    token_ratio: float = 1.0  # the slope of agents.counting.calibration's fit
    token_ratio_calls: int = 0
    token_overheads: dict[str, float] = field(default_factory=dict)  # per request kind
    server_tokenizer: bool = False
    # E3 probe questions after each compaction (agents.compaction.probes): one call each, so off
    # unless the profile asks (the local profile does).
    probe_questions: bool = False
    # llama-cpp-python's chatml-function-calling template renders a "tool" message without
    # its content: the model never sees a tool result. Sent as user messages instead.
    tool_results_as_user: bool = False
    # Weak local models: a summary or probe request that repeats the agent's prefix (tool
    # calls and all) is continued like one more agent turn — SmolLM2-135M answered every
    # summary request with "functions.list_files:". With this, those requests are fresh:
    # a short instruction and the material as one user message, no tools. Off for paid
    # profiles, where the repeated prefix is billed as cached (C17).
    tool_free_summaries: bool = False
    # llama-cpp-python's chatml-function-calling template writes the tool schemas into
    # every system message: with this, the leading system messages go as one and a later
    # one (the truncation marker) as a user message, so the tools are paid once.
    single_system_message: bool = False
    # How long the simulated model takes to answer each call (real models take seconds);
    # 0 answers at once, as bench and runtask want. Ignored for real models.
    sim_latency_ms: float = 0.0

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
