"""Model profiles (SPEC W1, C18): which model a session talks to, how, and at what price."""
from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

import agents
from agents import KeyEnvRefused, check_key_env


def validate_key_env(name: str) -> None:
    """Refuse a variable the operator has not allowed as an API key (agents.secrets)."""
    try:
        check_key_env(name)
    except KeyEnvRefused as exc:
        raise ValidationError(str(exc)) from None


ASSUMED_WINDOW = 128_000  # an unknown model without a context size: said, never silent


class ModelProfile(models.Model):
    """Where a model lives, its window and prices; the API key itself is never stored."""

    name = models.CharField(max_length=80, unique=True)
    model = models.CharField(max_length=200, help_text="Model name sent to the API.")
    base_url = models.CharField(
        max_length=500, blank=True,
        help_text="OpenAI-compatible endpoint, e.g. https://api.openai.com/v1. "
                  "Leave blank for the built-in simulated model.")
    api_key_env = models.CharField(
        max_length=100, default="OPENAI_API_KEY", blank=True,
        validators=[validate_key_env],
        help_text="Name of the environment variable holding the API key (blank: no key, for "
                  "local servers). Allowed: names starting with TASKOS_KEY_ and those the "
                  "operator lists in TASKOS_ALLOWED_KEY_ENVS.")
    context_size = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="The model's window in tokens, as its server enforces it. Blank: the "
                  "known window of a well-known model; for any other model TaskOS assumes "
                  "128 000 and warns on every page that shows the profile (SPEC C18).")
    encoding = models.CharField(max_length=50, blank=True,
                                help_text="tiktoken encoding; blank: the model's own.")
    price_input = models.DecimalField(max_digits=12, decimal_places=4, default=0,
                                      help_text="Per 1M input tokens.")
    price_cached_input = models.DecimalField(max_digits=12, decimal_places=4, default=0,
                                             help_text="Per 1M cached input tokens.")
    price_output = models.DecimalField(max_digits=12, decimal_places=4, default=0,
                                       help_text="Per 1M output tokens.")
    summary_model = models.CharField(max_length=200, blank=True,
                                     help_text="Cheaper model for summaries; blank: the same.")
    num_ctx = models.PositiveIntegerField(null=True, blank=True,
                                          help_text="Window to request from local servers.")
    # Model faults (issue 9): the loop retries, never the SDK, so these bound a bad provider.
    connect_timeout = models.FloatField(
        default=10.0, validators=[MinValueValidator(0.1)],
        help_text="Seconds to open a connection to the endpoint.")
    read_timeout = models.FloatField(
        default=120.0, validators=[MinValueValidator(0.1)],
        help_text="Seconds to wait for the next byte; long prompts take long to prefill.")
    call_timeout = models.FloatField(
        default=300.0, validators=[MinValueValidator(0.1)],
        help_text="Seconds one whole call may take, however slowly the bytes arrive.")
    retry_budget = models.FloatField(
        default=300.0, validators=[MinValueValidator(0)],
        help_text="Seconds a session may spend on failed calls and backoff waits "
                  "(rate limits, timeouts, 5xx, malformed answers) before it fails.")

    # Sampling and counting per model (issue 11).
    temperature = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0), MaxValueValidator(2)],
        help_text="Sampling temperature; blank: the server's default. Small local models "
                  "call tools more reliably at 0–0.3.")
    top_p = models.FloatField(null=True, blank=True,
                              validators=[MinValueValidator(0.01), MaxValueValidator(1)],
                              help_text="Nucleus sampling; blank: the server's default.")
    server_tokenizer = models.BooleanField(
        default=False, help_text="Count with the server's /tokenize (llama.cpp, "
                                 "llama-cpp-python); otherwise calibrate from usage.")
    tool_results_as_user = models.BooleanField(
        default=False, help_text="Send tool results as user messages (llama-cpp-python's "
                                 "chatml-function-calling format drops tool messages' text).")
    tool_free_summaries = models.BooleanField(
        default=False, help_text="Send summary and probe requests as a fresh request without "
                                 "tools (a short instruction, the material as one user "
                                 "message). Small local models continue a request that "
                                 "repeats the agent's prefix with one more tool call; paid "
                                 "models bill that prefix as cached, so leave it off there.")
    single_system_message = models.BooleanField(
        default=False, help_text="Merge the system messages into one (a later one goes as a "
                                 "user message). For llama-cpp-python's chatml-function-"
                                 "calling template, which writes the tool schemas into every "
                                 "system message.")
    token_ratio = models.FloatField(
        default=1.0, editable=False,
        help_text="Provider's prompt tokens ÷ the engine's count, learnt from past calls.")
    token_ratio_calls = models.PositiveIntegerField(
        default=0, editable=False, help_text="Calls the learnt ratio is based on.")
    probe_questions = models.BooleanField(
        default=False, help_text="After each compaction, ask the model a few short questions "
                                 "(constraints, key figures, open tasks) against the new "
                                 "context and grade the answers against the archive. Costs "
                                 "one call per compaction: on for local models, off for paid "
                                 "ones unless you want the check.")
    token_overheads = models.JSONField(
        default=dict, blank=True, editable=False,
        help_text="Tokens the server adds per kind of request (tools offered, tool_choice), "
                  "learnt with the ratio: provider ≈ overhead + ratio × engine count.")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({'simulated' if self.simulated else self.model})"

    def learn_token_ratio(self, report: dict) -> None:
        """Keep the ratio a session learnt, so the next one starts calibrated."""
        calls = report.get("token_ratio_calls")
        ratio = report.get("token_ratio")
        if self.simulated or not isinstance(calls, int) or not isinstance(ratio, (int, float)):
            return
        # Compared in the database: a parallel session may have learnt from more calls.
        overheads = report.get("token_overheads")
        ModelProfile.objects.filter(pk=self.pk, token_ratio_calls__lt=calls).update(
            token_ratio=ratio, token_ratio_calls=calls,
            token_overheads=overheads if isinstance(overheads, dict) else {})

    @property
    def simulated(self) -> bool:
        return not self.base_url

    @property
    def effective_window(self) -> int:
        """The window sessions use: the one set, the known one, else the assumed 128k."""
        if self.context_size:
            return self.context_size
        return agents.KNOWN_CONTEXT_SIZES.get(self.model, ASSUMED_WINDOW)

    @property
    def window_warning(self) -> str:
        """Why the window is a guess (SPEC C18), or "" when it is not."""
        if self.context_size or self.simulated or self.model in agents.KNOWN_CONTEXT_SIZES:
            return ""
        return (f"Model {self.model!r} is unknown and profile {self.name!r} sets no context "
                f"size: TaskOS assumes {ASSUMED_WINDOW:,} tokens. Set the real window on the "
                "profile, or requests may go over it.")

    def to_engine(self, context_size: int | None = None) -> agents.ModelProfile:
        """The engine's view of this profile, optionally with a smaller window."""
        return agents.ModelProfile(
            name=self.name, model=self.model, base_url=self.base_url,
            api_key_env=self.api_key_env, context_size=context_size or self.effective_window,
            warnings=[self.window_warning] if self.window_warning else [],
            encoding=self.encoding, price_input=float(self.price_input),
            price_cached_input=float(self.price_cached_input),
            price_output=float(self.price_output), summary_model=self.summary_model,
            num_ctx=self.num_ctx, temperature=self.temperature, top_p=self.top_p,
            server_tokenizer=self.server_tokenizer, token_ratio=self.token_ratio,
            tool_results_as_user=self.tool_results_as_user,
            tool_free_summaries=self.tool_free_summaries,
            single_system_message=self.single_system_message,
            token_ratio_calls=self.token_ratio_calls, probe_questions=self.probe_questions,
            token_overheads=dict(self.token_overheads or {}),
            sim_latency_ms=settings.TASKOS_SIM_LATENCY_MS if self.simulated else 0.0,
            **self.fault_limits())

    def fault_limits(self) -> dict[str, float]:
        """The timeouts and retry budget, for the engine's profile."""
        return {"connect_timeout": self.connect_timeout, "read_timeout": self.read_timeout,
                "call_timeout": self.call_timeout, "retry_budget": self.retry_budget}
