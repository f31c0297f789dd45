"""URL map: the dashboard (taskos.web), sign-in, and the staff-only admin."""
from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("taskos.web.urls")),
]
