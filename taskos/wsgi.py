"""WSGI entry point (plain HTTP only; websockets need the ASGI application)."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskos.settings")

application = get_wsgi_application()
