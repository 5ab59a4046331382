// Record page: the task's layers and the gold replay's step outputs on one map (StudioMap viewer).
import { StudioMap } from "./map.js";
import * as StudioReplay from "./replay_view.js";

(function () {
  const el = document.getElementById("record-map");
  if (!el) return;
  const cfg = JSON.parse(document.getElementById("record-map-config").textContent || "{}");
  const viewer = StudioMap.viewer(el, { layers: cfg.layers || [] });
  StudioReplay.overlays(el.dataset.replay).then((list) => {
    list.filter((spec) => spec.kind !== "image" && spec.kind !== "error")
      .forEach((spec) => viewer.addOverlay(spec, { visible: true, opacity: spec.kind === "mask" ? 0.75 : 1, fit: false }));
  });
})();
