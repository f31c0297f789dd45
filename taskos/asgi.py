"""ASGI entry point for daphne: HTTP through Django, websockets through Channels."""
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskos.settings")
# Django must be set up before anything imports models (the consumer does).
django_http = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from taskos.live.routing import websocket_urlpatterns  # noqa: E402
from taskos.ops.static_files import InMemoryStaticFiles  # noqa: E402

# daphne does not serve files; for the one-command setup Django serves /static/ from the
# app and project folders, held in memory and gzip-compressed (taskos/ops/static_files.py;
# what it does not find, Django's handler answers). Behind a proxy, set
# TASKOS_SERVE_STATIC=0 and run collectstatic.
http_app = (InMemoryStaticFiles(ASGIStaticFilesHandler(django_http)) if settings.TASKOS_SERVE_STATIC
            else django_http)

application = ProtocolTypeRouter({
    "http": http_app,
    "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
})
