"""Task, replay and run pages."""
from django.urls import path

from frontend import views_replays, views_runs, views_tasks

urlpatterns = [
    path("tasks/", views_tasks.task_list_page, name="task-list"),
    path("tasks/new/", views_tasks.task_new_page, name="task-new"),
    path("tasks/<int:pk>/", views_tasks.task_detail_page, name="task-detail"),
    path("replays/<int:pk>/artifacts/<str:name>.png", views_replays.artifact_png, name="replay-artifact-png"),
    path("replays/<int:pk>/artifacts/<str:name>", views_replays.artifact_file, name="replay-artifact"),
    path("runs/", views_runs.run_list_page, name="run-list"),
    path("runs/<int:pk>/", views_runs.run_detail_page, name="run-detail"),
    path("records/<int:pk>/", views_runs.record_detail_page, name="record-detail"),
]
