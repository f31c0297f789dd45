"""Model profiles (features W1, C18): which model a session talks to, how, and at what price."""
from __future__ import annotations

import dataclasses
from typing import Any

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


def column(spec: dataclasses.Field, how: agents.Setting) -> models.Field:
    """The column (and admin form field) of one of the engine's profile fields."""
    options: dict[str, Any] = {"help_text": how.help} if how.help else {}
    if how.optional:
        options.update(null=True, blank=True)
    elif not how.required:
        default = spec.default_factory if spec.default_factory is not dataclasses.MISSING \
            else spec.default
        options["default"] = default
    if how.learnt:
        options["editable"] = False
    validators = []
    if how.minimum is not None:
        validators.append(MinValueValidator(how.minimum))
    if how.maximum is not None:
        validators.append(MaxValueValidator(how.maximum))
    if how.check is not None:
        validators.append(validate_key_env)
    if validators:
        options["validators"] = validators
    kind = spec.type
    if kind == "str":
        options.update(max_length=how.max_chars, unique=how.unique)
        if not how.required:
            options["blank"] = True
        if options.get("default") == "":
            del options["default"]  # a blank text column needs none
        return models.CharField(**options)
    if how.money:
        return models.DecimalField(max_digits=12, decimal_places=4, **options)
    if kind == "bool":
        return models.BooleanField(**options)
    if kind.startswith("int"):
        return models.PositiveIntegerField(**options)
    if kind.startswith("float"):
        return models.FloatField(**options)
    if kind.startswith("dict"):
        return models.JSONField(blank=True, **options)
    raise TypeError(f"no column for profile field {spec.name}: {kind}")


class ModelProfile(models.Model):
    """Where a model lives, its window and prices; the API key itself is never stored.

    Its columns are the engine's profile fields (agents.ModelProfile, each with its
    Setting), added below the class: a field is defined once, in the engine."""

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
        """Why the window is a guess (feature C18), or "" when it is not."""
        if self.context_size or self.simulated or self.model in agents.KNOWN_CONTEXT_SIZES:
            return ""
        return (f"Model {self.model!r} is unknown and profile {self.name!r} sets no context "
                f"size: TaskOS assumes {ASSUMED_WINDOW:,} tokens. Set the real window on the "
                "profile, or requests may go over it.")

    def to_engine(self, context_size: int | None = None) -> agents.ModelProfile:
        """The engine's view of this profile, optionally with a smaller window."""
        kept = {spec.name: getattr(self, spec.name) for spec, _ in agents.profile_settings()}
        kept.update({spec.name: float(kept[spec.name]) for spec, how in agents.profile_settings()
                     if how.money})
        kept.update(context_size=context_size or self.effective_window,
                    token_overheads=dict(self.token_overheads or {}))
        return agents.ModelProfile(
            **kept, warnings=[self.window_warning] if self.window_warning else [],
            sim_latency_ms=settings.TASKOS_SIM_LATENCY_MS if self.simulated else 0.0)


for _spec, _how in agents.profile_settings():
    ModelProfile.add_to_class(_spec.name, column(_spec, _how))
