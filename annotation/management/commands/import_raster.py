"""Import one raster (GeoTIFF/COG/PNG) into an event as a raster or mask layer."""
from django.core.management.base import BaseCommand

from annotation.management.commands._import_common import run_and_report


class Command(BaseCommand):
    help = "Import a raster: stored COG + web-mercator COG for tiles (or a plain COG when not georeferenced)."

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--event", required=True, help="event slug (created when missing)")
        parser.add_argument("--modality", help="optical, sar, multispectral, dem, slope, lst, dsm, aerial, ...")
        parser.add_argument("--phase", default="", help="pre, post, t1, t2, ...")
        parser.add_argument("--gsd", type=float, help="pixel size in metres (default: from the raster)")
        parser.add_argument("--kind", choices=["raster", "mask"], default="raster")
        parser.add_argument("--class-map", help="for --kind mask: JSON {index: label}, inline or a file path")
        parser.add_argument("--band", type=int, help="for --kind mask: the band of class indices (default 1)")
        parser.add_argument("--annotates", help="for --kind mask: file name of the image layer it annotates")
        parser.add_argument("--name", help="layer name")
        parser.add_argument("--disaster-type")
        parser.add_argument("--json", action="store_true", help="print a JSON summary")

    def handle(self, *args, **o):
        # imported here: ``manage.py --help`` loads this module before Django starts (manage.py)
        from annotation.services.imports import import_raster_file

        run_and_report(self, import_raster_file, o["file"], event_slug=o["event"], modality=o["modality"],
                       phase=o["phase"], gsd=o["gsd"], kind=o["kind"], class_map=o["class_map"], band=o["band"],
                       annotates=o["annotates"], name=o["name"], disaster_type=o["disaster_type"],
                       as_json=o["json"])
