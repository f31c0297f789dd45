"""Point the chaos driver's own process at the run's Redis and describe its database.

The driver sends the sessions' messages, runs the uninterrupted baseline in-process and
reads the results, so it must use the same Redis as the workers it starts (the test suite's
settings point elsewhere) and hand them a DATABASE_URL for the very database it uses.
"""
from __future__ import annotations

from contextlib import contextmanager
from urllib.parse import quote

from django.db import connection
from django.test import override_settings

from taskos.celery import app
from taskos.settings import channel_layer


def _forget_broker_connections() -> None:
    """Drop the Celery app's connection and producer pools (as Celery does after a fork)."""
    app._pool = None
    app.amqp._producer_pool = None


@contextmanager
def using_redis(url: str, lease_s: float):
    saved = (app.conf.broker_url, app.conf.result_backend)
    app.conf.broker_url = app.conf.result_backend = url
    _forget_broker_connections()
    try:
        with override_settings(REDIS_URL=url, CELERY_BROKER_URL=url, CELERY_RESULT_BACKEND=url,
                               CHANNEL_LAYERS={"default": channel_layer(url)},
                               TASKOS_LEASE_SECONDS=lease_s):
            yield
    finally:
        app.conf.broker_url, app.conf.result_backend = saved
        _forget_broker_connections()  # the next user must not send to this run's Redis


def database_url() -> str:
    """A DATABASE_URL for the database this process is connected to (the test database
    under pytest). An in-memory SQLite database cannot be shared: ValueError."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        name = str(db["NAME"])
        if name == ":memory:" or "mode=memory" in name:
            raise ValueError("an in-memory SQLite database cannot be shared with workers")
        return f"sqlite:///{name}"
    if not db["ENGINE"].endswith("postgresql"):
        raise ValueError(f"unsupported database engine {db['ENGINE']}")
    user = quote(db.get("USER") or "", safe="")
    password = f":{quote(db['PASSWORD'], safe='')}" if db.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{auth}{db.get('HOST') or '127.0.0.1'}{port}/{db['NAME']}"
