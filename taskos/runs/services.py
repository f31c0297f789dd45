"""What the dashboard does to sessions; views call these, never the ORM directly for writes."""
from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents import (WINDOW, ConfigError, ContextConfig, ScenarioError, check_number,
                    default_registry, list_scenarios, load_scenario, storable_text)

from . import queue
from .approvals import deny_for_cancel
from .delegation import cancel_tree
from .models import ModelProfile, PendingMessage, Session, input_too_long

log = logging.getLogger("taskos.runs")


class SessionError(ValueError):
    """A request a person made that cannot be carried out; the message says why."""


def checked_window(window: Any, profile: ModelProfile) -> int:
    """`window`, when a session may use it on `profile`; else SessionError saying why."""
    try:
        check_number("The window", window, WINDOW)
    except ConfigError as exc:
        raise SessionError(str(exc)) from None
    if window > profile.effective_window:
        raise SessionError(f"The window ({window} tokens) is larger than the context size of "
                           f"profile {profile.name!r} ({profile.effective_window} tokens).")
    return window


def checked_config(settings: Any, *, strict: bool = False) -> ContextConfig:
    """The context settings a person gave (from the form, the admin's JSON, the command
    line), checked; else SessionError saying what is wrong (with `strict`, also a name that
    is no setting)."""
    try:
        return ContextConfig.from_dict(settings, strict=strict)
    except ConfigError as exc:
        raise SessionError(f"Context settings: {exc}") from exc


def checked_scenario(name: str) -> str:
    """`name` when it is a bundled scenario (or one of its subtasks, "NAME#SUB", what a
    sub-agent plays) that loads; else SessionError. A path names a server file: the admin
    never takes one (runtask does, from the person at the server)."""
    name = (name or "").strip()
    if not name:
        return ""
    base = name.partition("#")[0]
    if base not in list_scenarios():
        raise SessionError(f"Unknown scenario {base!r}. Bundled scenarios: "
                           f"{', '.join(list_scenarios())}.")
    try:
        load_scenario(name)
    except ScenarioError as exc:
        raise SessionError(str(exc)) from exc
    return name


def create_session(owner, goal: str, scenario: str, profile: ModelProfile,
                   window: int | None, context_settings: dict[str, Any] | None) -> Session:
    """Validate and save a queued session (not started: call start_session)."""
    goal = storable_text((goal or "").strip())  # e.g. runtask's argument: agents/storable.py
    scenario = (scenario or "").strip()
    scenario_window = None
    if scenario:
        try:
            loaded = load_scenario(scenario)
        except ScenarioError as exc:
            raise SessionError(str(exc)) from exc
        goal = goal or storable_text(loaded.goal)
        scenario_window = loaded.window
    if not goal:
        raise SessionError("Give a goal or choose a scenario.")
    too_long = input_too_long(goal, "goal")
    if too_long:
        raise SessionError(too_long)
    if window is None:
        window = scenario_window or profile.effective_window
    window = checked_window(window, profile)
    config = checked_config(context_settings or {})
    if profile.tools_failed is not None:
        # The model check found that the server's template drops tools: the model would
        # never see one, so the session is offered none (and says so where it starts).
        config.tools_off = True
    unknown = sorted(set(config.tools) - set(default_registry(config).names()))
    if unknown:
        known = ", ".join(default_registry(config).names())
        raise SessionError(f"Unknown tools: {', '.join(unknown)}. Tools: {known}.")
    return Session.objects.create(owner=owner, goal=goal, scenario=scenario, profile=profile,
                                  window=window, context_settings=config.to_dict())


def start_session(session: Session) -> None:
    """Queue the session's Celery task once the current transaction has committed."""
    pk = session.pk

    def enqueue() -> None:
        try:
            result = queue.run_session(pk)
        except Exception as exc:  # noqa: BLE001 - the broker is down or misconfigured
            log.error("Could not queue session %s: %s", pk, exc)
            Session.objects.filter(pk=pk, status=Session.Status.QUEUED).update(
                status=Session.Status.FAILED, finished_at=timezone.now(),
                error=f"Could not reach the task queue to start this session ({exc}). "
                      "Check that Redis is running (REDIS_URL) and start a new session.")
            return
        Session.objects.filter(pk=pk).update(celery_task_id=result.id,
                                             enqueued_at=timezone.now())

    transaction.on_commit(enqueue)


def _require_active(session: Session, action: str) -> None:
    session.refresh_from_db(fields=["status"])
    if not session.is_active:
        raise SessionError(f"Cannot {action}: session #{session.pk} is {session.status}.")


def request_cancel(session: Session) -> None:
    """Ask the agent to stop at its next turn; a session not yet started stops at once.
    Its sub-agents are cancelled with it (feature T6)."""
    _require_active(session, "cancel")
    deny_for_cancel(cancel_tree(session))  # a call waiting for approval (T11) asks no more
    session.refresh_from_db(fields=["cancel_requested", "status", "finished_at"])


def post_message(session: Session, text: str) -> PendingMessage:
    """Queue a follow-up message for the agent's next turn."""
    text = storable_text((text or "").strip())  # taken in as the engine takes it
    if not text:
        raise SessionError("The message is empty.")
    too_long = input_too_long(text, "message")
    if too_long:
        raise SessionError(too_long)
    _require_active(session, "send a message")
    # The loop stops at its next turn before it reads messages: one sent now would never
    # be read. One accepted just before a cancel is shown on the page as not delivered.
    session.refresh_from_db(fields=["cancel_requested"])
    if session.cancel_requested:
        raise SessionError("This session is being cancelled; the agent reads no more "
                           "messages, so this one was not sent.")
    return PendingMessage.objects.create(session=session, text=text)


def request_compaction(session: Session, instructions: str = "") -> None:
    """Ask for a compaction at the start of the next iteration (feature C13)."""
    _require_active(session, "compact")
    instructions = storable_text((instructions or "").strip())
    Session.objects.filter(pk=session.pk).update(compact_request=instructions)
    session.compact_request = instructions
