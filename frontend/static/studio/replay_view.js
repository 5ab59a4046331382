// Replay panel of the task page: start a replay, follow its progress, show each step's output
// (values in the step list, masks and vectors on a pixel-frame map) and the filled answer.
(function () {
  "use strict";
  const $ = (s) => document.querySelector(s);
  const btn = $("#replay-button");
  if (!btn) return;
  const taskId = btn.dataset.task;
  function csrf() {
    const m = document.cookie.match(/csrftoken=([^;]+)/);
    return m ? m[1] : "";
  }
  let map = null;
  let control = null;
  const overlays = [];
  function ensureMap(w, h) {
    if (map) return map;
    const crs = L.extend({}, L.CRS.Simple, { transformation: new L.Transformation(1, 0, 1, 0) });
    map = L.map("replay-map", { crs, minZoom: -4, maxZoom: 4, zoomSnap: 0.25 });
    map.fitBounds([[0, 0], [h, w]]);
    control = L.control.layers({}, {}, { collapsed: false }).addTo(map);
    return map;
  }
  function addRasterArtifact(runId, name, label) {
    const url = `/replays/${runId}/artifacts/${encodeURIComponent(name)}.png`;
    const img = new Image();
    img.onload = () => {
      const m = ensureMap(img.naturalWidth, img.naturalHeight);
      const layer = L.imageOverlay(url, [[0, 0], [img.naturalHeight, img.naturalWidth]], { opacity: 0.75 }).addTo(m);
      overlays.push(layer);
      control.addOverlay(layer, label);
    };
    img.src = url;
  }
  async function addVectorArtifact(runId, name, label) {
    const resp = await fetch(`/replays/${runId}/artifacts/${encodeURIComponent(name)}`, { credentials: "same-origin" });
    if (!resp.ok) return;
    const gj = await resp.json();
    const m = ensureMap(1024, 1024);
    const layer = L.geoJSON(gj, {
      coordsToLatLng: (c) => L.latLng(c[1], c[0]),
      style: { color: "#00e5ff", weight: 1 },
      onEachFeature: (f, l) => l.bindPopup(`<pre>${JSON.stringify(f.properties, null, 1).replace(/[<>&]/g, (ch) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;" }[ch]))}</pre>`),
    }).addTo(m);
    overlays.push(layer);
    control.addOverlay(layer, label);
  }
  function render(run) {
    const prog = $("#replay-progress");
    prog.max = Math.max(run.steps_total, 1);
    prog.value = run.steps_done;
    $("#replay-status").textContent = `${run.status} · ${run.steps_done}/${run.steps_total} steps` + (run.error ? ` · ${run.error}` : "");
    $("#replay-status").className = run.status;
    const ol = $("#replay-steps");
    ol.innerHTML = "";
    run.steps.forEach((s) => {
      const li = document.createElement("li");
      li.className = `step ${s.status}`;
      const head = document.createElement("div");
      head.innerHTML = "<code></code> <span class='badge'></span> <span class='meta'></span>";
      head.querySelector("code").textContent = s.call;
      head.querySelector(".badge").textContent = s.status;
      head.querySelector(".meta").textContent = s.duration_ms != null ? `${s.duration_ms.toFixed(1)} ms` : "";
      li.appendChild(head);
      const pre = document.createElement("pre");
      pre.className = "obs";
      pre.textContent = s.error ? s.error : JSON.stringify(s.obs, null, 1);
      li.appendChild(pre);
      ol.appendChild(li);
    });
    if (run.status === "succeeded") {
      $("#final-answer").textContent = JSON.stringify(run.final_answer, null, 2);
      $("#replay-hash").textContent = run.replay_hash;
      if (!map) {
        run.steps.forEach((s) => (s.artifacts || []).forEach((a) => {
          const label = `step ${s.index} · ${a.key}`;
          if (/\.(tif|tiff|png)$/i.test(a.name)) addRasterArtifact(run.id, a.name, label);
          else if (/\.(geojson|json)$/i.test(a.name)) addVectorArtifact(run.id, a.name, label);
        }));
      }
    }
  }
  async function poll(runId) {
    for (;;) {
      const resp = await fetch(`/api/replays/${runId}/`, { credentials: "same-origin" });
      const run = await resp.json();
      render(run);
      if (run.status === "succeeded" || run.status === "failed") return run;
      await new Promise((r) => setTimeout(r, 700));
    }
  }
  btn.onclick = async () => {
    btn.disabled = true;
    $("#replay-status").textContent = "starting…";
    const resp = await fetch(`/api/tasks/${taskId}/replays/`, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf() }, body: JSON.stringify({ mode: "gt" }),
    });
    const run = await resp.json();
    if (!resp.ok) { $("#replay-status").textContent = run.detail || `error ${resp.status}`; btn.disabled = false; return; }
    overlays.forEach((l) => l.remove());
    if (map) { map.remove(); map = null; }
    await poll(run.id);
    btn.disabled = false;
  };
  const latest = JSON.parse(document.getElementById("latest-replay").textContent);
  if (latest) poll(latest);
})();
