from django.apps import AppConfig


class DrawerConfig(AppConfig):
    name = "taskos.drawer"
    label = "drawer"
