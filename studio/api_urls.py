"""REST API routes: events, layers, tasks, tools, replays, releases, runs, records, verdicts, experiments."""
from django.urls import include, path

urlpatterns = [
    path("", include("annotation.api")),
    path("", include("releases.api")),
    path("", include("annotation.api_variants")),
    path("", include("replay.api")),
    path("", include("evaluation.api")),
    path("", include("experiments.api")),
    path("", include("notifications.api")),
]
