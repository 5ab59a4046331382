"""Import real data into events and layers: the service functions behind the import commands.

Each function plans the layers of its source, builds their stored files in a staging directory
under ``STUDIO_DATA_ROOT/tmp/``, writes the Event and Layer rows in one ``transaction.atomic()``
and, as the last step inside it, moves the files into ``STUDIO_DATA_ROOT/events/<slug>/``. Any
error removes the staging directory, restores files it replaced and rolls the rows back: a failed
import leaves the database and the data root as they were. Errors are :class:`DataImportError`
(``"<file>: <field>: <problem>"``).

Re-importing is idempotent: a layer is keyed by (event, file_name); when its source files and
options are unchanged (``metadata.fingerprint``), or they changed but the stored content did not
(the same content digest, ``annotation.services.layer_versions.content_sha256``), it is left alone
("unchanged"). Otherwise its content makes a new layer version ("new version"): the ``Layer`` row
and the files under ``events/<slug>/`` become the new content, which the event's current tasks
read, and the superseded version's files are first copied to ``events/<slug>/versions/`` when a
release pins it (``layer_versions.archive_version``), so a released task keeps reading what it was
released with. Nothing is duplicated.

Stored layout of an event (paths in Layer rows are relative to ``STUDIO_DATA_ROOT``)::

    events/<slug>/<file_name>[.tif]         stored COG (rasters, masks) or GeoJSON (vectors)
    events/<slug>/tiles/<file_name>.3857.tif  web-mercator COG for tiles (georeferenced rasters)
    events/<slug>/original/<source file>    the source file unchanged (release export, checksums)
    events/<slug>/versions/<layer id>/v<n>/…  the files of a superseded version a release pins

With a bucket (``STUDIO_STORAGE_URL``, ``studio.storage``) the same happens on this machine's data
root, which is then its cache of the bucket: the event's current files are fetched first
(:func:`_fill_cache`), and the files moved into place are uploaded to their keys as the
transaction's last step; a failure puts the replaced objects' old bytes back and deletes the new
ones, and after the commit the local files are removed (:func:`_drop_local`).

For pixel-frame rasters (xBD PNGs) ``tiles_path`` equals ``path`` (a COG without CRS, shown
under ``L.CRS.Simple``); the pixel → lon/lat fit of the tile's labels is in
``metadata.georeference``.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils.text import slugify

from annotation.importers import osm as osm_imp
from annotation.importers import raster as raster_imp
from annotation.importers import vector as vector_imp
from annotation.importers import xbd as xbd_imp
from annotation.importers.common import (
    BUILDING_CLASS_MAP,
    DAMAGE_CLASS_MAP,
    disaster_type_for,
    normalize_class_map,
    sha256_file,
    sha256_files,
    with_crs84,
)
from annotation.importers.errors import DataImportError
from annotation.models import Event, Layer, LayerVersion
from annotation.services import layer_versions
from annotation.services.staging import STAGING_PREFIXES, staging_name, sweep_staging  # noqa: F401  (re-exported)
from studio import storage

__all__ = [
    "DataImportError", "ImportResult", "import_xbd_folder", "import_raster_file", "import_vector_file",
    "import_osm_file", "load_class_map", "push_layers_to_bucket",
]

logger = logging.getLogger(__name__)

IMPORTER_VERSION = 1  # part of every fingerprint: bump to rebuild stored files on re-import


# ---------------------------------------------------------------- plan and result


@dataclass
class LayerSpec:
    """One planned layer. ``build(staging_dir) -> dict`` writes its files (paths relative to the
    event directory) and returns the row fields it learnt; it runs only when the layer is new or
    its fingerprint changed."""

    file_name: str
    kind: str
    name: str
    build: Callable[[Path], dict]
    fingerprint: str
    originals: list[Path] = field(default_factory=list)
    modality: str = ""
    phase: str = ""
    annotates: str | None = None  # file_name of the image layer in the same event
    gsd_override: float | None = None
    metadata: dict = field(default_factory=dict)


@dataclass
class ImportResult:
    event: Event
    event_created: bool
    layers: list[Layer]
    status: dict[str, str]  # file_name → created | new version | unchanged
    skipped_files: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        """The ``--json`` summary of the commands."""
        return {
            "event": self.event.slug,
            "event_created": self.event_created,
            "disaster_type": self.event.disaster_type,
            "layers": [layer_summary(l, self.status.get(l.file_name, "")) for l in self.layers],
            "skipped_files": self.skipped_files,
        }


def layer_summary(layer: Layer, status: str = "") -> dict:
    out = {
        "file_name": layer.file_name,
        "kind": str(layer.kind),
        "modality": layer.modality,
        "phase": layer.phase,
        "frame": str(layer.frame),
        "crs": layer.crs,
        "gsd_m": layer.gsd_m,
    }
    if layer.kind == Layer.Kind.VECTOR:
        out["feature_count"] = layer.feature_count
    else:
        out.update(width=layer.width, height=layer.height, band_count=layer.band_count)
    if layer.kind == Layer.Kind.MASK:
        out["class_map"] = layer.class_map
        out["class_counts"] = layer.class_counts
        out["annotates"] = layer.annotates.file_name if layer.annotates_id else None
    out.update(path=layer.path, tiles_path=layer.tiles_path, status=status)
    return out


# ---------------------------------------------------------------- helpers


def _max_pixels() -> int:
    return int(settings.STUDIO_MAX_RASTER_PIXELS)


def _data_root() -> Path:
    return Path(settings.STUDIO_DATA_ROOT)


def _fingerprint(files, **options) -> str:
    import hashlib

    h = hashlib.sha256()
    h.update(sha256_files(files).encode())
    h.update(json.dumps({"v": IMPORTER_VERSION, **options}, sort_keys=True, default=str).encode())
    return h.hexdigest()


def _stored_name(file_name: str, ext: str) -> str:
    """``x.tif`` stays ``x.tif``; ``x.png`` becomes ``x.png.tif`` (unique per file name)."""
    return file_name if file_name.lower().endswith(ext) else f"{file_name}{ext}"


def _check_slug(slug: str | None, source) -> str:
    if not slug:
        raise DataImportError(source, "--event", "an event slug is required")
    s = slugify(slug)
    if s != slug:
        raise DataImportError(source, "--event", f"'{slug}' is not a slug (letters, digits, - and _); try '{s}'")
    return slug


def load_class_map(value) -> dict[str, str]:
    """A class map from a dict, a JSON string or a path to a JSON file → ``{"0": label, ...}``."""
    if value is None:
        return {}
    source = None
    if isinstance(value, (str, Path)) and not str(value).lstrip().startswith("{"):
        source = Path(value)
        try:
            value = json.loads(source.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise DataImportError(source, "--class-map", f"cannot be read as JSON ({exc})") from None
    elif isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise DataImportError(None, "--class-map", f"invalid JSON ({exc})") from None
    try:
        return normalize_class_map(value)
    except ValueError as exc:
        raise DataImportError(source, "--class-map", str(exc)) from None


def _copy_originals(spec: LayerSpec, staging: Path) -> list[str]:
    rels = []
    for src in spec.originals:
        rel = Path("original") / src.name
        dst = staging / rel
        if not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
        rels.append(rel.as_posix())
    return rels


# ---------------------------------------------------------------- the transactional core


def _run_import(*, slug: str, source: str, specs: list[LayerSpec], event_defaults: dict,
                event_metadata: dict, skipped_files: list[str] | None = None,
                explicit_type: bool = False) -> ImportResult:
    root = _data_root()
    event_rel = Path("events") / slug
    event_dir = root / event_rel
    names = [s.file_name for s in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise DataImportError(source, "file_name", f"two layers would share the name(s) {dupes}")

    existing_event = Event.objects.filter(slug=slug).first()
    existing = {l.file_name: l for l in existing_event.layers.all()} if existing_event else {}
    in_bucket = storage.uses_bucket()
    fetched: list[Path] = []
    if in_bucket:  # this machine's cache holds the event's current files: compared, archived, backed up
        fetched = _fill_cache(existing.values(), root)

    def unchanged(spec: LayerSpec) -> bool:
        layer = existing.get(spec.file_name)
        return bool(layer and (layer.metadata or {}).get("fingerprint") == spec.fingerprint
                    and layer.path and (root / layer.path).exists())

    (root / "tmp").mkdir(parents=True, exist_ok=True)
    sweep_staging(root)
    staging = Path(os.path.join(root, "tmp", staging_name("import-")))
    staging.mkdir()
    backup = staging.with_name(staging.name + "-backup")
    moved: list[tuple[Path, Path | None]] = []  # (destination, backup copy or None)
    uploaded: list[tuple[Path, Path | None]] = []  # with a bucket: the objects written, as ``moved``
    renamed_dir = False
    try:
        built: dict[str, dict] = {}
        for spec in specs:
            if unchanged(spec):
                continue
            try:
                info = spec.build(staging)
            except DataImportError:
                raise
            except Exception as exc:  # a library error while building: name the source file
                src = spec.originals[0] if spec.originals else spec.file_name
                raise DataImportError(src, spec.file_name, f"{type(exc).__name__}: {exc}") from exc
            info["original_paths"] = [(event_rel / r).as_posix() for r in _copy_originals(spec, staging)]
            built[spec.file_name] = info

        status: dict[str, str] = {}
        with transaction.atomic():
            # the layers whose content may change are locked (in id order, as releases' pin_layers
            # locks them): a release created meanwhile pins either the old version, whose files
            # this import then keeps, or waits and pins the new one
            rebuilt = sorted(existing[n].pk for n in built if n in existing)
            list(Layer.objects.select_for_update().filter(pk__in=rebuilt).order_by("id").values_list("pk", flat=True))
            event, created = Event.objects.get_or_create(slug=slug, defaults=event_defaults)
            if not created:  # fill what is empty; an explicit disaster type replaces the old one
                for k, v in event_defaults.items():
                    if v and (not getattr(event, k) or (k == "disaster_type" and explicit_type)):
                        setattr(event, k, v)
            meta = dict(event.metadata or {})
            sources = dict(meta.get("sources") or {})
            sources[source] = event_metadata
            meta["sources"] = sources
            event.metadata = meta
            event.save()

            layers: dict[str, Layer] = {}
            versioned: list[Layer] = []  # created layers and new versions: their version row after the move
            for spec in specs:
                layer = existing.get(spec.file_name)
                info = built.get(spec.file_name)
                if info is None:  # unchanged: only descriptive fields may change
                    status[spec.file_name] = "unchanged"
                    updates = {"name": spec.name, "modality": spec.modality, "phase": spec.phase}
                    if spec.gsd_override is not None:
                        updates["gsd_m"] = spec.gsd_override
                    dirty = [k for k, v in updates.items() if getattr(layer, k) != v]
                    for k in dirty:
                        setattr(layer, k, updates[k])
                    if dirty:
                        layer.save(update_fields=dirty)
                    layers[spec.file_name] = layer
                    continue
                fields = _row_fields(spec, info, event_rel, staging)
                if layer is None:
                    layer = Layer.objects.create(event=event, file_name=spec.file_name, **fields)
                    status[spec.file_name] = "created"
                    versioned.append(layer)
                else:
                    superseded = layer_versions.ensure_version(layer)  # the content being replaced
                    new_sha = layer_versions.content_sha256(
                        _staged_fields({**fields, "file_name": spec.file_name}, event_rel), staging)
                    for k, v in fields.items():
                        setattr(layer, k, v)
                    layer.save()
                    if layer_versions.is_current(superseded, layer, new_sha):
                        status[spec.file_name] = "unchanged"  # other options, the same content
                    else:
                        status[spec.file_name] = "new version"
                        # the versions on the files about to be replaced: a release's keep their files
                        moved.extend((p, None) for p in layer_versions.supersede(layer, slug))
                        versioned.append(layer)
                layers[spec.file_name] = layer

            for spec in specs:
                layer = layers[spec.file_name]
                target = None
                if spec.annotates:
                    target = layers.get(spec.annotates) or event.layers.filter(file_name=spec.annotates).first()
                    if target is None:
                        raise DataImportError(spec.file_name, "annotates",
                                              f"no layer '{spec.annotates}' in event {slug}")
                if layer.annotates_id != (target.pk if target else None):
                    layer.annotates = target
                    layer.save(update_fields=["annotates"])
                if target is not None and layer.kind == Layer.Kind.MASK:
                    # one GT mask per image: the replay engine takes the mask that annotates it
                    Layer.objects.filter(event=event, kind=Layer.Kind.MASK, annotates=target).exclude(
                        pk=layer.pk).update(annotates=None)

            # last step inside the transaction: move the files into place
            staged_files = [p for p in staging.rglob("*") if p.is_file()]
            if staged_files:
                if not event_dir.exists():
                    event_dir.parent.mkdir(parents=True, exist_ok=True)
                    os.rename(staging, event_dir)
                    renamed_dir = True
                else:
                    for src in staged_files:
                        rel = src.relative_to(staging)
                        dst = event_dir / rel
                        dst.parent.mkdir(parents=True, exist_ok=True)
                        keep = None
                        if dst.exists():
                            keep = backup / rel
                            keep.parent.mkdir(parents=True, exist_ok=True)
                            os.replace(dst, keep)
                        moved.append((dst, keep))
                        os.replace(src, dst)
            for layer in versioned:  # the new content in place: its version (content digest of the files)
                layer_versions.ensure_version(layer)
            if in_bucket:  # the bucket is where every machine reads them: each file to its key
                written = ([(p, None) for p in sorted(event_dir.rglob("*")) if p.is_file()] if renamed_dir
                           else list(moved))
                for dst, keep in written:
                    storage.upload_file(_key_of(dst, root), dst)
                    uploaded.append((dst, keep))
                transaction.on_commit(lambda done=[d for d, _ in uploaded] + fetched: _drop_local(done, event_dir))
    except BaseException:
        for dst, keep in reversed(uploaded):  # the bucket as it was: replaced objects back, new ones gone
            try:
                if keep is not None:
                    storage.upload_file(_key_of(dst, root), keep)
                else:
                    storage.delete(_key_of(dst, root))
            except Exception:  # noqa: BLE001 - the import's own error is the one to raise
                logger.exception("import %s: could not restore the bucket's object of %s", slug, dst)
        if renamed_dir:
            shutil.rmtree(event_dir, ignore_errors=True)
        for dst, keep in reversed(moved):
            try:
                if keep is not None:
                    os.replace(keep, dst)
                else:
                    dst.unlink(missing_ok=True)
            except OSError:
                pass
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(backup, ignore_errors=True)
        try:
            (root / "tmp").rmdir()  # only when empty: other imports may be staging there
        except OSError:
            pass

    ordered = [layers[s.file_name] for s in specs]
    return ImportResult(event=event, event_created=created, layers=ordered, status=status,
                        skipped_files=list(skipped_files or []))


def _key_of(path: Path, root: Path) -> str:
    """The bucket key of a file under the data root (``storage.key`` of its relative parts)."""
    return storage.key(*path.relative_to(root).parts)


def _fill_cache(layers, root: Path) -> list[Path]:
    """With a bucket: make this machine's data root hold the current files of ``layers`` (stored
    file checked against ``Layer.sha256``, tile file, originals) through ``storage.local_copy``, so
    the import compares, archives and backs them up as it does on a local data root. A file the
    bucket lacks, or whose object is not the row's content, stays missing here (read as missing,
    as on a local data root). Returns the files it downloaded (not here before), which the import
    removes again once committed."""
    fetched = []
    for layer in layers:
        rels = [(layer.path, layer.sha256 or ""), (layer.tiles_path, "")]
        rels += [(r, "") for r in (layer.metadata or {}).get("original_paths") or []]
        for rel, sha in rels:
            if not rel:
                continue
            was_here = (root / rel).is_file()
            try:
                path = storage.local_copy(rel, sha)
            except (FileNotFoundError, ValueError):
                continue
            if not was_here:
                fetched.append(path)
    return fetched


def push_layers_to_bucket() -> dict:
    """Copy the layer files of this machine's data root that the bucket lacks to their keys: what a
    deployment runs once when it turns ``STUDIO_STORAGE_URL`` on over layers imported before
    (``manage.py push_layers``). For each ``Layer`` its stored file (only when its SHA-256 is the
    row's), tile file and originals, and the files of every ``LayerVersion`` (archived versions a
    release pins); an object already there is left alone, so a second run uploads nothing.
    Returns ``{"uploaded": [keys], "present": number already there, "missing": [keys with no
    usable local file]}``. Raises ``ValueError`` without a bucket."""
    if not storage.uses_bucket():
        raise ValueError("STUDIO_STORAGE_URL names no bucket: there is nowhere to push the layers to")
    root = _data_root()
    wanted: dict[str, str] = {}  # key -> expected sha256 ("" unknown)
    for layer in Layer.objects.order_by("id").iterator():
        for rel, sha in [(layer.path, layer.sha256 or ""), (layer.tiles_path, "")] + [
                (r, "") for r in (layer.metadata or {}).get("original_paths") or []]:
            if rel:
                wanted.setdefault(rel, sha)
    for version in LayerVersion.objects.order_by("id").iterator():
        for rel in version.files or []:
            wanted.setdefault(rel, version.snapshot.get("sha256", "") if rel == version.snapshot.get("path") else "")
    report = {"uploaded": [], "present": 0, "missing": []}
    for rel, sha in sorted(wanted.items()):
        name = storage.key(*rel.split("/"))
        if storage.exists(name):
            report["present"] += 1
            continue
        local = root / rel
        if not local.is_file() or (sha and sha256_file(local) != sha):
            report["missing"].append(name)
            continue
        storage.upload_file(name, local)
        report["uploaded"].append(name)
    return report


def _drop_local(paths: list[Path], event_dir: Path) -> None:
    """After an import's commit with a bucket: remove the local files it wrote or fetched (they are
    in the bucket; a reader here fills its cache again on demand) and the folders left empty."""
    for p in paths:
        p.unlink(missing_ok=True)
    for d in sorted((d for d in event_dir.rglob("*") if d.is_dir()), key=lambda d: -len(d.parts)) + [event_dir]:
        try:
            d.rmdir()
        except OSError:
            pass


def _staged_fields(fields: dict, event_rel: Path) -> dict:
    """``fields`` (paths relative to the data root, under ``event_rel``) with the stored file and
    originals relative to the staging folder instead, where they are before the move."""
    def inner(p: str) -> str:
        return Path(p).relative_to(event_rel).as_posix()

    meta = dict(fields.get("metadata") or {})
    meta["original_paths"] = [inner(p) for p in meta.get("original_paths") or []]
    return {**fields, "path": inner(fields["path"]), "metadata": meta}


def _row_fields(spec: LayerSpec, info: dict, event_rel: Path, staging: Path) -> dict:
    path = info["path"]
    tiles = info.get("tiles_path") or ""
    meta = dict(spec.metadata)
    meta["fingerprint"] = spec.fingerprint
    meta["original_paths"] = info.get("original_paths", [])
    meta["source_sha256"] = {p.name: sha256_file(p) for p in spec.originals}
    for k in ("band_details", "nodata", "pixel_size_m", "transform", "georeferencing", "driver",
              "source_crs", "crs_assumed", "geometry_types", "fields", "invalid_geometries", "stats",
              "crs_wkt", "rgb_bands", "crosses_antimeridian", "antimeridian_split"):
        if k in info and info[k] is not None:
            meta[k] = info[k]
    gsd = spec.gsd_override if spec.gsd_override is not None else info.get("gsd_m")
    return {
        "name": spec.name,
        "kind": spec.kind,
        "modality": spec.modality,
        "phase": spec.phase,
        "path": (event_rel / path).as_posix(),
        "tiles_path": (event_rel / tiles).as_posix() if tiles else "",
        "frame": info.get("frame", Layer.Frame.GEOGRAPHIC),
        "crs": info.get("crs", ""),
        "gsd_m": gsd,
        "width": info.get("width"),
        "height": info.get("height"),
        "band_count": info.get("band_count"),
        "bands": info.get("bands", []),
        "dtype": info.get("dtype", ""),
        "bounds": info.get("bounds"),
        "feature_count": info.get("feature_count"),
        "class_map": info.get("class_map", {}),
        "class_counts": info.get("class_counts", {}),
        "sha256": sha256_file(staging / path),
        "metadata": meta,
    }


# ---------------------------------------------------------------- builders


def _raster_builder(src: Path, file_name: str, *, kind: str = "raster", band: int | None = None,
                    class_map: dict | None = None, expect_size: tuple[int, int] | None = None):
    def build(staging: Path) -> dict:
        raster_imp.check_pixel_limit(src, _max_pixels())
        stem = _stored_name(file_name, ".tif")[: -len(".tif")]
        info = raster_imp.store_raster(src, staging, stem, kind=kind, band=band)
        if expect_size and (info["width"], info["height"]) != tuple(expect_size):
            raise DataImportError(src, "size", f"{info['width']}x{info['height']} does not match the image it "
                                               f"annotates ({expect_size[0]}x{expect_size[1]})")
        if kind == "mask":
            mask = raster_imp.read_mask(staging / info["path"])
            counts = raster_imp.class_counts(mask, class_map)
            raster_imp.check_mask_values(src, counts, class_map or {})
            info.update(class_map=class_map or {}, class_counts=counts, bands=["class"])
        return info
    return build


def _array_mask_builder(make_array, file_name: str, class_map: dict):
    def build(staging: Path) -> dict:
        stem = _stored_name(file_name, ".tif")[: -len(".tif")]
        mask = make_array()
        info = raster_imp.store_mask_array(mask, staging, stem)
        info.update(class_map=class_map, class_counts=raster_imp.class_counts(mask, class_map), bands=["class"])
        return info
    return build


def _geojson_builder(make_fc, file_name: str, frame: str, crs: str = ""):
    def build(staging: Path) -> dict:
        stored = _stored_name(file_name, ".geojson")
        fc = make_fc()
        if frame == Layer.Frame.GEOGRAPHIC:
            fc = with_crs84(fc)
        info = xbd_imp.write_geojson(staging / stored, fc)
        info.update(path=stored, frame=frame, crs=crs)
        return info
    return build


# ---------------------------------------------------------------- xBD folders


def _georeference(label: xbd_imp.XbdLabel | None, fit: xbd_imp.AffineFit | None) -> dict:
    if label is None or fit is None:
        return {}
    return {**fit.as_dict(), "lnglat_bounds": xbd_imp.lnglat_bounds(fit, label.width, label.height),
            "fitted_from": label.path.name}


def _gsd(label, fit, explicit: float | None):
    """(gsd_m, source). The fit measures the tile's real pixel spacing; xBD's ``metadata.gsd`` is
    the sensor's multispectral GSD (about 4–6× larger than the tile's pixels), kept as a fallback."""
    if explicit is not None:
        return float(explicit), "explicit"
    if fit is not None and fit.rms_px < 1.0:
        return fit.gsd_m, "affine_fit"
    if label is not None and label.metadata.get("gsd"):
        return float(label.metadata["gsd"]), "label_metadata.gsd"
    return None, ""


def _label_meta(label) -> dict:
    if label is None:
        return {}
    keep = ("sensor", "provider_asset_type", "gsd", "pan_resolution", "capture_date", "off_nadir_angle",
            "sun_azimuth", "sun_elevation", "target_azimuth", "disaster", "disaster_type", "catalog_id",
            "img_name", "id")
    return {k: label.metadata[k] for k in keep if k in label.metadata}


def import_xbd_folder(path, *, event_slug: str | None = None, disaster_type: str | None = None,
                      mask=None, class_map=None, gsd: float | None = None,
                      name: str | None = None) -> ImportResult:
    """Import an xBD-style folder: tiles ``<disaster>_<8 digits>_…`` with any of
    pre/post images (``_disaster.png`` or ``_original.png``), label JSONs, ``_target.png``,
    ``_b1.png``, a class ``_mask.png`` with ``_bounding_boxes.csv``/``_damage_statistics.csv``.

    Per tile: the images (optical, pixel frame, GSD from the labels' affine fit); one GT damage
    mask that ``annotates`` the post image (``mask`` if given, else rasterised from the post labels
    as ``<tile>_damage_mask.tif``, else the folder's ``_mask.png``); building footprints per label
    (``<label>_buildings.geojson`` in pixels, ``<label>_buildings_lnglat.geojson`` in EPSG:4326);
    ``_target.png``/``_b1.png`` as reference masks (not linked); bounding boxes as pixel GeoJSON.
    ``event_slug`` defaults to the tiles' disaster name (``socal-fire``).
    """
    folder = Path(path)
    if not folder.is_dir():
        raise DataImportError(folder, "path", "not a directory")
    tiles, skipped = xbd_imp.discover_tiles(folder)
    if not tiles:
        raise DataImportError(folder, "files", "no xBD tile files (<disaster>_<8 digits>_...) found")
    disasters = sorted({t.disaster for t in tiles.values()})
    slug = event_slug or (disasters[0] if len(disasters) == 1 else slugify(folder.name))
    _check_slug(slug, folder)
    explicit_map = load_class_map(class_map) if class_map is not None else None

    mask_path = Path(mask) if mask else None
    mask_tile = None
    if mask_path is not None:
        if not mask_path.is_file():
            raise DataImportError(mask_path, "--mask", "file not found")
        m = xbd_imp.TILE_RE.match(mask_path.stem)
        mask_tile = m.group("tile") if m and m.group("tile") in tiles else None
        if mask_tile is None:
            if len(tiles) != 1:
                raise DataImportError(mask_path, "--mask", f"names none of the tiles {sorted(tiles)}")
            mask_tile = next(iter(tiles))

    specs: list[LayerSpec] = []
    meta_tiles: dict[str, dict] = {}
    label_types = []
    for tile_id, tile in sorted(tiles.items()):
        f = tile.files
        labels = {ph: xbd_imp.parse_label(f[f"{ph}_label"]) for ph in ("pre", "post") if f"{ph}_label" in f}
        fits = {ph: xbd_imp.fit_affine(lb) for ph, lb in labels.items()}
        for lb in labels.values():
            if lb.metadata.get("disaster_type"):
                label_types.append(lb.metadata["disaster_type"])
        meta_tiles[tile_id] = {"files": sorted(p.name for p in f.values()),
                               "labels": {ph: _label_meta(lb) for ph, lb in labels.items()},
                               "affine_fit": {ph: (ft.as_dict() if ft else None) for ph, ft in fits.items()}}

        images: dict[str, str] = {}
        sizes: dict[str, tuple[int, int]] = {}
        for ph in ("pre", "post"):
            img = f.get(f"{ph}_image")
            if img is None:
                continue
            label, fit = labels.get(ph), fits.get(ph)
            g, g_src = _gsd(label, fit, gsd)
            with raster_imp.open_raster(img) as src:
                sizes[ph] = (src.width, src.height)
            images[ph] = img.name
            specs.append(LayerSpec(
                file_name=img.name, kind=Layer.Kind.RASTER, name=f"{tile_id} {ph}-disaster image",
                build=_raster_builder(img, img.name), fingerprint=_fingerprint([img]), originals=[img],
                modality="optical", phase=ph, gsd_override=g,
                metadata={"tile": tile_id, "gsd_source": g_src, "label": _label_meta(label),
                          "georeference": _georeference(label, fit)},
            ))

        # the GT damage mask (one per tile, linked to the post image)
        post_label, post_fit = labels.get("post"), fits.get("post")
        g, g_src = _gsd(post_label, post_fit, gsd)
        gt_common = dict(kind=Layer.Kind.MASK, modality="damage", phase="post", annotates=images.get("post"),
                         gsd_override=g)
        gt_meta = {"tile": tile_id, "role": "gt", "gsd_source": g_src,
                   "georeference": _georeference(post_label, post_fit)}
        stats = xbd_imp.read_damage_statistics(f["damage_statistics"]) if "damage_statistics" in f else None
        if stats is not None:
            gt_meta["building_counts"] = stats
        cmap = explicit_map or DAMAGE_CLASS_MAP
        if mask_tile == tile_id:
            specs.append(LayerSpec(
                file_name=mask_path.name, name=f"{tile_id} damage mask (given)",
                build=_raster_builder(mask_path, mask_path.name, kind="mask", band=1, class_map=cmap,
                                      expect_size=sizes.get("post")),
                fingerprint=_fingerprint([mask_path], class_map=cmap), originals=[mask_path],
                metadata={**gt_meta, "source": "--mask"}, **gt_common))
        elif post_label is not None:
            fn = f"{tile_id}_damage_mask.tif"
            w, h = sizes.get("post", (post_label.width, post_label.height))
            specs.append(LayerSpec(
                file_name=fn, name=f"{tile_id} damage mask (from labels)",
                build=_array_mask_builder(lambda lb=post_label, w=w, h=h: xbd_imp.rasterize_damage(lb, w, h),
                                          fn, DAMAGE_CLASS_MAP),
                fingerprint=_fingerprint([post_label.path], size=[w, h]), originals=[post_label.path],
                metadata={**gt_meta, "source": "rasterised from post-disaster label xy polygons"}, **gt_common))
        elif "mask" in f:
            mp = f["mask"]
            specs.append(LayerSpec(
                file_name=mp.name, name=f"{tile_id} damage mask",
                build=_raster_builder(mp, mp.name, kind="mask", band=1, class_map=cmap,
                                      expect_size=sizes.get("post")),
                fingerprint=_fingerprint([mp], class_map=cmap), originals=[mp],
                metadata={**gt_meta, "source": "class mask PNG (coding of its SOURCE.md: 0 background, "
                                               "1 no-damage, 2 minor, 3 major, 4 destroyed)"}, **gt_common))
        if "mask_color" in f:
            skipped.append(f["mask_color"].name)

        # reference masks: official xBD targets, Microsoft's _b1 rendering (not linked)
        for role, phase, cmap_ref, what in (
            ("pre_target", "pre", BUILDING_CLASS_MAP, "xBD localisation target"),
            ("post_target", "post", DAMAGE_CLASS_MAP, "xBD damage target"),
            ("post_mask_b1", "post", DAMAGE_CLASS_MAP, "damage mask (building-damage-assessment-cnn-siamese)"),
        ):
            if role not in f:
                continue
            mp = f[role]
            specs.append(LayerSpec(
                file_name=mp.name, kind=Layer.Kind.MASK, name=f"{tile_id} {what}",
                build=_raster_builder(mp, mp.name, kind="mask", band=1, class_map=cmap_ref,
                                      expect_size=sizes.get(phase)),
                fingerprint=_fingerprint([mp], class_map=cmap_ref), originals=[mp],
                modality="building" if role == "pre_target" else "damage", phase=phase,
                gsd_override=_gsd(labels.get(phase), fits.get(phase), gsd)[0],
                metadata={"tile": tile_id, "role": "reference", "source": what,
                          "georeference": _georeference(labels.get(phase), fits.get(phase))}))

        # footprints
        for ph, label in labels.items():
            fit = fits.get(ph)
            stem = label.path.stem
            common = dict(kind=Layer.Kind.VECTOR, modality="buildings", phase=ph, originals=[label.path])
            specs.append(LayerSpec(
                file_name=f"{stem}_buildings.geojson", name=f"{tile_id} {ph} buildings (pixels)",
                build=_geojson_builder(lambda lb=label: xbd_imp.footprints_pixel(lb),
                                       f"{stem}_buildings.geojson", Layer.Frame.PIXEL),
                fingerprint=_fingerprint([label.path], frame="pixel"),
                annotates=None, metadata={"tile": tile_id, "image": images.get(ph),
                                          "georeference": _georeference(label, fit)}, **common))
            if label.has_lng_lat or fit is not None:
                specs.append(LayerSpec(
                    file_name=f"{stem}_buildings_lnglat.geojson", name=f"{tile_id} {ph} buildings (lon/lat)",
                    build=_geojson_builder(lambda lb=label, ft=fit: xbd_imp.footprints_lnglat(lb, ft) or
                                           {"type": "FeatureCollection", "features": []},
                                           f"{stem}_buildings_lnglat.geojson", Layer.Frame.GEOGRAPHIC, "EPSG:4326"),
                    fingerprint=_fingerprint([label.path], frame="lnglat"),
                    metadata={"tile": tile_id, "image": images.get(ph)}, **common))

        if "bounding_boxes" in f:
            bb = f["bounding_boxes"]
            fn = f"{bb.stem}.geojson"
            specs.append(LayerSpec(
                file_name=fn, kind=Layer.Kind.VECTOR, name=f"{tile_id} building boxes (pixels)",
                build=_geojson_builder(lambda p=bb: xbd_imp.read_bounding_boxes(p), fn, Layer.Frame.PIXEL),
                fingerprint=_fingerprint([bb]), originals=[bb], modality="buildings", phase="post",
                metadata={"tile": tile_id, "image": images.get("post"), "building_counts": stats}))
        if "damage_statistics" in f and "bounding_boxes" not in f and "mask" not in f:
            skipped.append(f["damage_statistics"].name)

    dtype = disaster_type or disaster_type_for(" ".join(disasters), label_types[0] if label_types else None)
    return _run_import(
        slug=slug, source=str(folder.resolve()), specs=specs, skipped_files=skipped,
        event_defaults={"name": name or f"{', '.join(disasters)} (xBD)", "disaster_type": dtype,
                        "source": str(folder.resolve())[:500]},
        event_metadata={"kind": "xbd", "tiles": meta_tiles, "skipped_files": skipped},
        explicit_type=bool(disaster_type),
    )


# ---------------------------------------------------------------- single rasters, vectors, OSM


def _event_defaults(slug: str, src: Path, name, disaster_type) -> dict:
    return {"name": name or slug, "disaster_type": disaster_type or disaster_type_for(slug) or "",
            "source": str(src.resolve())[:500]}


def import_raster_file(path, *, event_slug: str, modality: str | None = None, phase: str = "",
                       gsd: float | None = None, kind: str = "raster", class_map=None, band: int | None = None,
                       annotates: str | None = None, file_name: str | None = None, name: str | None = None,
                       disaster_type: str | None = None) -> ImportResult:
    """Import one raster (GeoTIFF, COG, PNG, ...) as a layer of ``event_slug``.

    ``kind="mask"`` keeps one band (``band``, default 1) as class indices with ``class_map``
    (default: the damage classes) and counts its pixels; ``annotates`` names an image layer of
    the event. ``modality`` defaults to "optical" for RGB(A) rasters.
    """
    src = Path(path)
    slug = _check_slug(event_slug, src)
    if not src.is_file():
        raise DataImportError(src, "path", "file not found")
    if kind not in (Layer.Kind.RASTER, Layer.Kind.MASK):
        raise DataImportError(src, "kind", f"'{kind}' is not raster or mask")
    raster_imp.check_pixel_limit(src, _max_pixels())  # the header only: before any pixel is read
    info = raster_imp.raster_info(src)  # validates the file before anything is written
    raster_imp.check_has_data(src)  # an all-nodata raster is refused, not stored as an empty layer
    cmap = (load_class_map(class_map) if class_map is not None else DAMAGE_CLASS_MAP) if kind == "mask" else {}
    if kind == "mask":
        band = band or 1
    if modality is None:
        modality = "damage" if kind == "mask" else ("optical" if {"R", "G", "B"} <= set(info["bands"]) else "")
    fn = file_name or src.name
    spec = LayerSpec(
        file_name=fn, kind=kind, name=name or src.stem, modality=modality, phase=phase or "",
        build=_raster_builder(src, fn, kind=kind, band=band, class_map=cmap),
        fingerprint=_fingerprint([src], kind=kind, band=band, class_map=cmap), originals=[src],
        annotates=annotates, gsd_override=gsd,
        metadata={"source_frame": info["frame"], "source_crs": info["crs"], "gsd_source": "explicit" if gsd else
                  ("raster" if info.get("gsd_m") else "")},
    )
    return _run_import(slug=slug, source=str(src.resolve()), specs=[spec],
                       event_defaults=_event_defaults(slug, src, name, disaster_type),
                       event_metadata={"kind": "raster", "file": src.name}, explicit_type=bool(disaster_type))


def _guess_vector_modality(name: str) -> str:
    low = name.lower()
    for keys, mod in ((("build", "bldg", "footprint"), "buildings"), (("road", "street", "highway"), "roads"),
                      (("poi", "amenit", "facilit", "station"), "pois"), (("damage", "dmg"), "damage"),
                      (("flood",), "flood"), (("boundar", "aoi", "admin", "poly"), "boundary")):
        if any(k in low for k in keys):
            return mod
    return "vector"


def import_vector_file(path, *, event_slug: str, layer: str | None = None, modality: str | None = None,
                       name: str | None = None, disaster_type: str | None = None) -> ImportResult:
    """Import a vector file (GeoJSON, Shapefile with sidecars, GeoPackage, ...) as EPSG:4326
    GeoJSON layer(s) named ``<stem>.geojson`` (``<stem>_<layer>.geojson`` for each layer of a
    multi-layer file, unless ``layer`` picks one). The original files are kept under ``original/``.
    """
    src = Path(path)
    slug = _check_slug(event_slug, src)
    if not src.is_file():
        raise DataImportError(src, "path", "file not found")
    layer_names = [layer] if layer else vector_imp.list_layers(src)
    if layer and layer not in vector_imp.list_layers(src):
        raise DataImportError(src, "--layer", f"no layer '{layer}' (layers: {vector_imp.list_layers(src)})")
    originals = vector_imp.source_files(src)
    specs = []
    stem = src.name[: -len(".geojson")] if src.name.lower().endswith(".geojson") else src.stem
    for ln in layer_names:
        fn = f"{stem}.geojson" if len(layer_names) == 1 else f"{stem}_{slugify(ln) or ln}.geojson"
        gdf, info = vector_imp.read_vector(src, ln if len(layer_names) > 1 or layer else None)

        def build(staging: Path, gdf=gdf, info=info, fn=fn) -> dict:
            vector_imp.write_geojson_4326(gdf, staging / fn)
            return {**info, "path": fn, "frame": Layer.Frame.GEOGRAPHIC, "crs": "EPSG:4326"}

        specs.append(LayerSpec(
            file_name=fn, kind=Layer.Kind.VECTOR, name=name or (ln if len(layer_names) > 1 else stem),
            modality=modality or _guess_vector_modality(f"{src.name} {ln}"), build=build,
            fingerprint=_fingerprint(originals, layer=ln), originals=originals,
            metadata={"source_file": src.name, "source_layer": ln}))
    return _run_import(slug=slug, source=str(src.resolve()), specs=specs,
                       event_defaults=_event_defaults(slug, src, name, disaster_type),
                       event_metadata={"kind": "vector", "file": src.name, "layers": layer_names},
                       explicit_type=bool(disaster_type))


def import_osm_file(path, *, event_slug: str, name: str | None = None,
                    disaster_type: str | None = None) -> ImportResult:
    """Import an OSM PBF as ``<stem>_roads.geojson`` (highway lines: highway, name, osmid, ...)
    and ``<stem>_pois.geojson`` (amenity/healthcare/emergency/shop/... points)."""
    src = Path(path)
    slug = _check_slug(event_slug, src)
    if not src.is_file():
        raise DataImportError(src, "path", "file not found")
    roads, pois, stats = osm_imp.extract(src)
    stem = src.name.split(".")[0]
    specs = []
    for fc, suffix, modality in ((roads, "roads", "roads"), (pois, "pois", "pois")):
        fn = f"{stem}_{suffix}.geojson"

        def build(staging: Path, fc=fc, fn=fn) -> dict:
            info = osm_imp.write(fc, staging / fn)
            return {**info, "path": fn, "frame": Layer.Frame.GEOGRAPHIC, "crs": "EPSG:4326", "stats": stats}

        specs.append(LayerSpec(file_name=fn, kind=Layer.Kind.VECTOR, name=f"{stem} {suffix} (OSM)",
                               modality=modality, build=build, fingerprint=_fingerprint([src], part=suffix),
                               originals=[src], metadata={"source_file": src.name, "licence": "ODbL 1.0, "
                                                          "(c) OpenStreetMap contributors"}))
    return _run_import(slug=slug, source=str(src.resolve()), specs=specs,
                       event_defaults=_event_defaults(slug, src, name, disaster_type),
                       event_metadata={"kind": "osm", "file": src.name, "stats": stats},
                       explicit_type=bool(disaster_type))
