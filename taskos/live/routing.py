"""Websocket routes, mounted by taskos/asgi.py under the auth and origin checks."""
from django.urls import path

from taskos.live.consumer import SessionConsumer

websocket_urlpatterns = [
    path("ws/sessions/<int:pk>/", SessionConsumer.as_asgi()),
]
