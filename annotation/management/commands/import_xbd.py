"""Import an xBD-style folder (images, label JSONs, masks) into an event."""
from django.core.management.base import BaseCommand

from annotation.management.commands._import_common import run_and_report


class Command(BaseCommand):
    help = ("Import an xBD-style folder: pre/post images, label JSONs (footprints + rasterised damage mask), "
            "or a class mask PNG (--mask/--class-map, or an auto-detected *_mask.png).")

    def add_arguments(self, parser):
        parser.add_argument("dir", help="folder with <disaster>_<8 digits>_... files")
        parser.add_argument("--event", help="event slug (default: the tiles' disaster name, e.g. socal-fire)")
        parser.add_argument("--name", help="event name")
        parser.add_argument("--disaster-type", help="e.g. wildfire (default: from the file names or label metadata)")
        parser.add_argument("--mask", help="a class mask PNG/TIF to use as the GT damage mask of the post image")
        parser.add_argument("--class-map", help="the mask's class map: JSON {index: label}, inline or a file path")
        parser.add_argument("--gsd", type=float, help="pixel size in metres (overrides the labels' affine fit)")
        parser.add_argument("--json", action="store_true", help="print a JSON summary")

    def handle(self, *args, **o):
        # imported here: ``manage.py --help`` loads this module before Django starts (manage.py)
        from annotation.services.imports import import_xbd_folder

        run_and_report(self, import_xbd_folder, o["dir"], event_slug=o["event"], disaster_type=o["disaster_type"],
                       mask=o["mask"], class_map=o["class_map"], gsd=o["gsd"], name=o["name"], as_json=o["json"])
