from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "taskos.web"
    label = "web"
