"""Import an OpenStreetMap PBF into an event: road network and POIs as GeoJSON."""
from django.core.management.base import BaseCommand

from annotation.management.commands._import_common import run_and_report


class Command(BaseCommand):
    help = "Import an OSM PBF as <stem>_roads.geojson (highway lines) and <stem>_pois.geojson (amenities etc.)."

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--event", required=True, help="event slug (created when missing)")
        parser.add_argument("--disaster-type")
        parser.add_argument("--json", action="store_true", help="print a JSON summary")

    def handle(self, *args, **o):
        # imported here: ``manage.py --help`` loads this module before Django starts (manage.py)
        from annotation.services.imports import import_osm_file

        run_and_report(self, import_osm_file, o["file"], event_slug=o["event"], disaster_type=o["disaster_type"],
                       as_json=o["json"])
