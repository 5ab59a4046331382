"""Root URL map: pages (frontend), the REST API under /api/, its OpenAPI schema, login."""
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import IsAuthenticated

from studio.api_index import ApiIndexView

# The schema and its docs page need a login like everything else (drf-spectacular serves them to
# anyone by default, and DRF views opt out of LoginRequiredMiddleware): the schema answers 401/403
# to an anonymous client like every API endpoint; the docs page, a page, redirects to the login.
schema_view = SpectacularAPIView.as_view(permission_classes=[IsAuthenticated])
docs_view = SpectacularSwaggerView.as_view(url_name="api-schema", permission_classes=[IsAuthenticated])
docs_view.login_required = True

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(template_name="frontend/login.html"), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/schema/", schema_view, name="api-schema"),
    path("api/docs/", docs_view, name="api-docs"),
    path("api/", ApiIndexView.as_view(), name="api-index"),
    path("api/", include("studio.api_urls")),
    path("", include("frontend.urls")),
]

# a styled 403 naming the missing role (frontend/views/errors.py); the API answers JSON itself
handler403 = "frontend.views.errors.permission_denied"
