"""Pages of experiments. Include from ``frontend/urls.py``: ``path("", include("frontend.urls_experiments"))``."""
from django.urls import path

from frontend.views import experiments as v

urlpatterns = [
    path("experiments/", v.experiment_list, name="experiments"),
    path("experiments/start/", v.experiment_start, name="experiment-start"),
    path("experiments/configs/", v.experiment_config_save, name="experiment-config-save"),
    path("experiments/<int:pk>/", v.experiment_detail, name="experiment"),
    path("experiments/<int:pk>/cancel/", v.experiment_cancel, name="experiment-cancel"),
    path("experiments/<int:pk>/resume/", v.experiment_resume, name="experiment-resume"),
]
