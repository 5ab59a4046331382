"""Import a vector file (GeoJSON, Shapefile, GeoPackage) into an event as EPSG:4326 GeoJSON."""
from django.core.management.base import BaseCommand

from annotation.management.commands._import_common import run_and_report


class Command(BaseCommand):
    help = "Import a vector file; it is reprojected to EPSG:4326 GeoJSON and the original is kept."

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--event", required=True, help="event slug (created when missing)")
        parser.add_argument("--layer", help="one layer of a multi-layer file (default: all)")
        parser.add_argument("--modality", help="buildings, roads, pois, boundary, ... (default: guessed from the name)")
        parser.add_argument("--disaster-type")
        parser.add_argument("--json", action="store_true", help="print a JSON summary")

    def handle(self, *args, **o):
        # imported here: ``manage.py --help`` loads this module before Django starts (manage.py)
        from annotation.services.imports import import_vector_file

        run_and_report(self, import_vector_file, o["file"], event_slug=o["event"], layer=o["layer"],
                       modality=o["modality"], disaster_type=o["disaster_type"], as_json=o["json"])
