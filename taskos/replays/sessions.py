"""Replays of recorded sessions (feature E2): create one, and give the worker its engine.

A replay is a session of its own (its own events, archive and drawer) whose `replay_of`
names the recorded session. The engine plays that session's recorded decisions under the
replay's settings and profile; summaries go to the replay profile's model.
"""
from __future__ import annotations

from dataclasses import fields
from typing import Any, Callable

from agents import (ContextConfig, EventType, ModelCall, Recording, RecordingError,
                    build_recording, replay_runner)
from taskos.runs.models import ModelProfile, Session, SessionEvent
from taskos.runs.services import SessionError, checked_config, checked_window
from taskos.store.django_store import DjangoStore
from taskos.store.stored_events import select, stored_events

RECORDED_TYPES = (EventType.MODEL_CALL, EventType.USER_MESSAGE, EventType.TOOL_RESULT,
                  EventType.TURN_STARTED)
# What a replay takes of a recorded call: its kind and answer, never the prompt it was sent.
REPLAYED_CALL_KEYS = ("kind", "reply", "refused")
SETTING_TYPES = {f.name: f.type for f in fields(ContextConfig)}


def parse_settings(pairs: list[str]) -> dict[str, Any]:
    """["trigger_ratio=0.6", "window=32000"] -> typed values; SessionError on a bad pair."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key, raw = key.strip(), raw.strip()
        if not sep or not key:
            raise SessionError(f"Settings are key=value pairs, got {pair!r}.")
        if key == "window":
            kind = "int"
        elif key in SETTING_TYPES:
            kind = SETTING_TYPES[key]
        else:
            known = ", ".join(["window", *SETTING_TYPES])
            raise SessionError(f"Unknown setting {key!r}. Settings: {known}.")
        try:
            if kind == "bool":
                if raw.lower() not in ("true", "false", "1", "0", "on", "off"):
                    raise ValueError(raw)
                out[key] = raw.lower() in ("true", "1", "on")
            elif kind == "int":
                out[key] = int(raw)
            elif kind == "float":
                out[key] = float(raw)
            else:
                out[key] = raw
        except ValueError:
            raise SessionError(f"Setting {key} needs a {kind} value, got {raw!r}.") from None
    return out


def load_recording(source: Session) -> Recording:
    """The recorded decisions of `source`, read from its stored events and archive."""
    rows = SessionEvent.objects.filter(session=source, type__in=RECORDED_TYPES)
    events = [*select(rows, ModelCall, REPLAYED_CALL_KEYS), *stored_events(
        rows.exclude(type=EventType.MODEL_CALL).values_list("seq", "type", "turn", "at", "payload"))]
    events.sort(key=lambda ev: ev.seq)
    store = DjangoStore()
    sid = str(source.pk)
    return build_recording(sid, events, lambda ref: store.read_ref(sid, ref))


def create_replay(source: Session, owner, settings: dict[str, Any] | None = None,
                  profile: ModelProfile | None = None) -> Session:
    """Validate and save a queued replay of `source` (start it with start_session)."""
    if source.is_active:
        raise SessionError(f"Session #{source.pk} is still {source.status}: replay it once "
                           "it has ended.")
    try:
        load_recording(source)
    except RecordingError as exc:
        raise SessionError(str(exc)) from None
    settings = dict(settings or {})
    profile = profile or source.profile
    window = settings.pop("window", None)  # 0 is a window refused, not "the default"
    window = checked_window(min(source.window, profile.effective_window) if window is None
                            else window, profile)
    config = checked_config({**(source.context_settings or {}), **settings})
    replay = Session.objects.create(
        owner=owner, goal=source.goal, scenario=source.scenario, profile=profile,
        window=window, context_settings=config.to_dict(), replay_of=source)
    # The recorded requests offered the tools of its sources (T10): without them the
    # replay's requests would lack those schemas, and its system zone would differ.
    replay.tool_sources.set(source.tool_sources.all())
    return replay


def replay_engine(session: Session) -> Callable[..., Any]:
    """The engine entry point for a replay session: run_session's signature."""
    return replay_runner(load_recording(session.replay_of))


def changed_settings(replay: Session) -> dict[str, Any]:
    """What a replay changed against its source: settings, window and profile."""
    source = replay.replay_of
    out: dict[str, Any] = {}
    if replay.profile_id != source.profile_id:
        out["profile"] = replay.profile.name
    if replay.window != source.window:
        out["window"] = replay.window
    out.update({k: v for k, v in (replay.context_settings or {}).items()
                if (source.context_settings or {}).get(k) != v})
    return out
