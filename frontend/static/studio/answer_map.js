// Answer fields that are geographic points: gold and predicted positions on one small map
// (no base tiles needed: the two markers and the line between them; works with no network).
(function () {
  "use strict";
  const el = document.getElementById("answer-map");
  const data = document.getElementById("answer-points");
  if (!el || !data || !window.L) return;
  const points = JSON.parse(data.textContent);
  // field names come from task files: a DOM node with textContent, never an HTML string
  function textTip(text) { const n = document.createElement("span"); n.textContent = text; return n; }
  const map = L.map(el, { attributionControl: false });
  if (window.StudioMap) StudioMap.wheelWithModifier(map);  // the page scrolls; Ctrl/⌘ + wheel zooms
  const bounds = [];
  points.forEach((p) => {
    if (p.gold) {
      L.circleMarker(p.gold, { radius: 7, color: "#b8860b", fillOpacity: 0.8, className: "answer-gold" })
        .bindTooltip(textTip(`${p.field}: gold`)).addTo(map);
      bounds.push(p.gold);
    }
    if (p.pred) {
      L.circleMarker(p.pred, { radius: 7, color: "#1f6feb", fillOpacity: 0.8, className: "answer-pred" })
        .bindTooltip(textTip(`${p.field}: predicted`)).addTo(map);
      bounds.push(p.pred);
    }
    if (p.gold && p.pred) L.polyline([p.gold, p.pred], { color: "#888", dashArray: "4 4" }).addTo(map);
  });
  if (bounds.length) map.fitBounds(L.latLngBounds(bounds).pad(0.5), { maxZoom: 18 });
  el.dataset.ready = String(bounds.length);
})();
