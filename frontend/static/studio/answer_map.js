// Answer fields of polygon and point type: the gold and the predicted geometry of each on a small
// map (StudioMap, no base tiles: works with no network). One map per field, in the field's frame
// (geographic lon/lat, or image column/row); data from evaluation.selectors.runs.record_evidence.
import { StudioMap } from "./map.js";

(function () {
  const box = document.getElementById("answer-maps");
  const data = document.getElementById("answer-geometries");
  if (!box || !data || !window.L) return;
  const STYLE = {
    gold: { name: "gold", color: "#b8860b", className: "answer-gold", radius: 7 },
    pred: { name: "predicted", color: "#1f6feb", className: "answer-pred", dashArray: "6 4", radius: 7 },
  };
  JSON.parse(data.textContent).forEach((g, i) => {
    const el = box.querySelector(`.answer-map[data-index="${i}"]`);
    if (!el) return;
    const layers = [];
    ["gold", "pred"].forEach((side) => {
      if (!g[side]) return;
      layers.push(Object.assign({ id: `${side}-${i}`, kind: "vector", frame: g.frame,
                                  data: { type: "FeatureCollection", features: [g[side]] } }, STYLE[side]));
    });
    const ctl = StudioMap.create(el, { frame: g.frame, layers: layers, panel: false });
    ctl.fit();
    const b = ctl.bounds();
    const onePoint = b && b.getSouthWest().equals(b.getNorthEast());
    if (onePoint) ctl.map.setZoom(g.frame === "geographic" ? 18 : 2);  // a lone point: a useful scale, not the deepest zoom
    else if (b) ctl.map.fitBounds(b.pad(0.25), { animate: false });  // both shapes with room around them
    el.dataset.ready = String(layers.length);
  });
})();
