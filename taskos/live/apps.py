from django.apps import AppConfig


class LiveConfig(AppConfig):
    name = "taskos.live"
    label = "live"
