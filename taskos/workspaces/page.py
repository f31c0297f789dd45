"""What the session page shows of the workspace (templates/web/_workspace.html)."""
from __future__ import annotations

from taskos.runs.models import Session

from .files import listing
from .forms import AddFilesForm


def workspace_context(session: Session, form: AddFilesForm | None = None) -> dict[str, object]:
    entries, cut = listing(session)
    return {"workspace_files": entries, "workspace_cut": cut,
            "workspace_bytes": sum(entry.size for entry in entries),
            "add_files_form": form or AddFilesForm(session=session)}
