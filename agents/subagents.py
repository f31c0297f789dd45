"""Run a session and its sub-agents headless, in this process, one after another (T6).

The same protocol as the Celery side, without a queue: the parent runs until it waits,
each queued child runs to its end (its own children first, recursively), its outcome is
recorded, and the parent runs again from its saved state to receive the answers. Works
with any store that can also record an outcome (`MemoryStore.set_outcome`).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

from agents.config import ContextConfig, ModelProfile
from agents.events import EventSink
from agents.loop.spec import SessionSpec
from agents.runner import SessionRun, run_session


def child_settings(request: dict[str, Any], profile: ModelProfile, config: ContextConfig,
                   profiles: Callable[[str], ModelProfile] | None = None
                   ) -> tuple[ModelProfile, ContextConfig]:
    """The child's profile (the parent's unless the request names another) with its own
    window, and the parent's context settings with the child's turn limit."""
    if request.get("profile") and request["profile"] != profile.name:
        if profiles is None:
            raise LookupError(f"no profile {request['profile']!r} can be looked up here")
        profile = profiles(request["profile"])
    window = min(int(request.get("window") or profile.context_size), profile.context_size)
    return (dataclasses.replace(profile, context_size=window),
            dataclasses.replace(config, max_turns=int(request.get("max_turns") or
                                                      config.max_turns)))


def run_tree(spec: SessionSpec, *, session_id: str, store: Any,
             events_for: Callable[[str], EventSink], workspace: Path,
             profiles: Callable[[str], ModelProfile] | None = None,
             **options: Any) -> SessionRun:
    """Run `session_id` to its end, running every child it delegates to in between."""
    def once() -> SessionRun:
        return run_session(spec, session_id=session_id, store=store,
                           events=events_for(session_id), workspace=workspace, **options)

    run = once()
    while run.status == "waiting":
        queued = [c for c in store.list_children(session_id) if c.status == "queued"]
        if not queued:  # nothing left to run here, yet still waiting: a store bug, say so
            raise RuntimeError(f"session {session_id} waits for children that never ran")
        for child in queued:
            request = store.child_request(child.id)
            try:
                child_profile, child_config = child_settings(request, spec.profile, spec.config,
                                                             profiles)
            except LookupError as exc:
                store.set_outcome(child.id, "failed", error=str(exc))
                continue
            child_spec = spec.for_child(goal=request["goal"],
                                        scenario=request.get("scenario") or None,
                                        profile=child_profile, config=child_config)
            done = run_tree(child_spec, session_id=child.id, store=store, events_for=events_for,
                            workspace=workspace / f"child-{child.id}", profiles=profiles,
                            **options)
            store.set_outcome(child.id, done.status, final_answer=done.final_answer,
                              error=done.result.error, report=done.report)
        run = once()
    return run
