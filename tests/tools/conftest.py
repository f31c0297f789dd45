"""Fixtures for the tool layer: an in-memory Store, an event list and a temp workspace.

Nothing here touches Django or a database; no test in this folder is marked django_db.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agents.events import ListSink
from agents.scenarios import DATA_DIR
from agents.store.memory import MemoryStore
from agents.tools.base import ToolContext, ToolOutcome
from agents.tools.registry import ToolRegistry, default_registry


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def sink() -> ListSink:
    return ListSink()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    return folder


@pytest.fixture
def ctx(store, sink, workspace) -> ToolContext:
    return ToolContext(session_id="s1", store=store, workspace=workspace, events=sink, turn=4)


@pytest.fixture
def sales_ctx(ctx) -> ToolContext:
    """A context whose workspace holds the bundled scenario data (as the runner copies it)."""
    for item in DATA_DIR.iterdir():
        shutil.copy(item, ctx.workspace / item.name)
    return ctx


@pytest.fixture
def registry() -> ToolRegistry:
    return default_registry()


@pytest.fixture
def call(registry, ctx):
    """call(name, **args) -> ToolOutcome through the real registry."""
    def run(name: str, _registry: ToolRegistry | None = None, _ctx=None, **args) -> ToolOutcome:
        return (_registry or registry).run(name, json.dumps(args), _ctx or ctx)
    return run
