"""The Celery app: configuration comes from Django settings (CELERY_* names), the tasks
from the installed apps (taskos/worker/tasks.py), which also start each worker's sweeper
(taskos/worker/apps.py)."""
import os

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskos.settings")

app = Celery("taskos")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@after_setup_logger.connect
@after_setup_task_logger.connect
def redact_keys_in_worker_logs(logger=None, **kwargs):
    """Celery installs its own handlers; mask API key values in their lines too."""
    # Deliberately lazy: the engine takes about half a second to import, and every process
    # that imports taskos loads this module; only a worker's logging needs the filter.
    from agents import RedactingFilter

    for handler in getattr(logger, "handlers", []):
        handler.addFilter(RedactingFilter())
