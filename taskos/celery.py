"""The Celery app: configuration comes from Django settings (CELERY_* names)."""
import os

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskos.settings")

app = Celery("taskos")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def start_session_sweeper(sender=None, **kwargs):
    """Every worker looks for sessions nobody runs (runs/sweeper.py), at start and then
    periodically, whoever started Redis."""
    from django.conf import settings

    if float(getattr(settings, "TASKOS_SWEEP_SECONDS", 0)) > 0:
        from taskos.runs.sweeper import Sweeper

        return Sweeper().start()
    return None


@after_setup_logger.connect
@after_setup_task_logger.connect
def redact_keys_in_worker_logs(logger=None, **kwargs):
    """Celery installs its own handlers; mask API key values in their lines too."""
    from agents import RedactingFilter

    for handler in getattr(logger, "handlers", []):
        handler.addFilter(RedactingFilter())
