"""Run one blocking model call so that a cancel or the per-call deadline can cut it short.

The HTTP client's own timeouts bound each connect and each read, but a server that drips a
byte every few seconds never trips a read timeout, and a person who cancels should not
wait for one. So the call runs in a helper thread while this thread watches the clock and
the cancel flag. An abandoned call's thread ends by itself at the client's read timeout;
nothing it returns is used.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, TypeVar

from agents.loop.retry import CallCancelled

T = TypeVar("T")
POLL_S = 0.5  # how often the cancel flag is read while a call is in flight


class CallDeadline(Exception):
    """The call took longer than its total time limit."""


def run_interruptible(call: Callable[[], T], *, deadline_s: float | None,
                      should_stop: Callable[[], bool] | None = None,
                      poll_s: float = POLL_S) -> T:
    """Return call(); raise CallCancelled or CallDeadline if either comes first."""
    outcome: dict[str, object] = {}
    done = threading.Event()

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the waiting thread
            outcome["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=target, name="taskos-model-call", daemon=True)
    worker.start()
    end = time.monotonic() + deadline_s if deadline_s else None
    while True:
        wait = poll_s if end is None else max(0.0, min(poll_s, end - time.monotonic()))
        if done.wait(wait):
            break
        if should_stop is not None and should_stop():
            raise CallCancelled("cancelled by a person during a model call")
        if end is not None and time.monotonic() >= end:
            raise CallDeadline(f"the model call took longer than its total limit of "
                               f"{deadline_s:g} s")
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]
