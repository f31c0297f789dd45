"""Pages: the session list, the start form and the session page with its drawer."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from taskos.drawer.stream import page_state
from taskos.runs.models import Session, Task
from taskos.runs.services import SessionError, create_session, start_session
from taskos.web.forms import CompactForm, MessageForm, NewSessionForm
from taskos.web.params import BadParam, bad_param, int_param
from taskos.workspaces.files import add_files
from taskos.workspaces.intake import UploadRefused
from taskos.workspaces.page import workspace_context

PAGE_SIZE = 50


def owned_session(request: HttpRequest, pk: int) -> Session:
    """The session `pk` if it belongs to the signed-in person; 404 for anyone else's."""
    return get_object_or_404(Session.objects.select_related("profile"), pk=pk,
                             owner=request.user)


def own_sessions(request: HttpRequest) -> QuerySet[Session]:
    done = Q(tasks__state=Task.State.COMPLETED)
    return (Session.objects.filter(owner=request.user).select_related("profile")
            .annotate(task_count=Count("tasks"), done_count=Count("tasks", filter=done))
            .order_by("-created_at", "-id"))


def table_context(request: HttpRequest) -> dict[str, object]:
    page = Paginator(own_sessions(request), PAGE_SIZE).get_page(request.GET.get("page"))
    live = any(s.is_active for s in page.object_list)
    return {"page": page, "sessions": page.object_list, "live": live}


@login_required
@require_GET
def dashboard(request: HttpRequest) -> HttpResponse:
    return render(request, "web/dashboard.html", table_context(request))


@login_required
@require_GET
def session_table(request: HttpRequest) -> HttpResponse:
    """The session table alone: the dashboard polls it while a session is active."""
    return render(request, "web/_session_table.html", table_context(request))


@login_required
@require_http_methods(["GET", "POST"])
def new_session(request: HttpRequest) -> HttpResponse:
    posted = request.method == "POST"
    try:
        initial = start_initial(request)
    except BadParam as exc:
        return bad_param(exc)
    form = NewSessionForm(request.POST if posted else None, request.FILES if posted else None,
                          owner=request.user, initial=initial)
    if posted and form.is_valid():
        data = form.cleaned_data
        try:
            with transaction.atomic():
                session = create_session(request.user, data["goal"], data["scenario"],
                                         data["profile"], data["window"],
                                         form.context_settings())
                if data.get("ask_first"):  # calls that wait for a person's approval (T11)
                    session.ask_first = list(data["ask_first"])
                    session.save(update_fields=["ask_first"])
                session.tool_sources.set(data.get("tool_sources") or [])  # T10
                store_start_files(request, form, session)
                start_session(session)
        except SessionError as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("web:session", pk=session.pk)
    return render(request, "web/new_session.html", {"form": form},
                  status=400 if form.errors else 200)


@login_required
@require_GET
def session_page(request: HttpRequest, pk: int) -> HttpResponse:
    session = owned_session(request, pk)
    return render(request, "web/session.html", {
        "session": session, **page_state(session),
        "message_form": MessageForm(), "compact_form": CompactForm(),
        **workspace_context(session),
    })


def start_initial(request: HttpRequest) -> dict[str, object]:
    """"Start a new task from this workspace" opens the form with ?from=SESSION."""
    source = int_param(request, "from")
    return {"from_session": source} if source is not None else {}


def store_start_files(request: HttpRequest, form: NewSessionForm, session: Session) -> None:
    """The start form's files into the new session's workspace, inside the transaction
    that creates it: when they cannot be stored, no session is left either (feature T9)."""
    if not form.incoming:
        return
    try:
        add_files(session, form.incoming, by=request.user)
    except UploadRefused as exc:
        form.add_error("files", str(exc))
        raise SessionError("No task was started: the files could not be stored (see "
                           "Files).") from None
