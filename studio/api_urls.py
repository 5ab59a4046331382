"""REST API routes: /api/events/, /api/layers/, /api/tasks/, /api/replays/, /api/runs/, /api/verdicts/."""
from django.urls import include, path

urlpatterns = [
    path("", include("annotation.api")),
    path("", include("replay.api")),
    path("", include("evaluation.api")),
]
