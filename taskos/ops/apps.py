from django.apps import AppConfig


class OpsConfig(AppConfig):
    """No models: installed for its management commands."""

    name = "taskos.ops"
    label = "ops"
    verbose_name = "Operations"
