"""What a person does to a running session: cancel, follow up, compact now, pin a sentence
(features W2, C13; issue 13).

Each action answers htmx with a short notice for the page's #flash box and a plain
form post with a redirect back to the session page; both are CSRF-protected.
"""
from __future__ import annotations

from typing import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from taskos.runs.models import Session
from taskos.runs.pins import pin_sentence, unpin
from taskos.runs.services import SessionError, post_message, request_cancel, request_compaction
from taskos.web.forms import CompactForm, MessageForm
from taskos.web.views import owned_session


def respond(request: HttpRequest, session: Session, text: str, *, ok: bool) -> HttpResponse:
    """The notice as an htmx fragment, or a redirect carrying it as a message."""
    if request.headers.get("HX-Request"):
        html = render_to_string("web/_flash.html", {"text": text, "ok": ok})
        return HttpResponse(html, status=200 if ok else 422)
    (messages.success if ok else messages.error)(request, text)
    return redirect("web:session", pk=session.pk)


def run_action(request: HttpRequest, pk: int, action: Callable[[Session], str]) -> HttpResponse:
    session = owned_session(request, pk)
    try:
        text = action(session)
    except SessionError as exc:
        return respond(request, session, str(exc), ok=False)
    return respond(request, session, text, ok=True)


@login_required
@require_POST
def cancel(request: HttpRequest, pk: int) -> HttpResponse:
    def act(session: Session) -> str:
        # Decided from the status before the request: a fast agent may already have
        # stopped by the time the session is read again.
        queued = session.status == Session.Status.QUEUED
        request_cancel(session)
        if queued and session.status == Session.Status.CANCELLED:
            return "Cancelled before it started."
        return ("Cancel requested: the agent stops within seconds, even in the middle of a "
                "model call (a running tool finishes first).")
    return run_action(request, pk, act)


@login_required
@require_POST
def message(request: HttpRequest, pk: int) -> HttpResponse:
    def act(session: Session) -> str:
        form = MessageForm(request.POST)
        if not form.is_valid():
            raise SessionError(" ".join(form.errors["text"]))
        post_message(session, form.cleaned_data["text"])
        return "Message sent: the agent reads it at its next turn."
    return run_action(request, pk, act)


@login_required
@require_POST
def compact(request: HttpRequest, pk: int) -> HttpResponse:
    def act(session: Session) -> str:
        form = CompactForm(request.POST)
        if not form.is_valid():
            raise SessionError(" ".join(form.errors["instructions"]))
        request_compaction(session, form.cleaned_data["instructions"])
        focus = form.cleaned_data["instructions"]
        return ("Compaction requested" + (f" with focus “{focus}”" if focus else "")
                + ": it runs at the start of the next turn.")
    return run_action(request, pk, act)


@login_required
@require_POST
def pin(request: HttpRequest, pk: int) -> HttpResponse:
    """Pin a sentence of the transcript as a hard constraint (issue 13)."""
    def act(session: Session) -> str:
        anchor, created = pin_sentence(session, request.POST.get("text", ""))
        if not created:
            return f"Already a hard constraint: “{anchor.text}”."
        return f"Pinned as a hard constraint: “{anchor.text}”. The agent has it from its next call."
    return run_action(request, pk, act)


@login_required
@require_POST
def unpin_view(request: HttpRequest, pk: int, anchor_id: int) -> HttpResponse:
    def act(session: Session) -> str:
        anchor = unpin(session, anchor_id)
        return f"Unpinned: “{anchor.text}”. The agent no longer has it from its next call."
    return run_action(request, pk, act)
