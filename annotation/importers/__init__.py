"""Pure importers (no Django): read source files, write stored files into a target directory.

- :mod:`.xbd`: xBD labels, pixel↔lon/lat affine fit, damage rasterisation, footprints
- :mod:`.raster`: stored COG + web-mercator COG, masks and class counts
- :mod:`.vector`: GeoJSON / Shapefile / GeoPackage → EPSG:4326 GeoJSON
- :mod:`.osm`: OSM PBF → roads and POIs GeoJSON

Every failure is a :class:`DataImportError` naming the file, the field and the problem.
"""
from .common import BUILDING_CLASS_MAP, DAMAGE_CLASS_MAP, disaster_type_for, sha256_file
from .errors import DataImportError

__all__ = ["DataImportError", "DAMAGE_CLASS_MAP", "BUILDING_CLASS_MAP", "disaster_type_for", "sha256_file"]
