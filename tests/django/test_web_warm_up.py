"""The web server loads the model profiles' token encodings as it starts, beside serving:
the first session page after a start loaded one itself (~100 ms of a finished long-1000
page, the inspector counting the shown call's parts)."""
from __future__ import annotations

import threading

import pytest
from daphne.server import Server

from agents.counting import tokens
from taskos.ops import web
from taskos.runs.models import ModelProfile


@pytest.mark.django_db(transaction=True)
def test_the_warm_up_loads_each_profile_s_encoding(monkeypatch):
    ModelProfile.objects.create(name="gpt-4o profile", model="gpt-4o", encoding="o200k_base")
    ModelProfile.objects.create(name="older profile", model="gpt-4", encoding="cl100k_base")
    loaded = []
    monkeypatch.setattr(tokens, "encoding_for", lambda model, name: loaded.append((model, name)))
    # In a thread of its own, as the server runs it: it closes its own connection.
    warming = threading.Thread(target=web.warm_up)
    warming.start()
    warming.join(30)
    wanted = set(ModelProfile.objects.values_list("model", "encoding"))
    assert {("gpt-4o", "o200k_base"), ("gpt-4", "cl100k_base")} <= wanted
    assert sorted(loaded) == sorted(wanted)


def test_the_server_starts_the_warm_up_beside_serving(monkeypatch):
    started, served = threading.Event(), []
    monkeypatch.setattr(web, "warm_up", started.set)
    monkeypatch.setattr(Server, "run", lambda self: served.append(self))
    server = object.__new__(web.CompressingServer)
    server.run()
    assert served == [server] and started.wait(10)
