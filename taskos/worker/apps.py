from celery.signals import worker_ready
from django.apps import AppConfig


class WorkerConfig(AppConfig):
    """No models: installed so that Celery finds its tasks and every worker sweeps."""

    name = "taskos.worker"
    label = "worker"
    verbose_name = "Worker"

    def ready(self) -> None:
        # Here, not at the top of the module: the sweeper imports the models, which Django
        # loads only after every app's AppConfig module.
        from .sweeper import start_session_sweeper

        worker_ready.connect(start_session_sweeper, dispatch_uid="taskos-session-sweeper")
