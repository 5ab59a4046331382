"""Pages of human scoring, adjudication, the agreement dashboard and the judge.

Include from ``frontend/urls.py``: ``path("", include("frontend.urls_scoring"))``.
"""
from django.urls import path

from frontend.views import judge_report as views_judge_report
from frontend.views import scoring as v

urlpatterns = [
    path("scoring/", v.scoring_home, name="scoring-home"),
    path("scoring/next/", v.scoring_next, name="scoring-next"),
    path("scoring/items/<int:pk>/", v.scoring_item, name="scoring-item"),
    path("scoring/done/", v.scoring_done, name="scoring-done"),
    path("scoring/enqueue/", v.scoring_enqueue, name="scoring-enqueue"),
    path("scoring/gold/", v.scoring_gold, name="scoring-gold"),
    path("adjudication/", v.adjudication_queue, name="adjudication-queue"),
    path("adjudication/records/<int:pk>/", v.adjudication_record, name="adjudication-record"),
    path("agreement/", v.agreement_page, name="agreement"),
    path("agreement/plots/<str:name>.png", v.agreement_plot, name="agreement-plot"),
    path("judge/report/", views_judge_report.judge_report_page, name="judge-report"),
    path("judge/report/plots/<str:name>.png", views_judge_report.judge_report_plot, name="judge-report-plot"),
    path("judge/configs/", v.judge_configs, name="judge-configs"),
    path("judge/configs/<int:pk>/resume/", v.judge_config_resume, name="judge-config-resume"),
    path("judge/configs/<int:pk>/test/", v.judge_config_test, name="judge-config-test"),
    path("judge/jobs/", v.judge_jobs, name="judge-jobs"),
    path("judge/jobs/<int:pk>/", v.judge_job, name="judge-job"),
    path("judge/jobs/<int:pk>/rerun/", v.judge_job_rerun, name="judge-job-rerun"),
    path("runs/<int:pk>/judge/", v.run_judge, name="run-judge"),
]
