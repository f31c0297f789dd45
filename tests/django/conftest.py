"""Fixtures for tests that hit the database, and what a test sees of the statements sent."""
import re

import pytest

from taskos.store.batch_writes import SEPARATOR


@pytest.fixture(autouse=True)
def workspaces_in_tmp(settings, tmp_path):
    """Session sandboxes go to a temporary folder, not the checkout's var/workspaces."""
    settings.TASKOS_WORKSPACES = tmp_path / "workspaces"
    return settings.TASKOS_WORKSPACES


# How taskos/store/batch_writes.py joins a batch's kept writes into one query.
_NEXT_STATEMENT = re.compile(re.escape(SEPARATOR)
                             + r"(?=(?:INSERT|UPDATE|DELETE|SELECT|SET|SAVEPOINT) )")


def sent_statements(queries) -> list[str]:
    """Every statement a CaptureQueriesContext saw go out, a batch's one query split into
    its statements; the writes it kept (logged without text when kept) are counted there."""
    return [part for q in queries.captured_queries if q["sql"] is not None
            for part in _NEXT_STATEMENT.split(q["sql"])]
