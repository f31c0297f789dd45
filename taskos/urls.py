"""URL map: the dashboard (taskos.web), sign-in, and the staff-only admin."""
from django.contrib import admin
from django.http import HttpResponseRedirect
from django.templatetags.static import static
from django.urls import include, path


def favicon(request):
    """Browsers ask for /favicon.ico on every page, the admin's included."""
    return HttpResponseRedirect(static("favicon.svg"))


urlpatterns = [
    path("favicon.ico", favicon),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("taskos.web.urls")),
]
