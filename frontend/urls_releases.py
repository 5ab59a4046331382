"""Release pages (included from ``frontend.urls``)."""
from django.urls import path, re_path

from frontend.views import releases as views

VERSION = r"(?P<version>[0-9][0-9A-Za-z.+-]*)"

urlpatterns = [
    path("releases/", views.release_list_page, name="release_list"),
    path("releases/diff/", views.release_diff_page, name="release_diff"),
    re_path(rf"^releases/{VERSION}/$", views.release_detail_page, name="release_detail"),
    re_path(rf"^releases/{VERSION}/publish/$", views.release_publish, name="release_publish"),
    re_path(rf"^releases/{VERSION}/acknowledge-stale/$", views.release_acknowledge_stale,
            name="release_acknowledge_stale"),
    re_path(rf"^releases/{VERSION}/export/$", views.release_export, name="release_export"),
    re_path(rf"^releases/{VERSION}/exports/(?P<job>[0-9a-f]{{32}})/download/$", views.release_export_zip,
            name="release_export_zip"),
]
