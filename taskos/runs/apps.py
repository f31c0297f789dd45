from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "taskos.runs"
    label = "runs"
    verbose_name = "Runs"

    def ready(self) -> None:
        # Here, not at the top of the module: edits imports the models, which Django loads
        # only after every app's AppConfig module.
        from . import edits

        edits.connect()
