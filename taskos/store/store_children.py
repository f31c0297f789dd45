"""Sub-agent sessions (SPEC T6) as the Django Store creates and lists them."""
from __future__ import annotations

from django.db import transaction

from agents import ChildRecord
from taskos.runs.models import Anchor, ArchivedTurn, ModelProfile, Session

from .store_base import session_pk


class SubAgents:
    """Mixed into DjangoStore; `_check_lease` is the store's."""

    def create_child(self, parent_id, request) -> str:
        """A queued child row; the worker sends it to the queue once the parent waits."""
        self._check_lease()
        parent = Session.objects.select_related("profile").get(pk=session_pk(parent_id))
        profile = parent.profile
        if request.get("profile") and request["profile"] != profile.name:
            profile = ModelProfile.objects.filter(name=request["profile"]).first()
            if profile is None:
                names = ", ".join(ModelProfile.objects.values_list("name", flat=True))
                raise LookupError(f"No model profile {request['profile']!r}; profiles: "
                                  f"{names}. Leave 'profile' out to use this session's.")
        window = min(int(request.get("window") or parent.window), profile.effective_window)
        settings = {**(parent.context_settings or {}),
                    "max_turns": int(request.get("max_turns") or
                                     (parent.context_settings or {}).get("max_turns", 400))}
        with transaction.atomic():
            child = Session.objects.create(
                owner_id=parent.owner_id, goal=request["goal"],
                scenario=request.get("scenario") or "", profile=profile, window=window,
                context_settings=settings, parent=parent,
                parent_turn=int(request.get("turn") or 0))
            Anchor.objects.bulk_create([
                Anchor(session=child, tier=1, text=text, source=Anchor.Source.USER)
                for text in request.get("anchors", [])])
        return str(child.pk)

    def list_children(self, parent_id) -> list[ChildRecord]:
        out = []
        for child in Session.objects.filter(parent_id=session_pk(parent_id)).order_by("id"):
            answer = ArchivedTurn.objects.filter(
                session=child, role="assistant", content=child.final_answer).order_by(
                    "-id").values_list("pk", flat=True).first() if child.final_answer else None
            out.append(ChildRecord(
                id=str(child.pk), goal=child.goal, status=child.status,
                final_answer=child.final_answer, error=child.error,
                answer_ref=f"arc:{child.pk}:{answer}" if answer else "", turns=child.turns,
                total_input_tokens=child.total_input_tokens,
                peak_input_tokens=child.peak_input_tokens,
                cost=child.cost_with_children()))
        return out

    def delegation_depth(self, session_id) -> int:
        depth, parent = 0, Session.objects.filter(pk=session_pk(session_id)).values_list(
            "parent_id", flat=True).first()
        while parent is not None:
            depth += 1
            parent = Session.objects.filter(pk=parent).values_list("parent_id", flat=True).first()
        return depth
