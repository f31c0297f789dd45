"""The form fields that bring files into a workspace (feature T9): on the start form (files,
and a session whose workspace is copied) and on the session page (files added later).
Every refusal lands on the field that caused it, before anything is stored."""
from __future__ import annotations

from typing import Any

from django import forms

from taskos.runs.models import Session

from .files import limits, plan_for, uploaded_items, workspace_items
from .intake import Incoming, UploadRefused, check_plan, megabytes


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class FilesField(forms.FileField):
    """Several files at once (a .zip among them is unpacked); none is fine."""

    widget = MultipleFileInput

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_empty_file", True)  # an empty file is kept, and said so
        super().__init__(**kwargs)

    def clean(self, data: Any, initial: Any = None) -> list:
        single = super().clean
        if isinstance(data, (list, tuple)):
            return [single(item, initial) for item in data if item]
        return [single(data, initial)] if data else []


def files_help() -> str:
    lim = limits()
    return (f"Several at once; a .zip is unpacked into the workspace. Up to "
            f"{megabytes(lim.file_bytes)} a file, {megabytes(lim.session_bytes)} and "
            f"{lim.files} files per task.")


def _refused(exc: UploadRefused) -> forms.ValidationError:
    return forms.ValidationError(str(exc))


class StartFilesForm(forms.Form):
    """The start form's files: uploaded now, and/or copied from one of the person's
    sessions ("Start a new task from this workspace"). `incoming` is what to store once the
    session exists (`store_files`)."""

    files = FilesField(label="Files", error_messages={
        "empty": "An uploaded file came without its content; choose it again.",
        "max_length": "A file name is too long."})
    from_session = forms.IntegerField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args: Any, owner: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.owner = owner
        self.fields["files"].help_text = files_help()
        self.incoming: list[Incoming] = []

    def source_session(self) -> Session | None:
        """The session whose workspace is copied (the form's data or its initial value)."""
        pk = self.data.get("from_session") if self.is_bound else self.initial.get("from_session")
        try:
            pk = int(pk) if pk not in (None, "") else None
        except (TypeError, ValueError):
            return None
        if pk is None or self.owner is None:
            return None
        return Session.objects.filter(pk=pk, owner=self.owner).first()

    def clean_from_session(self) -> Session | None:
        pk = self.cleaned_data.get("from_session")
        if pk is None:
            return None
        source = self.source_session()
        if source is None:
            raise forms.ValidationError(f"Session #{pk} is not one of yours; its workspace "
                                        "cannot be copied.")
        if not source.workspace.is_dir():
            raise forms.ValidationError(f"Session #{pk} has no workspace folder (it never ran, "
                                        "or its files were removed).")
        return source

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        lim = limits()
        copied: list[Incoming] = []
        source = data.get("from_session")
        if source is not None:
            copied = workspace_items(source)
        try:
            uploaded = uploaded_items(data.get("files") or [], lim)
        except UploadRefused as exc:
            self.add_error("files", _refused(exc))
            return data
        try:
            check_plan(copied, {}, lim)
        except UploadRefused as exc:
            self.add_error("from_session" if "from_session" in self.fields else None,
                           forms.ValidationError(f"Session #{source.pk}'s workspace cannot be "
                                                 f"copied: {exc}"))
            return data
        try:
            self.incoming = check_plan(copied + uploaded, {}, lim)
        except UploadRefused as exc:
            self.add_error("files", _refused(exc))
        return data

    def empty_files(self) -> list[str]:
        return [item.path for item in self.incoming if item.empty]


class AddFilesForm(forms.Form):
    """Files added to a session that exists (running or ended)."""

    files = FilesField(label="Add files", error_messages={
        "empty": "An uploaded file came without its content; choose it again."})

    def __init__(self, *args: Any, session: Session, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.session = session
        self.fields["files"].help_text = files_help()
        self.incoming: list[Incoming] = []

    def clean_files(self) -> list:
        files = self.cleaned_data.get("files") or []
        if not files:
            raise forms.ValidationError("Choose at least one file.")
        try:
            self.incoming = plan_for(self.session, uploaded_items(files, limits()))
        except UploadRefused as exc:
            raise _refused(exc) from None
        return files
