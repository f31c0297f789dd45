"""API keys: which environment variables a profile may name, and keeping their values secret.

A model profile names the variable that holds its key (`api_key_env`); the worker sends
that variable's value to the profile's URL. Whoever can edit a profile could otherwise
name any variable (DATABASE_URL, TASKOS_SECRET_KEY …) and receive it at a URL of their
choice, so only names the operator allows are accepted: those starting with
`TASKOS_KEY_`, and those listed in `TASKOS_ALLOWED_KEY_ENVS` (comma-separated, default
`OPENAI_API_KEY`). The project's own settings variables are refused even when listed.

Every key value the engine reads is registered here; `redact()` replaces registered
values wherever text leaves the process: error messages, events, log lines, archive entries.
"""
from __future__ import annotations

import logging
import os
import re
import threading
from typing import Any

KEY_PREFIX = "TASKOS_KEY_"
ALLOWED_ENV = "TASKOS_ALLOWED_KEY_ENVS"
DEFAULT_ALLOWED = ("OPENAI_API_KEY",)
# The project's own settings: never a model key, whatever the allowlist says.
REFUSED = frozenset({
    "DATABASE_URL", "REDIS_URL", "TASKOS_SECRET_KEY", "TASKOS_ADMIN_PASSWORD",
    "DJANGO_SECRET_KEY", "SECRET_KEY", "PGPASSWORD", ALLOWED_ENV,
})
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
MASK = "[redacted]"
# Shorter values are not real keys, and masking them would mangle ordinary text.
MIN_SECRET_CHARS = 8


class KeyEnvRefused(ValueError):
    """A profile names an environment variable that may not be used as an API key."""


def allowed_key_envs(environ: dict[str, str] | None = None) -> tuple[str, ...]:
    """The variable names the operator listed in TASKOS_ALLOWED_KEY_ENVS (or the default)."""
    env = os.environ if environ is None else environ
    raw = env.get(ALLOWED_ENV)
    if raw is None:
        return DEFAULT_ALLOWED
    return tuple(n.strip() for n in raw.split(",") if n.strip())


def check_key_env(name: str, environ: dict[str, str] | None = None) -> None:
    """Raise KeyEnvRefused unless `name` may hold a model API key ("" means no key)."""
    if not name:
        return
    allowed = allowed_key_envs(environ)
    if not _NAME.match(name):
        raise KeyEnvRefused(
            f"{name!r} is not an environment variable name (letters, digits and _, "
            "not starting with a digit).")
    if name.upper() in REFUSED or (name.upper().startswith("TASKOS_")
                                   and not name.startswith(KEY_PREFIX)):
        raise KeyEnvRefused(
            f"{name} is one of TaskOS's own settings and can never be sent to a model "
            f"endpoint as an API key. Put the key in a variable named {KEY_PREFIX}<NAME>.")
    if name.startswith(KEY_PREFIX) and len(name) > len(KEY_PREFIX):
        return
    if name in allowed:
        return
    listed = ", ".join(allowed) or "none"
    raise KeyEnvRefused(
        f"{name} is not an allowed API key variable. Use a name starting with {KEY_PREFIX} "
        f"(e.g. {KEY_PREFIX}DEEPSEEK), or ask the operator to add it to {ALLOWED_ENV} "
        f"(allowed now: {listed}).")


# --- redaction
_secrets: set[str] = set()
_lock = threading.Lock()
_pattern: re.Pattern[str] | None = None


def register_secret(value: str | None) -> None:
    """Remember a key value so redact() masks it from now on, in this process."""
    global _pattern
    if not value or len(value) < MIN_SECRET_CHARS:
        return
    with _lock:
        if value in _secrets:
            return
        _secrets.add(value)
        # Longest first, so a key that contains another is masked whole.
        ordered = sorted(_secrets, key=len, reverse=True)
        _pattern = re.compile("|".join(re.escape(s) for s in ordered))


def any_registered() -> bool:
    """Whether any key value is registered, so that there is anything to redact."""
    return _pattern is not None


def redact(text: str) -> str:
    """`text` with every registered key value replaced by [redacted]."""
    pattern = _pattern
    if pattern is None or not isinstance(text, str) or not text:
        return text
    return pattern.sub(MASK, text)


def redact_value(value: Any) -> Any:
    """redact() applied to every string inside a JSON-like value (a copy when changed)."""
    if _pattern is None:
        return value
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    return value


class RedactingFilter(logging.Filter):
    """A logging filter that masks key values in the message and in the traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _pattern is None:
            return True
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a broken format string: leave it to logging
            return True
        record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


class RedactingStore:
    """A Store whose archive never receives a registered key value; all else passes through."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner.inner if isinstance(inner, RedactingStore) else inner

    @property
    def inner(self) -> Any:
        return self._inner

    def archive(self, session_id: str, turn: int, role: str, content: str, **kwargs: Any) -> str:
        if _pattern is not None:
            content = redact(content)
            if kwargs.get("tool_args"):
                kwargs["tool_args"] = redact_value(kwargs["tool_args"])
        return self._inner.archive(session_id, turn, role, content, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
