"""Leaderboard URLs (included from ``frontend.urls``)."""
from django.urls import path

from frontend.views import leaderboard as views_leaderboard

urlpatterns = [
    path("leaderboard/", views_leaderboard.leaderboard_page, name="leaderboard"),
    path("leaderboard.csv", views_leaderboard.leaderboard_csv, name="leaderboard-csv"),
    path("leaderboard.parquet", views_leaderboard.leaderboard_parquet, name="leaderboard-parquet"),
    path("leaderboard/compare/", views_leaderboard.compare_page, name="leaderboard-compare"),
    path("leaderboard/compare.png", views_leaderboard.compare_plot, name="leaderboard-compare-plot"),
    path("leaderboard/plot/<str:name>.png", views_leaderboard.leaderboard_plot, name="leaderboard-plot"),
    path("leaderboard/plot/<str:name>.svg", views_leaderboard.leaderboard_svg, name="leaderboard-svg"),
]
