"""Replay with… and the comparison view (feature E2), from a session page.

The form starts a replay of the session under other context settings or another profile
(through the worker, like any session); the comparison view puts the recorded session and
its replays side by side: a table, the overlaid input-token curves, and for each replay
the first turn where its context differs, with links to the inspector at those calls.
"""
from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from agents import PRICE_TABLES
from taskos.replays.compare import compare
from taskos.replays.sessions import changed_settings, create_replay
from taskos.runs.models import ModelProfile, Session
from taskos.runs.prices import table_named
from taskos.runs.services import SessionError, start_session
from taskos.web.forms import KNOBS, MAX_WINDOW, MIN_WINDOW, NewSessionForm, ProfileChoiceField
from taskos.web.params import BadParam, bad_param, int_list_param
from taskos.web.views import owned_session

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 760, 260, 56, 12, 12, 26
COLOURS = ("#475569", "#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2")
# A replay keeps the recorded time, and its recorded delegate calls: it reuses the recorded
# sub-agents' answers instead of running them, so the form does not offer to switch them.
REPLAY_KNOBS = tuple(k for k in KNOBS if k not in ("timezone", "delegation_enabled"))


class ReplayForm(forms.Form):
    profile = ProfileChoiceField(queryset=ModelProfile.objects.all(), empty_label=None,
                                 help_text="Summary calls go to this profile's model; the "
                                           "agent's decisions come from the recording.")
    window = forms.IntegerField(min_value=MIN_WINDOW, max_value=MAX_WINDOW,
                                help_text="Context window of the replay, in tokens.")

    def __init__(self, source: Session, *args: Any, **kwargs: Any) -> None:
        settings = source.context_settings or {}
        initial = {"profile": source.profile_id, "window": source.window,
                   **{k: settings[k] for k in REPLAY_KNOBS if k in settings}}
        super().__init__(*args, initial=initial, **kwargs)
        template = NewSessionForm()
        for name in REPLAY_KNOBS:
            self.fields[name] = template.fields[name]

    def settings(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {"window": data["window"], **{k: data[k] for k in REPLAY_KNOBS}}


@login_required
@require_http_methods(["GET", "POST"])
def replay_new(request: HttpRequest, pk: int) -> HttpResponse:
    source = owned_session(request, pk)
    if source.replay_of_id:  # a replay of a replay plays the same recording
        source = owned_session(request, source.replay_of_id)
    form = ReplayForm(source, request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            with transaction.atomic():
                replay = create_replay(source, request.user, form.settings(),
                                       form.cleaned_data["profile"])
                start_session(replay)
        except SessionError as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("web:compare", pk=source.pk)
    return render(request, "web/replay_form.html", {
        "source": source, "form": form, "children": source.children.count()},
        status=400 if form.errors else 200)


def _curves(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One polyline per run over a shared scale: input tokens per model call."""
    longest = max((len(r["model_calls"]) for r in runs), default=0)
    peak = max([c["input_tokens"] for r in runs for c in r["model_calls"]] + [1])
    # The scale fits the data: a 128k window over curves that stay near 32k would flatten
    # them into the bottom quarter. Windows far above the peak are named, not drawn.
    shown = [r["window"] for r in runs if r["window"] <= 1.25 * peak]
    top = max([peak] + shown) * 1.05
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / max(1, longest - 1)

    def y_of(tokens: float) -> float:
        return round(TOP + plot_h * (1 - tokens / top), 1)

    lines = []
    for run in runs:
        points = " ".join(f"{round(LEFT + i * step, 1)},{y_of(c['input_tokens'])}"
                          for i, c in enumerate(run["model_calls"]))
        lines.append({"points": points, "colour": run["colour"], "label": run["label"],
                      "window_y": y_of(run["window"]) if run["window"] in shown else None})
    return {"width": WIDTH, "height": HEIGHT, "left": LEFT, "right": WIDTH - RIGHT,
            "zero_y": y_of(0), "top_label": round(top / 1.05), "top_y": y_of(top / 1.05),
            "calls": longest, "lines": lines,
            "off_scale": sorted({r["window"] for r in runs if r["window"] not in shown})}


@login_required
@require_GET
def compare_view(request: HttpRequest, pk: int) -> HttpResponse:
    """The recorded session and its replays (all, or ?runs=3,5) side by side."""
    source = owned_session(request, pk)
    if source.replay_of_id:
        return redirect("web:compare", pk=source.replay_of_id)
    replays = Session.objects.filter(replay_of=source, owner=request.user).select_related(
        "profile", "replay_of").order_by("id")
    try:
        wanted = int_list_param(request, "runs")
    except BadParam as exc:
        return bad_param(exc)
    if request.GET.get("runs"):
        replays = replays.filter(pk__in=set(wanted))
    replays = list(replays)
    result = compare(source, [r for r in replays if not r.is_active])
    finished = {r["session"]: r for r in result["replays"]}
    runs = [{**result["source"], "label": f"#{source.pk} recorded", "changed": {},
             "colour": COLOURS[0], "row": source}]
    for index, replay in enumerate(replays, 1):
        report = finished.get(replay.pk) or {"session": replay.pk, "status": replay.status,
                                             "model_calls": [], "window": replay.window}
        runs.append({**report, "label": f"#{replay.pk} replay", "row": replay,
                     "changed": changed_settings(replay),
                     "colour": COLOURS[index % len(COLOURS)]})
    prices = table_named(request.GET.get("prices"))
    for run in runs:
        run["cost_at_table"] = (run.get("costs_at") or {}).get(prices)
    return render(request, "web/compare.html", {
        "source": source, "runs": runs, "curves": _curves(runs),
        "prices": prices, "price_tables": list(PRICE_TABLES),
        "active": any(r.is_active for r in replays)})
