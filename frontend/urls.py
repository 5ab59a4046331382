"""Page URLs of the studio."""
from django.urls import include, path

urlpatterns = [
    path("", include("frontend.urls_events")),
    path("", include("frontend.urls_pages")),
    path("", include("frontend.urls_releases")),
    path("", include("frontend.urls_leaderboard")),
    path("", include("frontend.urls_scoring")),
    path("", include("frontend.urls_notifications")),
    path("", include("frontend.urls_experiments")),
]
