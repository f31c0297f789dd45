"""Read-only views over the stored record: resync, inspector, call export, archive refs."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models.functions import Length, Substr
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET

from agents import EventType
from taskos.drawer.calls import ToolsLost, request_body
from taskos.drawer.events import call_payload, load_events
from taskos.drawer.panels.compactions import CompactionsPanel, read_compaction
from taskos.drawer.panels.inspector import InspectorPanel, read_call_detail
from taskos.drawer.stream import render_update, transcript_page
from taskos.runs.models import ArchivedTurn, SessionEvent
from taskos.store.django_store import DjangoStore
from taskos.web.params import BadParam, bad_param, int_param
from taskos.web.views import owned_session

REF_PAGE_CHARS = 20_000
ARCHIVE_PAGE_ROWS = 50
ARCHIVE_SHOWN_CHARS = 4000


@login_required
@require_GET
def events_after(request: HttpRequest, pk: int) -> HttpResponse:
    """Resync: out-of-band fragments that bring a page holding seq `after` up to date."""
    session = owned_session(request, pk)
    try:
        after = int_param(request, "after", 0)
    except BadParam as exc:
        return bad_param(exc)
    update = render_update(session, after, full=True)
    return HttpResponse(update.html, headers={"X-Last-Seq": str(update.last_seq)})


@login_required
@require_GET
def transcript_before(request: HttpRequest, pk: int) -> HttpResponse:
    """A page of older transcript entries (before seq `before`), for the load-older button."""
    session = owned_session(request, pk)
    try:
        before = int_param(request, "before")
    except BadParam as exc:
        return bad_param(exc)
    return HttpResponse(transcript_page(session, before))


@login_required
@require_GET
def inspect(request: HttpRequest, pk: int) -> HttpResponse:
    """The inspector's body for one call (pinned) or for the latest call (following)."""
    session = owned_session(request, pk)
    try:
        pinned = int_param(request, "call")
    except BadParam as exc:
        return bad_param(exc)
    panel = InspectorPanel()
    events = load_events(session, panel.event_types)
    context = panel.get_context(session, events, pinned=pinned)
    body = render_to_string(panel.template, {**context, "session": session}, request=request)
    # Only the following body carries the id live updates target, so a pinned call stays.
    dom_id = f"{panel.dom_id}-body" if pinned is None else f"{panel.dom_id}-pinned"
    # A call that is not there is a 404 to a plain request; the panel's own request gets it
    # as a 200, since htmx swaps no 4xx (base.html) and the panel would show nothing.
    missing = pinned is not None and context["detail"] is None
    status = 404 if missing and not request.headers.get("HX-Request") else 200
    return HttpResponse(f'<div id="{dom_id}" class="panel-body">{body}</div>', status=status)


@login_required
@require_GET
def inspect_message(request: HttpRequest, pk: int) -> HttpResponse:
    """The text of the message named `message` (its row's key, which stays with it from call
    to call: inspector.message_keys) in call `call`, as the inspector shows it once its row
    is opened: rows come without it (drawer/panels/_inspector_message.html)."""
    session = owned_session(request, pk)
    try:
        number = int_param(request, "call")
    except BadParam as exc:
        return bad_param(exc)
    key = request.GET.get("message", "")
    detail = read_call_detail(session, number) if number is not None else None
    row = next((m for m in detail["messages"] if m["key"] == key), None) if detail else None
    if row is None:
        raise Http404(f"Session {session.pk} has no message {key!r} in call {number}.")
    return HttpResponse(render_to_string("drawer/panels/_inspector_message_text.html",
                                         {"m": row}))


@login_required
@require_GET
def compactions_older(request: HttpRequest, pk: int) -> HttpResponse:
    """The Compactions panel's earlier rows, one line each, newest first: what a page
    fetches when its list of earlier compactions is opened. With `before` (a number), only
    those numbered below it: a running session's page holds the newest few already."""
    session = owned_session(request, pk)
    try:
        before = int_param(request, "before")
    except BadParam as exc:
        return bad_param(exc)
    panel = CompactionsPanel()
    context = panel.get_context(session, load_events(session, panel.event_types))
    older = [row for row in context["older"] if before is None or row["number"] < before]
    return HttpResponse(render_to_string("drawer/panels/_compactions_older_rows.html",
                                         {"older": older, "session": session},
                                         request=request))


@login_required
@require_GET
def compaction_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """Compaction `number` in full (zones, summary diff, audit, refs), as the Compactions
    panel shows it once its line is opened: a live page is sent the lines only."""
    session = owned_session(request, pk)
    try:
        number = int_param(request, "number")
    except BadParam as exc:
        return bad_param(exc)
    row = read_compaction(session, number) if number is not None else None
    if row is None:
        raise Http404(f"Session {session.pk} has no compaction {number}.")
    return HttpResponse(render_to_string("drawer/panels/_compaction_detail.html",
                                         {"row": row, "session": session}, request=request))


@login_required
@require_GET
def call_page(request: HttpRequest, pk: int, number: int) -> HttpResponse:
    """One call in the inspector on a page of its own, styled like the rest (the compare
    view's "contexts first differ" links open here, not on the bare fragment)."""
    session = owned_session(request, pk)
    panel = InspectorPanel()
    context = panel.get_context(session, load_events(session, panel.event_types), pinned=number)
    if context["detail"] is None:
        raise Http404(f"Session #{pk} has no call {number}.")
    body = render_to_string(panel.template, {**context, "session": session}, request=request)
    return render(request, "web/call.html", {"session": session, "number": number,
                                             "body": body, "dom_id": f"{panel.dom_id}-pinned"})


def newest_call(session) -> int:
    """The number of the session's newest live call: what the live inspector's export
    links name ("latest"), so its bar does not change with every call (a page pins them to
    the call it shows when clicked: static/js/taskos.js)."""
    number = (SessionEvent.objects.filter(session=session, type=EventType.MODEL_CALL)
              .order_by("-seq").values_list("payload__call", flat=True).first())
    if number is None:
        raise Http404(f"Session {session.pk} has no model call yet.")
    return number


@login_required
@require_GET
def call_json(request: HttpRequest, pk: int, number: int | None = None) -> HttpResponse:
    """Inspector export: the request body of call `number` (None: the newest), the very
    bytes the provider got."""
    session = owned_session(request, pk)
    number = newest_call(session) if number is None else number
    if call_payload(session, number) is None:
        raise Http404(f"Session {session.pk} has no model call {number}.")
    try:
        body = request_body(session, number)
    except ToolsLost as exc:
        return HttpResponse(f"{exc} The exact body cannot be rebuilt; the stored record is at "
                            "record.json.", status=410, content_type="text/plain; charset=utf-8")
    if body is None:
        return HttpResponse(f"Call {number} was recorded before request parameters were kept; "
                            "its stored record is at record.json.", status=410,
                            content_type="text/plain; charset=utf-8")
    response = HttpResponse(body, content_type="application/json")
    response["Content-Disposition"] = (
        f'attachment; filename="taskos-session-{session.pk}-call-{number}-request.json"')
    return response


@login_required
@require_GET
def call_record(request: HttpRequest, pk: int, number: int | None = None) -> JsonResponse:
    """The stored record of call `number` (None: the newest): annotated messages, reply
    and figures."""
    session = owned_session(request, pk)
    number = newest_call(session) if number is None else number
    payload = call_payload(session, number)
    if payload is None:
        raise Http404(f"Session {session.pk} has no model call {number}.")
    body = {"session": session.pk, "goal": session.goal, "window": session.window,
            "profile": session.profile.name, **payload}
    response = JsonResponse(body, json_dumps_params={"ensure_ascii": False, "indent": 1})
    response["Content-Disposition"] = (
        f'attachment; filename="taskos-session-{session.pk}-call-{number}.json"')
    return response


@login_required
@require_GET
def read_ref(request: HttpRequest, pk: int, ref: str) -> HttpResponse:
    """The full text behind an archive or offload ref, in pages of REF_PAGE_CHARS."""
    session = owned_session(request, pk)
    text = DjangoStore().read_ref(str(session.pk), ref)
    if text is None:
        raise Http404(f"Session {session.pk} has no archived item {ref!r}.")
    try:
        page = int_param(request, "page", 1) or 1
    except BadParam as exc:
        return bad_param(exc)
    pages = max(1, -(-len(text) // REF_PAGE_CHARS))
    page = min(page, pages)
    start = (page - 1) * REF_PAGE_CHARS
    return render(request, "web/ref.html", {
        "session": session, "ref": ref, "text": text[start:start + REF_PAGE_CHARS],
        "page": page, "pages": pages, "chars": len(text),
        "previous": page - 1 if page > 1 else None, "next": page + 1 if page < pages else None,
    })


@login_required
@require_GET
def archive(request: HttpRequest, pk: int) -> HttpResponse:
    """Archived messages of a turn range (what a compaction moved out of the context)."""
    session = owned_session(request, pk)
    try:
        first = int_param(request, "first", 0)
        last = int_param(request, "last")
    except BadParam as exc:
        return bad_param(exc)
    rows = ArchivedTurn.objects.filter(session=session, turn__gte=first)
    if last is not None:
        rows = rows.filter(turn__lte=last)
    # Only the head of each message leaves the database: a raw tool output can be megabytes.
    rows = (rows.order_by("id").defer("content", "search_text")
            .annotate(head=Substr("content", 1, ARCHIVE_SHOWN_CHARS), length=Length("content")))
    page = Paginator(rows, ARCHIVE_PAGE_ROWS).get_page(request.GET.get("page"))
    items = [{"ref": row.ref, "turn": row.turn, "role": row.role, "tool_name": row.tool_name,
              # Many rows are archived without a token count: their size then shows in chars.
              "tokens": row.token_count, "chars": row.length, "is_binary": row.is_binary,
              "content": "" if row.is_binary else row.head,
              "cut": 0 if row.is_binary else max(0, row.length - ARCHIVE_SHOWN_CHARS)}
             for row in page.object_list]
    return render(request, "web/archive.html", {"session": session, "items": items,
                                                "page": page, "first": first, "last": last})
