"""manage.py export_release VERSION --out DIR [--force] [--zip FILE]: a release in the benchmark's layout."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = ("Write release VERSION as tasks/t1_…json … t5_…json, tasks/gold_polygons/, images/, schemas/ and "
            "studio_manifest.json (written under a temporary name, renamed when complete).")

    def add_arguments(self, parser):
        parser.add_argument("version")
        parser.add_argument("--out", required=True, help="the release folder to write (must not exist or be empty)")
        parser.add_argument("--force", action="store_true", help="replace a non-empty --out folder")
        parser.add_argument("--zip", default=None, help="also write a zip of the folder to this file")

    def handle(self, *args, **opts):
        # imported here: ``manage.py --help`` loads this module before Django starts (manage.py)
        from releases.models import Release
        from releases.services.export import ExportError
        from releases.services.release_export import export_release, zip_folder

        release = Release.objects.filter(version=opts["version"]).first()
        if release is None:
            known = ", ".join(Release.objects.order_by("id").values_list("version", flat=True)) or "none"
            raise CommandError(f"no release {opts['version']} (releases: {known})")
        last = {"stage": None}

        def progress(stage, done, total):
            if opts["verbosity"] >= 2 or stage != last["stage"]:
                self.stderr.write(f"{stage}: {done}/{total}")
                last["stage"] = stage

        try:
            manifest = export_release(release, Path(opts["out"]), force=opts["force"], progress=progress)
        except ExportError as exc:
            raise CommandError(str(exc)) from exc
        if opts["zip"]:
            zip_folder(Path(opts["out"]), Path(opts["zip"]))
        c = manifest["counts"]
        self.stdout.write(f"release {release.version} ({release.status}): {c['tasks']} tasks in {c['samples']} samples, "
                          f"{len(manifest['files'])} files, {len(manifest['images_missing'])} missing → {opts['out']}")
