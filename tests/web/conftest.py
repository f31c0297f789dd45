"""Fixtures for the dashboard, drawer and consumer tests."""
from __future__ import annotations

import pytest
from channels.layers import channel_layers, get_channel_layer


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
def session(ann, make_session):
    return make_session(owner=ann, goal="Analyse regional sales", status="running",
                        context_settings={"trigger_ratio": 0.8})


@pytest.fixture
def redis_layer(channels_redis_url):
    """The Redis channel layer on the test Redis, rebuilt so no earlier layer leaks in."""
    channel_layers.backends.clear()
    yield get_channel_layer()
    channel_layers.backends.clear()
