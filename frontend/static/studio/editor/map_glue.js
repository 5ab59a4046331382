// The editor's map (DOM, Leaflet's global L and leaflet-geoman, both classic scripts that run before
// this module): the event's layers in a StudioMap viewer, answer geometry drawn on it, literal
// GeoJSON answers and map-pinned review comments shown on it, and a replay's overlays.
import { $, textTip } from "./dom.js";
import { StudioMap } from "../map.js";

/** `v` rounded to `n` decimals. */
export function round(v, n) { const f = Math.pow(10, n); return Math.round(v * f) / f; }
/** Every number of a (nested) GeoJSON coordinate array rounded to `n` decimals. */
export function roundCoords(c, n) { return Array.isArray(c[0]) ? c.map((x) => roundCoords(x, n)) : c.map((v) => round(v, n)); }

/**
 * Start the editor's map in #editor-map and return its glue.
 * @param {Object} ctx  {state, layers (map-config's layer specs), toast(text), changed(), answerRows() -> [tr],
 *   addAnswer(field) -> tr, parseSource(text)}
 * @returns {{viewer, currentMap, startDraw, applyDrawn, showLiteralGeometries, showCommentMarkers, showOverlays}}
 */
export function initMap(ctx) {
  const { state } = ctx;
  let viewer = null;
  try {
    viewer = StudioMap.viewer(document.getElementById("editor-map"), { layers: ctx.layers || [], wheelModifier: true });
  } catch (e) {
    $("#editor-map").textContent = `The map could not start: ${e.message}`;
  }
  function currentMap() { const c = viewer && viewer.controllers()[0]; return c ? { map: c.map, frame: c.frame } : null; }

  function startDraw(tr) {
    const m = currentMap();
    if (!m || !m.map.pm) { ctx.toast("Drawing needs the map (leaflet-geoman) to be loaded."); return; }
    const name = $(".ans-name", tr).value.trim();
    const type = $(".ans-type", tr).value;
    const isPoint = /point/.test(type) || /_(row|col|lat|lon|latitude|longitude)$/.test(name);
    const shape = isPoint ? "Marker" : /line|route|path/.test(name) ? "Line" : "Polygon";
    $("#draw-hint").textContent = `Drawing ${shape.toLowerCase()} for “${name || "field"}” in the ${m.frame} frame — click on the map${shape === "Marker" ? "" : ", finish on the first point / double-click"}; Esc cancels.`;
    m.map.pm.enableDraw(shape, { snappable: false, continueDrawing: false });
    m.map.once("pm:create", (e) => {
      m.map.pm.disableDraw();
      $("#draw-hint").textContent = "";
      const gj = e.layer.toGeoJSON().geometry;
      if (state.drawn[name]) state.drawn[name].remove();
      state.drawn[name] = e.layer;
      e.layer.bindTooltip(textTip(name || "answer"));
      applyDrawn(tr, name, type, gj, m.frame);
      ctx.changed();
    });
  }
  function applyDrawn(tr, name, type, geom, frame) {
    const pixel = frame === "pixel";
    const answerRows = ctx.answerRows;
    if (geom.type === "Point") {
      const [x, y] = geom.coordinates;
      const base = name.replace(/_(row|col|lat|lon|latitude|longitude)$/, "") || "point";
      const evalType = pixel ? "point_pixel" : "point_haversine";
      const names = pixel ? [base + "_row", base + "_col"] : [base + "_lat", base + "_lon"];
      const values = pixel ? [round(y, 1), round(x, 1)] : [round(y, 7), round(x, 7)];
      names.forEach((n, k) => {
        let row = answerRows().find((r) => $(".ans-name", r).value.trim() === n);
        if (!row) row = k === 0 && tr && !answerRows().some((r) => $(".ans-name", r).value.trim() === names[0]) ? tr : ctx.addAnswer({});
        $(".ans-name", row).value = n;
        $(".ans-type", row).value = evalType;
        $(".ans-source", row).value = String(values[k]);
        row._source = values[k];
        row._validate();
      });
      return;
    }
    const g = { type: geom.type, coordinates: geom.coordinates.map ? roundCoords(geom.coordinates, pixel ? 1 : 7) : geom.coordinates };
    if (!pixel) g.crs = { type: "name", properties: { name: "urn:ogc:def:crs:OGC:1.3:CRS84" } };
    $(".ans-source", tr).value = JSON.stringify(g);
    tr._source = g;
    if (/polygon/i.test(geom.type) && $(".ans-type", tr).value !== "polygon_iou") $(".ans-type", tr).value = "polygon_iou";
    tr._validate();
  }
  function showLiteralGeometries() {  // literal GeoJSON sources drawn on the map on load
    const m = currentMap();
    if (!m) return;
    ctx.answerRows().forEach((tr) => {
      const v = ctx.parseSource($(".ans-source", tr).value);
      if (v && typeof v === "object" && v.type && v.coordinates) {
        const geo = L.geoJSON(v, { style: { color: "#ff3d7f", weight: 2 } }).bindTooltip(textTip($(".ans-name", tr).value)).addTo(m.map);
        state.drawn[$(".ans-name", tr).value] = geo;
      }
    });
  }
  let commentMarkers = [];
  function showCommentMarkers(threads) {  // the open comments pinned to a location in the map's frame
    const m = currentMap();
    commentMarkers.forEach((x) => x.remove());
    commentMarkers = [];
    if (m) threads.filter((c) => c.location && !c.resolved && c.location.x !== undefined).forEach((c) => {
      if ((c.location.frame || "geographic") !== m.frame) return;
      commentMarkers.push(L.circleMarker([c.location.y, c.location.x], StudioMap.commentPinStyle(false))
        .bindTooltip(textTip(`${c.author}: ${c.body}`)).addTo(m.map));
    });
  }
  let overlayIds = [];
  function clearOverlays() {  // the previous replay's overlays leave the map
    overlayIds.forEach((id) => viewer && viewer.controllers().forEach((c) => c.removeOverlay(id)));
    overlayIds = [];
  }
  /** Put a replay overlay spec on the map; false when there is no map. */
  function addOverlay(spec) {
    if (!viewer) return false;
    viewer.addOverlay(spec, { visible: true, opacity: spec.kind === "mask" ? 0.75 : 1 });
    overlayIds.push(spec.id);
    return true;
  }
  return { currentMap, startDraw, applyDrawn, showLiteralGeometries, showCommentMarkers, clearOverlays, addOverlay };
}
