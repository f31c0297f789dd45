from django.apps import AppConfig
from django.core import checks


class RunsConfig(AppConfig):
    name = "taskos.runs"
    label = "runs"
    verbose_name = "Runs"

    def ready(self) -> None:
        # Here, not at the top of the module: edits imports the models, which Django loads
        # only after every app's AppConfig module.
        from . import edits, prices

        edits.connect()
        checks.register(prices.check_price_table)
