"""manage.py demo: load the real demo data, users, two example tasks (replayed) and an example agent run.

What it loads and how: ``evaluation.services.demo`` (:func:`~evaluation.services.demo.load_demo`).
"""
from __future__ import annotations

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = ("Load the studio's demo: real events (a SYNTHETIC event when STUDIO_DEMO_DATA is missing), demo users, "
            "two replayed example tasks, one example agent run.")

    def add_arguments(self, parser):
        parser.add_argument("--skip-osm", action="store_true", help="do not import the OSM extract")
        parser.add_argument("--host", default="127.0.0.1:8000", help="where the server will listen (for the links)")

    def handle(self, *args, **opts):
        # imported here: ``manage.py demo --help`` loads this module before Django starts (manage.py)
        from evaluation.services.demo import DEMO_USERS, load_demo

        out = self.stdout
        loaded = load_demo(skip_osm=opts["skip_osm"], step=lambda text: out.write(f"- {text}"),
                           warn=lambda text: out.write(self.style.WARNING(text)))
        out.write("\nDemo users (development only):\n")
        for name, pw, roles in DEMO_USERS:
            out.write(f"  {name:<8} password {pw:<13} roles {', '.join(roles)}\n")
        out.write(f"\nWhere to click (http://{opts['host']}, log in as one of the users above):\n")
        for slug in loaded["events"]:
            out.write(f"  map of {slug:<28} /events/{slug}/\n")
        for question_id, pk in loaded["tasks"]:
            out.write(f"  task {question_id:<32} /tasks/{pk}/\n")
        for agent, pk in loaded["runs"]:
            out.write(f"  agent run {agent:<27} /runs/{pk}/\n")
        out.write("  author a new task                  /tasks/new/\n  API docs                           /api/docs/\n")
