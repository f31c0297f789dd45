import pytest


@pytest.fixture(autouse=True)
def workspaces_in_tmp(settings, tmp_path):
    """Session sandboxes go to a temporary folder, not the checkout's var/workspaces."""
    settings.TASKOS_WORKSPACES = tmp_path / "workspaces"
    return settings.TASKOS_WORKSPACES
