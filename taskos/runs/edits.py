"""Counting people's edits of anchors and tasks, so the engine reads them only after one.

The engine used to reload every active anchor and every task at each turn, and all the
anchors again before each batch of its own anchor writes (to leave an admin's edit made
mid-turn alone): two or three reads of whole tables per turn that nearly always found
nothing new. Now every write to an Anchor or Task row that the engine's store did not
make — the admin, a pin from the drawer, a shell — bumps `Session.person_edits` after it
(post_save / post_delete, so the edit is stored no later than the bump: a reader that sees
the new count sees the edit). The engine reads the count with its per-turn poll, and
fresh before a batch of its own anchor writes; only a count that moved is followed by
the full read (agents/words/book.py). Before such a write, its text takes the storable
rule the engine's own writes follow (issue 25 item 4).
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar

from django.db.models import F
from django.db.models.signals import post_delete, post_save, pre_save

from agents import storable_text, storable_value

from .models import Anchor, Session, Task

_ENGINE_WRITING: ContextVar[bool] = ContextVar("taskos_engine_writing", default=False)


@contextmanager
def engine_writes():
    """Writes made inside are the engine's own (taskos/store/django_store.py): not counted."""
    token = _ENGINE_WRITING.set(True)
    try:
        yield
    finally:
        _ENGINE_WRITING.reset(token)


def _count_edit(sender, instance, **kwargs) -> None:
    if _ENGINE_WRITING.get() or kwargs.get("raw"):  # raw: loaddata, not a person
        return
    Session.objects.filter(pk=instance.session_id).update(person_edits=F("person_edits") + 1)


def _storable(sender, instance, **kwargs) -> None:
    """A person's text (the admin, a shell) by the rule the engine's writes follow
    (agents/storable.py): a NUL would fail the save on PostgreSQL."""
    for name in ("text", "key", "subject", "description", "owner"):
        value = getattr(instance, name, None)
        if isinstance(value, str):
            setattr(instance, name, storable_text(value))
    if isinstance(instance, Task):
        instance.metadata = storable_value(instance.metadata)


def connect() -> None:
    for model in (Anchor, Task):
        pre_save.connect(_storable, sender=model, dispatch_uid=f"storable-{model.__name__}")
        post_save.connect(_count_edit, sender=model,
                          dispatch_uid=f"person-edits-save-{model.__name__}")
        post_delete.connect(_count_edit, sender=model,
                            dispatch_uid=f"person-edits-delete-{model.__name__}")
