from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "taskos.runs"
    label = "runs"
    verbose_name = "Runs"

    def ready(self) -> None:
        from . import edits
        edits.connect()
