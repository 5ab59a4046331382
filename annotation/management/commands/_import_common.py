"""Shared output of the import commands."""
from __future__ import annotations

import json

from django.core.management.base import CommandError


def run_and_report(command, func, *args, as_json: bool = False, **kwargs):
    # imported here: the import commands' ``--help`` loads this module before Django starts
    from annotation.services.imports import DataImportError

    try:
        result = func(*args, **kwargs)
    except DataImportError as exc:
        raise CommandError(str(exc)) from exc
    summary = result.summary()
    if as_json:
        command.stdout.write(json.dumps(summary, indent=2, ensure_ascii=False))
        return
    command.stdout.write(f"event {summary['event']} ({'created' if summary['event_created'] else 'existing'}, "
                         f"{summary['disaster_type'] or 'no disaster type'})")
    for l in summary["layers"]:
        size = (f"{l['feature_count']} features" if l["kind"] == "vector"
                else f"{l['width']}x{l['height']}x{l['band_count']}")
        extra = f" classes {l['class_counts']}" if l["kind"] == "mask" else ""
        link = f" → annotates {l['annotates']}" if l.get("annotates") else ""
        gsd = f"{l['gsd_m']:.3f} m" if l["gsd_m"] else "-"
        command.stdout.write(f"  [{l['status']}] {l['kind']:6} {l['file_name']}  {l['modality'] or '-'} "
                             f"{l['phase'] or '-'} {l['crs'] or l['frame']} gsd {gsd} {size}{extra}{link}")
    if summary["skipped_files"]:
        command.stdout.write(f"  skipped: {', '.join(summary['skipped_files'])}")
