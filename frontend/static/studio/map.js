/*
 * StudioMap: the studio's reusable Leaflet map code (Leaflet 1.9, no network). An ES module
 * (`import { StudioMap } from "./map.js"`); Leaflet itself is django-leaflet's classic script (the
 * global `L`), which runs before any module script of the page (module scripts are deferred).
 *
 * A layer spec (what frontend.views.events.layer_map_spec() emits; overlays use the same shape):
 *   {
 *     id, name, kind: "raster"|"mask"|"vector", frame: "geographic"|"pixel", phase: "pre"|"post"|...,
 *     bounds: [west, south, east, north] lon/lat (geographic) or [0, 0, width, height] (pixel),
 *     width, height,                       // pixel frame
 *     tiles: "/tiles/3/{z}/{x}/{y}.png", minZoom, maxNativeZoom, maxZoom,   // geographic raster/mask
 *     image: "/layers/3/image.png",        // raster/mask drawn as one L.imageOverlay over bounds
 *     geojson: "/layers/3/geojson",  or data: {GeoJSON object}            // vector
 *     colorBy: ["subtype", ...], colorMap: {label: "#hex"}, color: "#hex", fill: false (outlines)  // vector styling
 *     legend: [{value, label, colour (null = transparent), count, from?: ["3 major-damage", ...],
 *               to?: ["seg.building_damage 2 partially damaged", ...]}],
 *     legendNote: "…",                     // masks; a replay's mask output: its GT class remap
 *     className, dashArray, radius         // vector styling: SVG class, dashes, point radius
 *     opacity: 0..1, visible: bool, error: "why it cannot be shown"
 *   }
 *
 * API (the export StudioMap):
 *   StudioMap.create(element, {frame, layers: [spec], layerOptions?: {id: {visible, opacity, pane}},
 *                              panel?: false, height?, wheelModifier?: false})
 *       -> controller (one map, its own layer panel; the wheel zooms only with Ctrl/⌘ unless
 *          wheelModifier is false, with a hint over the map)
 *       controller.map, .frame, .entries (id -> {spec, layer}), .addOverlay(spec) -> L.Layer,
 *       .removeOverlay(id), .setVisible(id, bool), .setOpacity(id, 0..1), .fit(), .destroy()
 *   StudioMap.viewer(element, {layers: [spec], mode?: "single"|"side"|"swipe", group?}) -> viewer
 *       a toolbar (layer group, view mode, left/right phase) over one map, two synced maps or a
 *       swipe map. Layers share a map by spec.group (default: spec.frame; the event page sends
 *       "geographic" and "pixel:<xBD tile>", with spec.groupLabel for the selector).
 *       viewer.controllers(), viewer.addOverlay(spec[, {visible, opacity, fit}]) (kept across mode
 *       changes; defaults to the group on screen), viewer.render(), viewer.destroy()
 *   StudioMap.addOverlay(controllerOrViewer, spec)  (same as .addOverlay)
 *   StudioMap.makeLayer(spec, {pane, opacity}) -> L.Layer;  StudioMap.PIXEL_CRS;  StudioMap.sync(mapA, mapB)
 *   StudioMap.fromScript(scriptId)  -> parses a {{ config|json_script:"id" }} block
 *   StudioMap.wheelWithModifier(leafletMap)  -> the Ctrl/⌘ + wheel rule and its hint, for a bare L.map
 *   StudioMap.commentPinStyle(resolved)  -> the L.circleMarker options of a comment's map pin: a white
 *       dot ringed in near-black, which stands out on every class colour of the damage palette and on
 *       dark or bright imagery (an amber ring vanished on a no-damage building's yellow); resolved: grey
 *
 * Pixel frame: L.CRS.Simple with L.Transformation(1, 0, 1, 0) (y grows down), so GeoJSON in pixel
 * [x = column, y = row] lines up with an image overlay over [[0, 0], [height, width]].
 */
export const StudioMap = (function () {

  var PIXEL_CRS = L.extend({}, L.CRS.Simple, { transformation: new L.Transformation(1, 0, 1, 0) });
  var RASTER_PANE = 'studioRaster';  // rasters and masks, under vectors (overlayPane 400)
  var LEFT_PANE = 'studioLeft';      // swipe: the left phase
  var SWIPE_PANE = 'studioSwipe';    // swipe: the right phase, clipped
  var PHASE_ORDER = { pre: 0, post: 1 };

  function esc(value) {
    return String(value === null || value === undefined ? '' : value).replace(/[&<>"']/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c];
    });
  }

  function el(tag, className, parent, text) {
    var node = L.DomUtil.create(tag, className || '', parent);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function specBounds(spec) {
    var b = spec.bounds;
    if (!b || b.length !== 4) {
      if (spec.frame === 'pixel' && spec.width && spec.height) b = [0, 0, spec.width, spec.height];
      else return null;
    }
    if (spec.frame === 'pixel') {
      // lat = row, lng = column
      return L.latLngBounds([[Math.min(b[1], b[3]), Math.min(b[0], b[2])], [Math.max(b[1], b[3]), Math.max(b[0], b[2])]]);
    }
    // RFC 7946: a box that crosses the antimeridian has west > east; Leaflet wants east + 360
    var east = b[2] < b[0] ? b[2] + 360 : b[2];
    return L.latLngBounds([[b[1], b[0]], [b[3], east]]);
  }

  function phaseLabel(phase) { return phase ? phase : ''; }

  function sortPhases(phases) {
    return phases.slice().sort(function (a, b) {
      var pa = a in PHASE_ORDER ? PHASE_ORDER[a] : 10, pb = b in PHASE_ORDER ? PHASE_ORDER[b] : 10;
      return pa === pb ? (a < b ? -1 : a > b ? 1 : 0) : pa - pb;
    });
  }

  /* ---------------------------------------------------------------- popups and vector styles */

  function formatValue(v) {
    if (v !== null && typeof v === 'object') v = JSON.stringify(v);
    v = String(v === null || v === undefined ? '' : v);
    return v.length > 240 ? v.slice(0, 240) + '…' : v;
  }

  function popupHtml(spec, feature) {
    var props = (feature && feature.properties) || {};
    var keys = Object.keys(props);
    var html = '<div class="studio-popup"><div class="studio-popup-title">' + esc(spec.name || 'feature') + '</div>';
    if (!keys.length) return html + '<div class="studio-muted">no attributes</div></div>';
    html += '<table>';
    keys.slice(0, 60).forEach(function (k) {
      html += '<tr><th>' + esc(k) + '</th><td>' + esc(formatValue(props[k])) + '</td></tr>';
    });
    if (keys.length > 60) html += '<tr><td colspan="2" class="studio-muted">… ' + (keys.length - 60) + ' more</td></tr>';
    return html + '</table></div>';
  }

  // at most this many features of one layer in a click's readout
  var IDENTIFY_MAX_FEATURES = 5;

  // whether a point lies in a ring of LatLngs (ray casting; lng as x, lat as y: the pixel frame's
  // CRS.Simple and small geographic extents alike)
  function ringContains(ring, ll) {
    var inside = false;
    for (var i = 0, j = ring.length - 1; i < ring.length; j = i++) {
      var a = ring[i], b = ring[j];
      if ((a.lat > ll.lat) !== (b.lat > ll.lat) &&
          ll.lng < (b.lng - a.lng) * (ll.lat - a.lat) / (b.lat - a.lat) + a.lng) inside = !inside;
    }
    return inside;
  }
  // Leaflet's polygon LatLngs: a ring, [outer, holes...], or a list of those (a multipolygon)
  function polygonContains(latlngs, ll) {
    if (!latlngs.length) return false;
    if (L.LineUtil.isFlat(latlngs)) return ringContains(latlngs, ll);
    if (L.LineUtil.isFlat(latlngs[0])) {
      if (!ringContains(latlngs[0], ll)) return false;
      for (var i = 1; i < latlngs.length; i++) if (ringContains(latlngs[i], ll)) return false;
      return true;
    }
    return latlngs.some(function (p) { return polygonContains(p, ll); });
  }
  function featureContains(layer, ll) {
    return layer instanceof L.Polygon && layer.getBounds().contains(ll) && polygonContains(layer.getLatLngs(), ll);
  }

  function featureColour(spec, feature) {
    var props = (feature && feature.properties) || {};
    var by = spec.colorBy || [];
    var cmap = spec.colorMap || {};
    var codes = spec.codeColours || {};
    for (var i = 0; i < by.length; i++) {
      var v = props[by[i]];
      if (v === undefined || v === null) continue;
      if (cmap[String(v).toLowerCase()]) return cmap[String(v).toLowerCase()];
      if (codes[by[i]] && codes[by[i]][String(v)]) return codes[by[i]][String(v)];  // numeric class codes (dmg)
    }
    return spec.color || '#00b7ff';
  }

  /* ---------------------------------------------------------------- one Leaflet layer per spec */

  function makeLayer(spec, options) {
    options = options || {};
    var opacity = options.opacity !== undefined ? options.opacity : (spec.opacity !== undefined ? spec.opacity : 1);
    var pane = options.pane;
    var bounds = specBounds(spec);
    var layer;
    var zIndex = spec.kind === 'raster' ? 1 : spec.kind === 'mask' ? 5 : 10;
    if (spec.tiles) {
      var tileOpts = {
        opacity: opacity, tileSize: 256, noWrap: true, keepBuffer: 1, zIndex: zIndex,
        minZoom: spec.minZoom || 0, maxNativeZoom: spec.maxNativeZoom, maxZoom: spec.maxZoom || 24,
        className: spec.kind === 'mask' ? 'studio-mask-layer' : ''
      };
      if (bounds) tileOpts.bounds = bounds.pad(0.01);
      if (pane) tileOpts.pane = pane;
      layer = L.tileLayer(spec.tiles, tileOpts);
    } else if (spec.image) {
      if (!bounds) throw new Error('image layer "' + spec.name + '" needs bounds or width/height');
      var imgOpts = { opacity: opacity, zIndex: zIndex, className: spec.kind === 'mask' ? 'studio-mask-layer' : '' };
      if (pane) imgOpts.pane = pane;
      layer = L.imageOverlay(spec.image, bounds, imgOpts);
    } else if (spec.geojson || spec.data) {
      var geoOpts = {
        style: function (feature) {
          var c = featureColour(spec, feature);
          var st = { color: c, weight: 2, opacity: Math.min(1, opacity + 0.1), fillColor: c, fillOpacity: spec.fill === false ? 0 : 0.25 * opacity };
          if (spec.className) st.className = spec.className;
          if (spec.dashArray) st.dashArray = spec.dashArray;
          return st;
        },
        pointToLayer: function (feature, latlng) {
          var c = featureColour(spec, feature);
          var mk = { radius: spec.radius || 5, color: '#fff', weight: 1, fillColor: c, fillOpacity: 0.9, pane: pane || 'markerPane' };
          if (spec.className) mk.className = spec.className;
          return L.circleMarker(latlng, mk);
        },
        // a feature's popup, unless the map is picking a location (a comment's pin): then the click
        // on the feature is the location (Leaflet's bindPopup would stop the click before the map)
        onEachFeature: function (feature, lyr) {
          lyr.on('click', function (e) {
            var map = lyr._map;
            if (!map) return;
            // drawing (leaflet-geoman): the click is a vertex on the map, passed through
            if (map.pm && map.pm.globalDrawModeEnabled && map.pm.globalDrawModeEnabled()) return;
            L.DomEvent.stop(e);
            if (map._studioPick) { map._studioPick(e.latlng); return; }
            map.fire('studio:identify', { latlng: e.latlng, hit: lyr });  // one readout of every layer there
          });
        }
      };
      if (pane) geoOpts.pane = pane;
      layer = L.geoJSON(null, geoOpts);
      layer._studioOpacity = opacity;
      var loaded = function (data) {
        layer.addData(data);
        layer.fire('studio:loaded');
      };
      if (spec.data) {
        loaded(spec.data);
      } else {
        layer._studioLoading = fetch(spec.geojson, { credentials: 'same-origin', headers: { Accept: 'application/geo+json, application/json' } })
          .then(function (r) { if (!r.ok) throw new Error('HTTP ' + r.status); return r.json(); })
          .then(loaded)
          .catch(function (err) { layer.fire('studio:error', { error: err }); });
      }
    } else {
      throw new Error('layer "' + spec.name + '" has no tiles, image or geojson');
    }
    layer.studioSpec = spec;
    return layer;
  }

  function setLayerOpacity(layer, value) {
    if (layer.setOpacity) { layer.setOpacity(value); return; }
    if (layer.setStyle) {
      layer._studioOpacity = value;
      layer.setStyle(function (feature) {
        var c = featureColour(layer.studioSpec || {}, feature);
        return { color: c, opacity: Math.min(1, value + 0.1), fillColor: c, fillOpacity: (layer.studioSpec || {}).fill === false ? 0 : 0.25 * value };
      });
    }
  }

  /* ---------------------------------------------------------------- the layer panel (switcher + opacity + legend) */

  // a map smaller than this (px) starts with its layer panel folded
  var SMALL_MAP = { x: 960, y: 560 };

  // a long layer name (an xBD tile id such as hurricane-florence_00000018_post_disaster.png) breaks
  // after '_', '-', '.' or '/' only, never inside its number
  function breakableName(node, text) {
    String(text).split(/(?<=[_.\-\/])/).forEach(function (part, i) {
      if (i) node.appendChild(document.createElement('wbr'));
      node.appendChild(document.createTextNode(part));
    });
  }

  var LayerPanel = L.Control.extend({
    options: { position: 'topright' },
    initialize: function (controller, options) { L.setOptions(this, options); this._ctl = controller; },
    onAdd: function () {
      var box = el('div', 'studio-panel leaflet-bar');
      L.DomEvent.disableClickPropagation(box);
      L.DomEvent.disableScrollPropagation(box);
      var head = el('div', 'studio-panel-head', box);
      el('span', 'studio-panel-title', head, 'Layers');
      var toggle = el('button', 'studio-panel-toggle', head, '–');
      toggle.type = 'button';
      toggle.title = 'Collapse';
      var self = this;
      L.DomEvent.on(toggle, 'click', function () {
        var collapsed = L.DomUtil.hasClass(box, 'collapsed');
        (collapsed ? L.DomUtil.removeClass : L.DomUtil.addClass)(box, 'collapsed');
        toggle.textContent = collapsed ? '–' : '+';
        toggle.title = collapsed ? 'Collapse' : 'Show the layers';
      });
      this._list = el('div', 'studio-panel-list', box);
      this._legend = el('div', 'studio-legend', box);
      this._box = box;
      // the panel scrolls inside the map (a CSS max-height in % has no height to refer to in
      // Leaflet's corner box): else a long layer list hid the legend below the map's edge
      var map = this._ctl.map;
      var fitHeight = function () { box.style.maxHeight = Math.max(120, map.getSize().y - 24) + 'px'; };
      fitHeight();
      map.on('resize', fitHeight);
      // on a small map the panel starts folded (its expanded 230-300 px covered a fifth of a
      // 1440 px page's map and a third of the task page's review map); one click unfolds it
      var size = this._ctl.map.getSize();
      if (size.x && (size.x < SMALL_MAP.x || size.y < SMALL_MAP.y)) {
        L.DomUtil.addClass(box, 'collapsed'); toggle.textContent = '+'; toggle.title = 'Show the layers';
      }
      this.refresh();
      return box;
    },
    refresh: function () {
      if (!this._list) return;
      var ctl = this._ctl, list = this._list, self = this;
      list.innerHTML = '';
      ctl._order.forEach(function (id) {
        var entry = ctl.entries[id];
        var spec = entry.spec;
        var row = el('div', 'studio-layer-row' + (spec.error ? ' disabled' : ''), list);
        var label = el('label', 'studio-layer-label', row);
        var cb = el('input', '', label);
        cb.type = 'checkbox';
        cb.checked = !!entry.visible;
        cb.disabled = !!spec.error;
        el('span', 'studio-kind studio-kind-' + (spec.kind || 'overlay'), label, (spec.kind || 'overlay').charAt(0).toUpperCase());
        var name = el('span', 'studio-layer-name', label);
        breakableName(name, spec.name || String(id));
        if (spec.phase) el('span', 'studio-phase', label, phaseLabel(spec.phase));
        name.title = spec.error ? spec.error : [spec.name, spec.kind, spec.phase, spec.file_name].filter(Boolean).join(' · ');
        L.DomEvent.on(cb, 'change', function () { ctl.setVisible(id, cb.checked); });
        if (!spec.error) {
          var range = el('input', 'studio-opacity', row);
          range.type = 'range'; range.min = 0; range.max = 1; range.step = 0.05;
          range.value = entry.opacity;
          range.title = 'Opacity';
          range.setAttribute('aria-label', 'Opacity of ' + (spec.name || id));
          L.DomEvent.on(range, 'input', function () { ctl.setOpacity(id, parseFloat(range.value)); });
        } else {
          el('div', 'studio-layer-error', row, spec.error);
        }
      });
      this.refreshLegend();
    },
    refreshLegend: function () {
      if (!this._legend) return;
      var ctl = this._ctl, box = this._legend;
      box.innerHTML = '';
      ctl._order.forEach(function (id) {
        var entry = ctl.entries[id];
        if (!entry.visible || !entry.spec.legend || !entry.spec.legend.length) return;
        var block = el('div', 'studio-legend-block', box);
        el('div', 'studio-legend-title', block, entry.spec.name);
        if (entry.spec.legendNote) el('div', 'studio-legend-note', block, entry.spec.legendNote);
        entry.spec.legend.forEach(function (row) {
          var item = el('div', 'studio-legend-item', block);
          var sw = el('span', 'studio-swatch' + (row.colour ? '' : ' transparent'), item);
          if (row.colour) sw.style.background = row.colour;
          // a remapped class names the ground-truth classes it is read from
          el('span', '', item, row.value + ' · ' + row.label + (row.from && row.from.length ? '  ← GT ' + row.from.join(', ') : '')
            + (row.to && row.to.length ? '  → ' + row.to.join(', ') : ''));  // a GT mask: how the task's perception steps read it
        });
      });
    }
  });

  /* ---------------------------------------------------------------- scale, cursor, wheel */

  // Leaflet's scale bar measures CRS.Simple distances in pixels: scaled by the GSD they are metres
  var PixelScale = L.Control.Scale.extend({
    _updateScales: function (maxPixels) {
      L.Control.Scale.prototype._updateScales.call(this, maxPixels * this.options.gsd);
    }
  });

  // the cursor's position: lat/lon on the globe, column/row (and metres from the origin with a GSD) in pixels
  var CursorReadout = L.Control.extend({
    onAdd: function (map) {
      var box = el('div', 'studio-cursor leaflet-bar');
      box.textContent = this.options.frame === 'pixel' ? 'x, y (px)' : 'lat, lon';
      var o = this.options;
      map.on('mousemove', function (e) {
        var ll = e.latlng;
        box.textContent = o.frame === 'pixel'
          ? 'col ' + Math.floor(ll.lng) + ' · row ' + Math.floor(ll.lat) + ' px' + (o.gsd ? ' · ' + (ll.lng * o.gsd).toFixed(1) + ', ' + (ll.lat * o.gsd).toFixed(1) + ' m' : '')
          : ll.lat.toFixed(6) + ', ' + ll.lng.toFixed(6);
      });
      return box;
    }
  });

  // every map sits in a scrolling page: the wheel scrolls the page; Ctrl (or ⌘) + wheel zooms
  // the map, and a plain wheel over it says so in an overlay
  function wheelWithModifier(map) {
    map.scrollWheelZoom.disable();
    var mac = /Mac|iPhone|iPad/.test(navigator.platform || '');
    var hint = el('div', 'studio-wheel-hint', map.getContainer(), (mac ? '⌘' : 'Ctrl') + ' + wheel zooms the map');
    var timer = null;
    map.getContainer().addEventListener('wheel', function (e) {
      if (!(e.ctrlKey || e.metaKey)) {
        hint.classList.add('shown');
        clearTimeout(timer);
        timer = setTimeout(function () { hint.classList.remove('shown'); }, 1200);
        return;
      }
      e.preventDefault();
      var at = map.mouseEventToLatLng(e);
      map.setZoomAround(at, map.getZoom() + (e.deltaY < 0 ? 1 : -1) * (map.options.zoomDelta || 1));
    }, { passive: false });
  }

  /* ---------------------------------------------------------------- one map */

  function create(element, config) {
    config = config || {};
    var frame = config.frame || ((config.layers || [])[0] || {}).frame || 'geographic';
    var pixel = frame === 'pixel';
    if (typeof element === 'string') element = document.getElementById(element);
    if (config.height) element.style.height = config.height;
    var map = L.map(element, {
      crs: pixel ? PIXEL_CRS : L.CRS.EPSG3857,
      minZoom: pixel ? -6 : 0,
      maxZoom: pixel ? 6 : 24,
      zoomSnap: pixel ? 0.25 : 1,
      zoomDelta: pixel ? 0.5 : 1,
      attributionControl: false,
      worldCopyJump: false
    });
    map.createPane(RASTER_PANE).style.zIndex = 300;
    map.createPane(LEFT_PANE).style.zIndex = 310;
    map.createPane(SWIPE_PANE).style.zIndex = 320;
    // a scale bar in both frames: metres on the globe; in the pixel frame, pixels × the rasters' GSD
    // (a maintainer may record it: annotation.services.layers) when one is known
    var gsd = null;
    (config.layers || []).forEach(function (s) { if (!gsd && s.gsd_m) gsd = s.gsd_m; });
    if (!pixel) L.control.scale({ imperial: false, position: 'bottomleft' }).addTo(map);
    else if (gsd) new PixelScale({ imperial: false, position: 'bottomleft', gsd: gsd }).addTo(map);
    if (pixel) map.getContainer().classList.add('studio-pixel-map');
    new CursorReadout({ position: 'bottomright', frame: frame, gsd: gsd }).addTo(map);
    if (config.wheelModifier !== false) wheelWithModifier(map);  // opt out only on a full-page map
    // click-to-identify: one readout of the visible layers under the click, the top one first
    // (vectors are drawn over rasters, a later layer over an earlier one): each vector layer's
    // features that contain the point (or the feature clicked), each raster's value and class name
    function identifyAt(ll, hit) {
      if (map.pm && map.pm.globalDrawModeEnabled && map.pm.globalDrawModeEnabled()) return;
      var ranked = ctl._order.map(function (id, k) { return { en: ctl.entries[id], k: k }; })
        .filter(function (r) { return r.en.visible && r.en.layer; })
        .map(function (r) { r.raster = !!(r.en.spec.tiles || r.en.spec.image); return r; })
        .sort(function (a, b) { return (a.raster - b.raster) || (b.k - a.k); });
      Promise.all(ranked.map(function (r) {
        var en = r.en;
        if (en.spec.valueUrl) {
          return fetch(en.spec.valueUrl + (en.spec.valueUrl.indexOf('?') < 0 ? '?' : '&') + 'x=' + encodeURIComponent(ll.lng) + '&y=' + encodeURIComponent(ll.lat), { credentials: 'same-origin' })
            .then(function (resp) { return resp.ok ? resp.json() : null; }).catch(function () { return null; })
            .then(function (v) { return v ? { spec: en.spec, value: v } : null; });
        }
        if (r.raster || !en.layer.eachLayer) return null;
        var feats = [];
        en.layer.eachLayer(function (f) { if (f === hit || featureContains(f, ll)) feats.push(f.feature); });
        return feats.length ? { spec: en.spec, features: feats } : null;
      })).then(function (rows) {
        var box = el('div', 'studio-identify');
        rows.forEach(function (row) {
          if (!row) return;
          if (row.features) {
            row.features.slice(0, IDENTIFY_MAX_FEATURES).forEach(function (f) {
              el('div', 'studio-identify-feature', box).innerHTML = popupHtml(row.spec, f);
            });
            if (row.features.length > IDENTIFY_MAX_FEATURES) {
              el('div', 'studio-muted', box, '… ' + (row.features.length - IDENTIFY_MAX_FEATURES) + ' more in ' + row.spec.name);
            }
            return;
          }
          var v = row.value;
          var line = el('div', 'studio-identify-raster', box);
          el('b', '', line, row.spec.name + ': ');
          line.appendChild(document.createTextNode(v.values === null ? 'outside the raster'
            : v.values.join(', ') + (v.label ? ' (' + v.label + ')' : '') + ' · col ' + v.col + ', row ' + v.row));
        });
        if (box.childNodes.length) L.popup({ maxWidth: 360, maxHeight: 360 }).setLatLng(ll).setContent(box).openOn(map);
      });
    }
    map.on('studio:identify', function (e) { identifyAt(e.latlng, e.hit); });
    map.on('click', function (e) {
      if (map._studioPick) { map._studioPick(e.latlng); return; }
      var t = e.originalEvent && e.originalEvent.target;
      if (t && t.classList && t.classList.contains('leaflet-interactive')) return;
      identifyAt(e.latlng, null);
    });

    var ctl = {
      map: map, frame: frame, entries: {}, _order: [], _panel: null, _pending: [],
      // the next click anywhere on the map, on a feature too (a building box, a step's polygon), is
      // handed to callback(latlng) instead of identifying; cancelPick() disarms it
      pickLocation: function (callback) {
        map.closePopup();
        map.getContainer().classList.add('studio-picking');
        map._studioPick = function (latlng) { ctl.cancelPick(); callback(latlng); };
      },
      cancelPick: function () {
        map._studioPick = null;
        map.getContainer().classList.remove('studio-picking');
      },
      addOverlay: function (spec, opts) { return addEntry(spec, opts || {}, true); },
      removeOverlay: function (id) {
        var entry = ctl.entries[id];
        if (!entry) return;
        map.removeLayer(entry.layer);
        delete ctl.entries[id];
        ctl._order = ctl._order.filter(function (x) { return x !== id; });
        if (ctl._panel) ctl._panel.refresh();
      },
      setVisible: function (id, visible) {
        var entry = ctl.entries[id];
        if (!entry || entry.spec.error) return;
        entry.visible = !!visible;
        if (visible) entry.layer.addTo(map); else map.removeLayer(entry.layer);
        if (ctl._panel) ctl._panel.refreshLegend();
      },
      setOpacity: function (id, value) {
        var entry = ctl.entries[id];
        if (!entry || entry.spec.error) return;
        entry.opacity = value;
        setLayerOpacity(entry.layer, value);
      },
      bounds: function () {
        var all = null;
        ctl._order.forEach(function (id) {
          var entry = ctl.entries[id];
          var b = specBounds(entry.spec);
          if (!b && entry.layer.getBounds && entry.layer.getLayers && entry.layer.getLayers().length) b = entry.layer.getBounds();
          if (b && b.isValid()) all = all ? all.extend(b) : L.latLngBounds(b.getSouthWest(), b.getNorthEast());
        });
        return all;
      },
      fit: function () {
        var b = ctl.bounds();
        if (b) map.fitBounds(b, { padding: [12, 12], animate: false });
        else if (!map._loaded) map.setView(pixel ? [512, 512] : [20, 0], pixel ? -1 : 2);
      },
      destroy: function () { map.remove(); }
    };

    function addEntry(spec, opts, refresh) {
      if (spec.frame && spec.frame !== frame) {
        console.warn('StudioMap: layer "' + spec.name + '" is in the ' + spec.frame + ' frame, this map is ' + frame);
      }
      var id = spec.id !== undefined && spec.id !== null ? spec.id : 'overlay-' + (ctl._order.length + 1) + '-' + Date.now();
      spec = L.extend({}, spec, { id: id });
      var entry = { spec: spec, visible: spec.error ? false : (opts.visible !== undefined ? opts.visible : spec.visible !== false) };
      entry.opacity = opts.opacity !== undefined ? opts.opacity : (spec.opacity !== undefined ? spec.opacity : 1);
      if (!spec.error) {
        try {
          var pane = opts.pane || ((spec.tiles || spec.image) ? RASTER_PANE : undefined);
          entry.layer = makeLayer(spec, { pane: pane, opacity: entry.opacity });
        } catch (err) {
          spec.error = err.message;
          entry.visible = false;
        }
      }
      if (entry.layer) {
        entry.layer.on('studio:error', function (e) { spec.error = 'could not load: ' + e.error.message; if (ctl._panel) ctl._panel.refresh(); });
        entry.layer.on('studio:loaded', function () { if (ctl._fitOnLoad && !specBounds(spec)) { ctl._fitOnLoad = false; ctl.fit(); } });
        if (entry.visible) entry.layer.addTo(map);
      }
      if (ctl.entries[id]) ctl.removeOverlay(id);
      ctl.entries[id] = entry;
      ctl._order.push(id);
      if (refresh && ctl._panel) ctl._panel.refresh();
      if (refresh && opts.fit) {
        var b = specBounds(spec);
        if (b) map.fitBounds(b, { padding: [12, 12] });
        else if (entry.layer) entry.layer.once('studio:loaded', function () { if (entry.layer.getBounds().isValid()) map.fitBounds(entry.layer.getBounds()); });
      }
      return entry.layer || null;
    }

    var layerOpts = config.layerOptions || {};
    (config.layers || []).forEach(function (spec) { addEntry(spec, layerOpts[spec.id] || {}, false); });
    if (config.panel !== false) {
      ctl._panel = new LayerPanel(ctl, { position: config.panelPosition || 'topright' });
      ctl._panel.addTo(map);
    }
    ctl._fitOnLoad = !ctl.bounds();
    ctl.fit();
    return ctl;
  }

  /* ---------------------------------------------------------------- synced maps and the swipe */

  function sync(a, b) {
    var busy = false;
    function follow(src, dst) {
      return function () {
        if (busy) return;
        busy = true;
        dst.setView(src.getCenter(), src.getZoom(), { animate: false, reset: false });
        busy = false;
      };
    }
    a.on('move zoom', follow(a, b));
    b.on('move zoom', follow(b, a));
  }

  function attachSwipe(ctl) {
    var map = ctl.map;
    var pane = map.getPane(SWIPE_PANE);
    var container = map.getContainer();
    var divider = el('div', 'studio-swipe-divider', container);
    var range = el('input', 'studio-swipe-range', container);
    range.type = 'range'; range.min = 0; range.max = 1; range.step = 'any'; range.value = 0.5;
    range.setAttribute('aria-label', 'Swipe position');
    ['mousedown', 'touchstart', 'pointerdown', 'dblclick', 'click'].forEach(function (ev) {
      L.DomEvent.on(range, ev, L.DomEvent.stopPropagation);
    });
    function update() {
      var size = map.getSize();
      var thumb = 28;  // the range thumb's width (studio.css): the divider follows its centre
      var x = thumb / 2 + (size.x - thumb) * parseFloat(range.value);
      var nw = map.containerPointToLayerPoint([0, 0]);
      var se = map.containerPointToLayerPoint(size);
      var clipX = nw.x + x;
      pane.style.clip = 'rect(' + [nw.y, se.x, se.y, clipX].join('px, ') + 'px)';
      divider.style.left = x + 'px';
    }
    range.addEventListener('input', update);
    map.on('move zoom zoomend moveend resize viewreset', update);
    update();
    return { range: range, update: update };
  }

  /* ---------------------------------------------------------------- the viewer: toolbar + one/two maps */

  function viewer(element, config) {
    if (typeof element === 'string') element = document.getElementById(element);
    config = config || {};
    var all = (config.layers || []).slice();
    var overlays = [];
    var state = { group: null, mode: config.mode || 'single', left: null, right: null };
    var controllers = [];

    // Groups of layers that share one map: all geographic layers; pixel-frame layers per image tile.
    var groups = [];  // [{key, label, frame}]
    function groupOf(s) { return s.group || s.frame || 'geographic'; }
    function findGroup(key) { for (var i = 0; i < groups.length; i++) if (groups[i].key === key) return groups[i]; return null; }
    function addGroup(s) {
      var key = groupOf(s);
      if (findGroup(key)) return;
      var frame = s.frame || 'geographic';
      groups.push({ key: key, frame: frame, label: s.groupLabel || (frame === 'pixel' ? 'Image frame (pixels)' : 'Geographic (lon/lat)') });
    }
    all.forEach(addGroup);
    groups.sort(function (a, b) { return (a.frame === 'geographic' ? 0 : 1) - (b.frame === 'geographic' ? 0 : 1); });
    state.group = config.group && findGroup(config.group) ? config.group : (groups[0] ? groups[0].key : 'geographic');
    function currentFrame() { var g = findGroup(state.group); return g ? g.frame : 'geographic'; }

    element.classList.add('studio-viewer');
    element.innerHTML = '';
    var bar = el('div', 'studio-toolbar', element);
    var stage = el('div', 'studio-stage', element);

    function specsOf(group) {
      return all.concat(overlays).filter(function (s) { return groupOf(s) === group; });
    }
    function phasesOf(group) {
      var p = [];
      specsOf(group).forEach(function (s) { if ((s.kind === 'raster' || s.kind === 'mask') && s.phase && p.indexOf(s.phase) < 0) p.push(s.phase); });
      return sortPhases(p);
    }

    function select(parent, label, options, value, onChange) {
      var wrap = el('label', 'studio-field', parent);
      el('span', '', wrap, label);
      var s = el('select', '', wrap);
      options.forEach(function (o) {
        var opt = el('option', '', s, o[1]);
        opt.value = o[0];
        if (o[0] === value) opt.selected = true;
      });
      s.addEventListener('change', function () { onChange(s.value); });
      return s;
    }

    function drawBar() {
      bar.innerHTML = '';
      if (groups.length > 1) {
        select(bar, 'Show', groups.map(function (g) { return [g.key, g.label]; }), state.group, function (v) {
          state.group = v; state.left = state.right = null; render();
        });
      }
      var phases = phasesOf(state.group);
      var canSplit = phases.length >= 2;
      if (!canSplit && state.mode !== 'single') state.mode = 'single';
      var modes = [['single', 'Single map']];
      if (canSplit) modes.push(['side', 'Side by side'], ['swipe', 'Swipe']);
      var modeSel = select(bar, 'View', modes, state.mode, function (v) { state.mode = v; render(); });
      modeSel.disabled = !canSplit;
      if (!canSplit) modeSel.title = 'Pre/post comparison needs raster layers of two phases';
      if (canSplit) {
        if (!state.left || phases.indexOf(state.left) < 0) state.left = phases[0];
        if (!state.right || phases.indexOf(state.right) < 0) state.right = phases[phases.length - 1];
        if (state.mode !== 'single') {
          var opts = phases.map(function (p) { return [p, p]; });
          select(bar, 'Left', opts, state.left, function (v) { state.left = v; render(); });
          select(bar, 'Right', opts, state.right, function (v) { state.right = v; render(); });
        }
      }
      var fit = el('button', 'studio-button', bar, 'Fit layers');
      fit.type = 'button';
      fit.addEventListener('click', function () { controllers.forEach(function (c) { c.fit(); }); });
    }

    // In a split view, show the first raster of each side's phase plus that phase's masks; shared
    // (phase-less) vectors on both.
    function sideLayerOptions(specs, phase) {
      var opts = {}, shownRaster = false;
      specs.forEach(function (s) {
        var visible;
        if (s.kind === 'raster') { visible = s.phase === phase && !shownRaster && !s.error; if (visible) shownRaster = true; }
        else if (s.kind === 'mask') visible = s.phase === phase && s.visible !== false;
        else visible = (!s.phase || s.phase === phase) && s.visible !== false;
        opts[s.id] = { visible: visible };
      });
      return opts;
    }

    function destroyMaps() {
      controllers.forEach(function (c) { c.destroy(); });
      controllers = [];
      stage.innerHTML = '';
    }

    function render() {
      destroyMaps();
      drawBar();
      var specs = specsOf(state.group);
      var frame = currentFrame();
      stage.className = 'studio-stage studio-mode-' + state.mode;
      if (!specs.length) {
        el('div', 'studio-empty', stage, 'No layer to show.');
        return;
      }
      if (state.mode === 'side') {
        var leftEl = el('div', 'studio-map', stage), rightEl = el('div', 'studio-map', stage);
        el('div', 'studio-map-caption', leftEl, state.left);
        el('div', 'studio-map-caption', rightEl, state.right);
        var leftSpecs = specs.filter(function (s) { return !s.phase || s.phase === state.left; });
        var rightSpecs = specs.filter(function (s) { return !s.phase || s.phase === state.right; });
        var a = create(leftEl, { frame: frame, layers: leftSpecs, layerOptions: sideLayerOptions(leftSpecs, state.left), wheelModifier: config.wheelModifier });
        var b = create(rightEl, { frame: frame, layers: rightSpecs, layerOptions: sideLayerOptions(rightSpecs, state.right), wheelModifier: config.wheelModifier });
        b.map.setView(a.map.getCenter(), a.map.getZoom(), { animate: false });
        sync(a.map, b.map);
        controllers = [a, b];
      } else if (state.mode === 'swipe') {
        var mapEl = el('div', 'studio-map', stage);
        var lo = sideLayerOptions(specs, state.left), ro = sideLayerOptions(specs, state.right);
        var opts = {};
        specs.forEach(function (s) {
          if (s.phase === state.right && (s.kind === 'raster' || s.kind === 'mask')) opts[s.id] = { visible: ro[s.id].visible, pane: SWIPE_PANE };
          else if (s.phase === state.left && (s.kind === 'raster' || s.kind === 'mask')) opts[s.id] = { visible: lo[s.id].visible, pane: LEFT_PANE };
          else opts[s.id] = lo[s.id];
        });
        var c = create(mapEl, { frame: frame, layers: specs, layerOptions: opts, wheelModifier: config.wheelModifier });
        el('div', 'studio-map-caption', mapEl, state.left + '  ◀ ▶  ' + state.right);
        attachSwipe(c);
        controllers = [c];
      } else {
        var single = el('div', 'studio-map', stage);
        controllers = [create(single, { frame: frame, layers: specs, wheelModifier: config.wheelModifier })];
      }
    }

    render();

    var api = {
      controllers: function () { return controllers.slice(); },
      state: state,
      addOverlay: function (spec, opts) {
        // default: the group shown now (or, for a layer of the other frame, that frame's first group)
        spec = L.extend({ kind: 'overlay', visible: true }, spec);
        if (!spec.frame) spec.frame = currentFrame();
        if (!spec.group) {
          var same = spec.frame === currentFrame() ? findGroup(state.group) : null;
          if (!same) groups.forEach(function (g) { if (!same && g.frame === spec.frame) same = g; });
          spec.group = same ? same.key : spec.frame;
        }
        if (spec.id === undefined || spec.id === null) spec.id = 'overlay-' + (overlays.length + 1);
        overlays.push(spec);
        addGroup(spec);
        var layers = [];
        if (spec.group === state.group && controllers.length) {
          controllers.forEach(function (c) { layers.push(c.addOverlay(spec, opts)); });
        } else if (spec.group === state.group || config.followOverlays !== false) {
          state.group = spec.group;  // show the overlay's group (config.followOverlays: false keeps the view)
          render();
        }
        return layers[0] || null;
      },
      render: render,
      destroy: destroyMaps
    };
    return api;
  }

  function addOverlay(target, spec, opts) { return target.addOverlay(spec, opts); }

  /** A comment pin's L.circleMarker options (see the header): open ones white in a near-black ring. */
  function commentPinStyle(resolved) {
    return resolved
      ? { radius: 7, color: "#37474f", weight: 2, fillColor: "#b0bec5", fillOpacity: 0.8, className: "studio-comment-pin resolved" }
      : { radius: 8, color: "#111111", weight: 3, fillColor: "#ffffff", fillOpacity: 0.9, className: "studio-comment-pin" };
  }

  function fromScript(id) {
    var node = document.getElementById(id);
    return node ? JSON.parse(node.textContent) : null;
  }

  return {
    PIXEL_CRS: PIXEL_CRS,
    SWIPE_PANE: SWIPE_PANE,
    RASTER_PANE: RASTER_PANE,
    create: create,
    viewer: viewer,
    addOverlay: addOverlay,
    makeLayer: makeLayer,
    specBounds: specBounds,
    sync: sync,
    attachSwipe: attachSwipe,
    fromScript: fromScript,
    commentPinStyle: commentPinStyle,
    wheelWithModifier: wheelWithModifier,
    popupHtml: popupHtml
  };
})();
