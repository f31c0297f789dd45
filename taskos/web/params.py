"""Whole-number query parameters (?call=, ?before=, ?from=…), read the same way by every view
(what counts as one: taskos.runs.whole_numbers, which the live socket reads by too)."""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from taskos.runs.whole_numbers import MAX_PARAM, whole_number

SHOWN_CHARS = 40


class BadParam(ValueError):
    """A query parameter that is not a whole number in range; its text is for the person."""


def int_param(request: HttpRequest, name: str, default: int | None = None, *,
              minimum: int = 0, maximum: int = MAX_PARAM) -> int | None:
    """Query parameter `name` as an int in [minimum, maximum]; `default` when absent or
    empty; BadParam naming the parameter and the range otherwise."""
    raw = request.GET.get(name, "")
    if raw == "":
        return default
    value = whole_number(raw, maximum)
    if value is None or value < minimum:
        shown = raw if len(raw) <= SHOWN_CHARS else raw[:SHOWN_CHARS] + "…"
        raise BadParam(f"Query parameter {name!r} must be a whole number from {minimum} to "
                       f"{maximum}, got {shown!r}.")
    return value


def int_list_param(request: HttpRequest, name: str, *, maximum: int = MAX_PARAM) -> list[int]:
    """Query parameter `name` as comma-separated whole numbers (?runs=3,5); BadParam when
    one of them is not one."""
    raw = request.GET.get(name, "")
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if not all(whole_number(p, maximum) is not None for p in parts):
        shown = raw if len(raw) <= SHOWN_CHARS else raw[:SHOWN_CHARS] + "…"
        raise BadParam(f"Query parameter {name!r} must be whole numbers from 0 to {maximum} "
                       f"separated by commas, got {shown!r}.")
    return [int(p) for p in parts]


def bad_param(exc: BadParam) -> HttpResponse:
    """The 400 for a BadParam: plain text, so the echoed value is never read as HTML."""
    return HttpResponse(str(exc), status=400, content_type="text/plain; charset=utf-8")
