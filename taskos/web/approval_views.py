"""A person's decision on an ask-first call (feature T11), from the drawer's Approvals panel.

Approve, or Deny with a reason the model reads as the tool's result. The session's owner
or staff may decide; anyone else gets a 404, as for the session page. The answer is a
notice for #flash plus the Approvals panel and the status header out of band (htmx), or
a redirect back to the session page (a plain form post); CSRF-protected like every post.
"""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from taskos.drawer.panels import ApprovalsPanel
from taskos.drawer.stream import render_panels, render_status
from taskos.runs.approvals import DecisionRefused, can_decide, decide
from taskos.runs.models import Session, ToolApproval


@login_required
@require_POST
def decide_view(request: HttpRequest, pk: int, approval_id: int) -> HttpResponse:
    session = get_object_or_404(Session.objects.select_related("profile"), pk=pk)
    if not can_decide(request.user, session):
        raise Http404("No such session.")
    approval = get_object_or_404(ToolApproval, pk=approval_id, session=session)
    choice = request.POST.get("decision", "")
    if choice not in ("approve", "deny"):
        return notice(request, session, "Choose Approve or Deny.", ok=False)
    try:
        decide(approval, approve=choice == "approve", reason=request.POST.get("reason", ""),
               user=request.user)
    except DecisionRefused as exc:
        return notice(request, session, str(exc), ok=False)
    session.refresh_from_db()
    if choice == "approve":
        text = f"Approved: {approval.tool} runs when the session goes on."
    else:
        text = f"Denied: the model reads your reason as the result of {approval.tool}."
    if session.status == Session.Status.WAITING_FOR_APPROVAL:
        text += " Other calls still wait for a decision."
    return notice(request, session, text, ok=True)


def notice(request: HttpRequest, session: Session, text: str, *, ok: bool) -> HttpResponse:
    if not request.headers.get("HX-Request"):
        (messages.success if ok else messages.error)(request, text)
        return redirect("web:session", pk=session.pk)
    html = render_to_string("web/_flash.html", {"text": text, "ok": ok})
    html += "\n" + render_panels(session, [ApprovalsPanel()], oob=True)
    html += "\n" + render_status(session, oob=True)
    return HttpResponse(html, status=200 if ok else 422)
