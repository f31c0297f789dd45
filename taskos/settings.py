"""TaskOS settings: one file, every deployment difference comes from the environment.

DATABASE_URL          database (default: SQLite file var/taskos.sqlite3)
REDIS_URL             Celery broker, result backend and Channels layer
                      (default: the private Redis `taskos` starts on port 6390)
TASKOS_SECRET_KEY     secret key (default: a random key kept in var/secret_key)
TASKOS_DEBUG          1/true to enable Django's debug pages (default off)
TASKOS_ALLOWED_HOSTS  comma-separated host names (default 127.0.0.1,localhost)
TASKOS_WORKSPACES     folder holding one sandbox folder per session (default var/workspaces)
TASKOS_TIMEZONE       time zone of the dashboard (default UTC)
TASKOS_SERVE_STATIC   serve /static/ from daphne itself (default on; turn off behind a proxy)
TASKOS_ALLOWED_KEY_ENVS  variables a model profile may name as api_key_env besides TASKOS_KEY_*
                      (default OPENAI_API_KEY; read by agents/secrets.py)
TASKOS_MAX_INPUT_CHARS   longest goal or message in characters (default 100000)
TASKOS_MAX_DELEGATION_DEPTH / TASKOS_MAX_CHILDREN  sub-agent nesting and count (2 / 8)
TASKOS_ASK_FIRST         comma-separated tool names whose every call waits for a person's
                      approval in the drawer, in every session (default none; feature T11)
TASKOS_ASK_FIRST_WRITES  1/true: every session asks before write_file and any tool marked
                      destructive (it deletes or overwrites) (default off)
TASKOS_APPROVAL_TIMEOUT_S  seconds after which an undecided call is denied, the model told
                      why (default none: it waits for a person)
TASKOS_SIM_LATENCY_MS    how long the simulated model takes per answer (default 0; the
                      `taskos` run command sets 200 so a run can be watched; at most 60000)
TASKOS_MODEL_HOSTS    comma-separated hosts a model profile's base URL may name: `public`,
                      `private`, `local` (loopback and private addresses for profiles marked
                      local), host names, addresses, networks (default public,local; read by
                      agents/provider/hosts.py)
TASKOS_PRICE_TABLE    the benchmark's price table at which the session header and the compare
                      view show what an unpriced (simulated) run would have cost:
                      openai-like, anthropic-like or deepseek-like (default openai-like)
TASKOS_DRAWER_REFRESH_S  while events stream in, a page's drawer is sent what changed at
                      most once per this many seconds (default 2; 0.05 to 60)
TASKOS_UPLOAD_MAX_FILE_MB / TASKOS_UPLOAD_MAX_SESSION_MB / TASKOS_UPLOAD_MAX_FILES /
TASKOS_UPLOAD_MAX_ZIP_RATIO  what a person may bring into one workspace: one file, all
                      files, their number, a zip member's expansion (20 / 200 / 500 / 100)
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"
VAR_DIR.mkdir(exist_ok=True)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use 1/0, true/false, yes/no.")


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def local_secret_key() -> str:
    """A random key created once per checkout, so the embedded default is not a known string."""
    path = VAR_DIR / "secret_key"
    if not path.exists():
        # Write a complete file, then link it into place: linking fails if another process
        # (web and worker starting together) got there first, and then its key wins.
        tmp = VAR_DIR / f".secret_key.{os.getpid()}"
        tmp.write_text(secrets.token_urlsafe(50))
        tmp.chmod(0o600)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    return path.read_text().strip()


SECRET_KEY = os.environ.get("TASKOS_SECRET_KEY") or local_secret_key()
DEBUG = env_bool("TASKOS_DEBUG", False)
ALLOWED_HOSTS = env_list("TASKOS_ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = env_list("TASKOS_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    # TaskOS, bottom to top: an app imports only from those listed before it (taskos.store
    # sits between runs and drawer, taskos.replays after it; they have no AppConfig).
    "taskos.runs",
    "taskos.drawer",
    "taskos.live",
    "taskos.worker",
    "taskos.web",
    "taskos.ops",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Pages and fragments gzip-compressed (a finished 1000-turn session page: ~290 KB of
    # HTML). BREACH needs a secret that stays the same across responses next to text an
    # attacker controls: Django masks the CSRF token afresh in every response, and this
    # middleware adds up to 100 random bytes to each compressed body (Heal The Breach), so
    # response lengths leak nothing stable. Above the others: it compresses what they made.
    "django.middleware.gzip.GZipMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "taskos.urls"
ASGI_APPLICATION = "taskos.asgi.application"
WSGI_APPLICATION = "taskos.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- database: SQLite by default; PostgreSQL (or anything dj-database-url reads) via DATABASE_URL
DATABASE_URL = os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'taskos.sqlite3'}"
try:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
except ValueError as exc:
    raise ImproperlyConfigured(f"DATABASE_URL={DATABASE_URL!r} cannot be used: {exc}") from exc
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The worker and the web process write concurrently: WAL lets readers run during a
    # write, IMMEDIATE takes the write lock up front (no upgrade deadlock), and the timeout
    # waits for the other writer instead of failing with "database is locked".
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: broker, result backend and channel layer
REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6390/0"



def channel_layer(url: str) -> dict:
    """The Redis channel layer. An idle consumer blocks in BZPOPMIN for up to 5 s
    (channels_redis' brpop_timeout); redis-py's own default socket timeout is also 5 s, so
    every idle websocket died with "Timeout reading". The read timeout must clear the
    blocking read with room to spare."""
    return {"BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": url, "socket_connect_timeout": 3,
                                  "socket_timeout": 30, "socket_keepalive": True,
                                  "health_check_interval": 15}]}}


CHANNEL_LAYERS = {"default": channel_layer(REDIS_URL)}

CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_TASK_ACKS_LATE = True  # a worker killed mid-task leaves the message to be redelivered
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1  # one long session per worker process at a time
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# With acks_late, Redis hands an unacknowledged message to another worker after the
# visibility timeout (one hour by default): a session running longer was run twice at once.
# The lease (taskos/worker/lease.py) makes a second delivery exit; the long timeout keeps
# them rare, and the sweeper (taskos/worker/sweeper.py) re-queues a dead worker's session
# within a minute.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 12 * 3600}
CELERY_RESULT_EXPIRES = 24 * 3600

# --- auth
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# --- i18n and time
LANGUAGE_CODE = "en-us"
TIME_ZONE = os.environ.get("TASKOS_TIMEZONE", "UTC")
USE_I18N = True
USE_TZ = True

# --- static files (htmx and the drawer's CSS/JS are vendored under static/)
STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
TASKOS_SERVE_STATIC = env_bool("TASKOS_SERVE_STATIC", True)

# --- TaskOS
TASKOS_WORKSPACES = Path(os.environ.get("TASKOS_WORKSPACES") or VAR_DIR / "workspaces")
# One executor per session: lease length (renewed every quarter of it while a session runs),
# how often each worker sweeps for orphaned sessions (0: never), and how long a sent
# message may wait in the queue before the sweeper sends another.
TASKOS_LEASE_SECONDS = float(os.environ.get("TASKOS_LEASE_SECONDS", 60))
TASKOS_SWEEP_SECONDS = float(os.environ.get("TASKOS_SWEEP_SECONDS", 30))
TASKOS_REQUEUE_AFTER_SECONDS = float(os.environ.get("TASKOS_REQUEUE_AFTER_SECONDS", 300))

# Longest goal or follow-up message a person may send, in characters (refused, never stored).
TASKOS_MAX_INPUT_CHARS = int(os.environ.get("TASKOS_MAX_INPUT_CHARS", 100_000))
# Sub-agents (feature T6): how deep delegate calls may nest, and how many children one
# session may start over its life.
TASKOS_MAX_DELEGATION_DEPTH = int(os.environ.get("TASKOS_MAX_DELEGATION_DEPTH", 2))
TASKOS_MAX_CHILDREN = int(os.environ.get("TASKOS_MAX_CHILDREN", 8))
# Ask before a tool acts (feature T11, taskos/runs/approvals.py).
TASKOS_ASK_FIRST = [name.strip() for name in os.environ.get("TASKOS_ASK_FIRST", "").split(",")
                    if name.strip()]
TASKOS_ASK_FIRST_WRITES = os.environ.get("TASKOS_ASK_FIRST_WRITES", "").lower() in (
    "1", "true", "yes", "on")
TASKOS_APPROVAL_TIMEOUT_S = float(os.environ["TASKOS_APPROVAL_TIMEOUT_S"]) \
    if os.environ.get("TASKOS_APPROVAL_TIMEOUT_S") else None
# What an unpriced run would have cost is shown at this one of the benchmark's price
# tables (taskos/runs/prices.py checks the name and says which ones exist).
TASKOS_PRICE_TABLE = os.environ.get("TASKOS_PRICE_TABLE", "openai-like").strip()
# The simulated model answers in well under a millisecond, so a whole demo run is over
# before the drawer's first refresh; a real model takes seconds a call.
TASKOS_SIM_LATENCY_MS = min(60_000.0, max(0.0, float(os.environ.get("TASKOS_SIM_LATENCY_MS", 0))))
# A fast run stores several events a second. Each refresh of a page re-renders the panels
# whose state changed (budget, cost, inspector, anchors) and sends what differs: at 4 a
# second that was ~4 MB of a 1000-turn run's 5.8 MB, faster than anyone reads; at 1 a
# second 2.05 MB, at 2 s 1.82 MB (drawer_bench, quiet machine). The first event after a
# quiet interval is sent at once, so a real model's call (seconds apart) shows when it
# lands; only a burst of a fast run waits, at most this long.
TASKOS_DRAWER_REFRESH_S = min(60.0, max(0.05, float(os.environ.get("TASKOS_DRAWER_REFRESH_S", 2))))
# Hosts a model profile's base URL may name (issue 25 item 9): public addresses for every
# profile, loopback and private ones for profiles marked local; link-local and metadata
# addresses only when listed, the broker's and the database's port never.
TASKOS_MODEL_HOSTS = env_list("TASKOS_MODEL_HOSTS", "public,local")

# The person's files (feature T9), checked before anything is stored: one file, everything
# one person brings into one workspace, how many files, and how many times a zip member may
# expand (more looks like a zip bomb). Django's own cap on files per request sits above
# ours, so the form, not a bare 400, says when there are too many.
TASKOS_UPLOAD_MAX_FILE_BYTES = int(float(os.environ.get("TASKOS_UPLOAD_MAX_FILE_MB", 20)) * 2**20)
TASKOS_UPLOAD_MAX_SESSION_BYTES = int(float(os.environ.get("TASKOS_UPLOAD_MAX_SESSION_MB", 200))
                                      * 2**20)
TASKOS_UPLOAD_MAX_FILES = int(os.environ.get("TASKOS_UPLOAD_MAX_FILES", 500))
TASKOS_UPLOAD_MAX_ZIP_RATIO = int(os.environ.get("TASKOS_UPLOAD_MAX_ZIP_RATIO", 100))
DATA_UPLOAD_MAX_NUMBER_FILES = TASKOS_UPLOAD_MAX_FILES * 4

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    # API key values the engine read are masked in every line and traceback.
    "filters": {"redact_keys": {"()": "agents.RedactingFilter"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain",
                            "filters": ["redact_keys"]}},
    "loggers": {
        "taskos": {"handlers": ["stderr"], "level": os.environ.get("TASKOS_LOG_LEVEL", "INFO"),
                   "propagate": False},
    },
}
