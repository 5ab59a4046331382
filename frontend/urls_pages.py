"""Task, review, replay and run pages."""
from django.urls import path

from frontend.views import replays as views_replays
from frontend.views import runs as views_runs
from frontend.views import tasks as views_tasks

urlpatterns = [
    path("tasks/", views_tasks.task_list_page, name="task-list"),
    path("tasks/new/", views_tasks.task_new_page, name="task-new"),
    path("tasks/<int:pk>/", views_tasks.task_detail_page, name="task-detail"),
    path("tasks/<int:pk>/edit/", views_tasks.task_edit_page, name="task-edit"),
    path("tasks/<int:pk>/refresh-derived/", views_tasks.task_refresh_derived, name="task-refresh-derived"),
    path("tasks/<int:pk>/history/", views_tasks.task_history_page, name="task-history"),
    path("review/", views_tasks.review_queue_page, name="review-queue"),
    path("tasks/<int:pk>/replay-diff/", views_replays.replay_diff_block, name="replay-diff"),
    path("replays/<int:pk>/accept/", views_replays.replay_accept, name="replay-accept"),
    path("replays/<int:pk>/overlays/", views_tasks.replay_overlays, name="replay-overlays"),
    path("replays/<int:pk>/artifacts/<str:name>.wgs84.geojson", views_tasks.replay_artifact_wgs84,
         name="replay-artifact-wgs84"),
    path("replays/<int:pk>/artifacts/<str:name>.png", views_replays.artifact_png, name="replay-artifact-png"),
    path("replays/<int:pk>/artifacts/<str:name>", views_replays.artifact_file, name="replay-artifact"),
    path("runs/", views_runs.run_list_page, name="run-list"),
    path("runs/<int:pk>/", views_runs.run_detail_page, name="run-detail"),
    path("runs/<int:pk>/rescore/", views_runs.run_rescore, name="run-rescore"),
    path("runs/imports/<int:pk>/rerun/", views_runs.run_import_rerun, name="run-import-rerun"),
    path("records/<int:pk>/", views_runs.record_detail_page, name="record-detail"),
]
