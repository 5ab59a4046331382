"""``{% studio_nav %}``: the main navigation, offering each user only the pages of their roles
(``studio.permissions.PAGE_ACTIONS``); the current section is marked ``active``."""
from __future__ import annotations

from django import template

from studio.permissions import can_use_page

register = template.Library()

#: (label, href, page key for PAGE_ACTIONS or None, path prefixes of the section)
NAV = (
    ("Events", "/", None, ("/events/",)),
    ("Tasks", "/tasks/", None, ("/tasks/",)),
    ("Review", "/review/", "review", ("/review/",)),
    ("Runs", "/runs/", None, ("/runs/", "/records/", "/experiments/")),  # experiments: runs the studio makes
    ("Leaderboard", "/leaderboard/", None, ("/leaderboard",)),
    ("Releases", "/releases/", None, ("/releases/",)),
    ("Scoring", "/scoring/", "scoring", ("/scoring/",)),
    ("Adjudication", "/adjudication/", "adjudication", ("/adjudication/",)),
    ("Agreement", "/agreement/", "agreement", ("/agreement/",)),
    ("Judge report", "/judge/report/", "agreement", ("/judge/report/",)),
    ("Judges", "/judge/configs/", "judges", ("/judge/configs/", "/judge/jobs/", "/judge/runs/")),
    ("API", "/api/docs/", None, ("/api/",)),
)


@register.inclusion_tag("frontend/nav.html", takes_context=True)
def studio_nav(context):
    request = context["request"]
    path = request.path
    items = [{"label": label, "href": href, "active": path == href or any(path.startswith(p) for p in prefixes)}
             for label, href, page, prefixes in NAV if page is None or can_use_page(request.user, page)]
    return {"items": items}


@register.filter
def can_page(user, page: str) -> bool:
    """``{% if request.user|can_page:"task-new" %}``: whether to offer a link to ``page``."""
    return can_use_page(user, page)
