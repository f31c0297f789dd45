"""Fixtures for the dashboard, drawer and consumer tests."""
from __future__ import annotations

import os

import pytest
from channels.layers import channel_layers, get_channel_layer

from .factories import make_session

TEST_REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/3")


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    """Tests create users by the dozen; the production hasher would dominate the run."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def ann(django_user_model):
    return django_user_model.objects.create_user("ann", password="ann-secret-42")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="bob-secret-42")


@pytest.fixture
def ann_client(client, ann):
    client.force_login(ann)
    return client


@pytest.fixture
def session(ann):
    return make_session(ann)


@pytest.fixture
def redis_layer(settings):
    """The Redis channel layer on the test Redis, rebuilt so no earlier layer leaks in."""
    settings.CHANNEL_LAYERS = {"default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [TEST_REDIS_URL], "prefix": f"taskos-test-{os.getpid()}"}}}
    channel_layers.backends.clear()
    yield get_channel_layer()
    channel_layers.backends.clear()
