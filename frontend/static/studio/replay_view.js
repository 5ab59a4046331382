// Replay: start a replay of a task's head revision, follow its progress (/api/replays/<id>/), and
// fetch each step's artifacts as StudioMap overlay specs (/replays/<id>/overlays/).
//
// Exports start(taskId) -> run, poll(runId, onUpdate) -> final run, overlays(runId) -> [spec],
// obsValues(obs) -> [[key, text]], esc(text), and pageViewer() (the task page's map viewer, null
// elsewhere). Used by the editor (editor/main.js), the review page (review.js), the record page
// (record_map.js) and, on the task page, by the panel below (#replay-button).
import { send } from "./api.js";
import { StudioMap } from "./map.js";

/** The task page's replay map viewer (made on first use); a function returning null on other pages. */
export let pageViewer = () => null;

export function esc(s) {
  return String(s === null || s === undefined ? "" : s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
export async function start(taskId, mode) {
  const resp = await send("POST", `/api/tasks/${taskId}/replays/`, { mode: mode || "gt" });
  const run = await resp.json().catch(() => ({}));
  if (!resp.ok) throw new Error(run.detail || `replay refused (HTTP ${resp.status})`);
  return run;
}
export async function poll(runId, onUpdate) {
  for (;;) {
    const resp = await fetch(`/api/replays/${runId}/`, { credentials: "same-origin" });
    if (!resp.ok) throw new Error(`replay ${runId}: HTTP ${resp.status}`);
    const run = await resp.json();
    if (onUpdate) onUpdate(run);
    if (run.status === "succeeded" || run.status === "failed") return run;
    await new Promise((r) => setTimeout(r, 600));
  }
}
export async function overlays(runId) {
  const resp = await fetch(`/replays/${runId}/overlays/`, { credentials: "same-origin" });
  if (!resp.ok) return [];
  return (await resp.json()).overlays || [];
}
// The values of an observation worth showing in a step card: scalars and short lists/dicts.
export function obsValues(obs) {
  if (obs === null || obs === undefined) return [];
  if (Array.isArray(obs)) return [["(list)", `${obs.length} items`]];
  return Object.entries(obs).filter(([k]) => k !== "tool" && k !== "_meta").map(([k, v]) => {
    let text = typeof v === "string" ? v : JSON.stringify(v);
    if (text && text.length > 160) text = text.slice(0, 157) + "…";
    return [k, text];
  });
}

// ---- the task page's replay panel ---------------------------------------------------------------
(function () {
  const $ = (s) => document.querySelector(s);
  const btn = $("#replay-button");
  if (!btn) return;
  const taskId = btn.dataset.task;
  let viewer = null;
  let shownRun = null;
  function ensureViewer() {
    if (viewer || !$("#replay-map")) return viewer;
    const cfg = JSON.parse((document.getElementById("map-config") || { textContent: "{}" }).textContent || "{}");
    viewer = StudioMap.viewer(document.getElementById("replay-map"), { layers: cfg.layers || [] });
    return viewer;
  }
  async function showOverlays(run) {
    if (shownRun === run.id) return;
    shownRun = run.id;
    const list = await overlays(run.id);
    const ul = $("#replay-overlays");
    const v = ensureViewer();
    list.forEach((spec) => {
      if (spec.kind === "image") {
        const li = document.querySelector(`#replay-steps li[data-index="${spec.step}"]`);
        if (li) { const img = document.createElement("img"); img.src = spec.url; img.alt = spec.name; img.className = "step-chart"; li.appendChild(img); }
        return;
      }
      if (spec.kind === "error") { if (ul) { const li = document.createElement("li"); li.textContent = spec.error; ul.appendChild(li); } return; }
      if (v) v.addOverlay(spec, { visible: true, opacity: spec.kind === "mask" ? 0.75 : 1, fit: false });
      if (ul) { const li = document.createElement("li"); li.textContent = spec.name; ul.appendChild(li); }
    });
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
      li.dataset.index = s.index;
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
    }
  }
  async function follow(runId) {
    const run = await poll(runId, render);
    if (run.status === "succeeded") { shownRun = null; await showOverlays(run); document.dispatchEvent(new CustomEvent("studio:viewer-reset")); }
    return run;
  }
  btn.onclick = async () => {
    btn.disabled = true;
    $("#replay-status").textContent = "starting…";
    try {
      const run = await start(taskId);
      if (viewer) { viewer.destroy(); viewer = null; document.getElementById("replay-map").innerHTML = ""; }
      document.dispatchEvent(new CustomEvent("studio:viewer-reset"));
      if ($("#replay-overlays")) $("#replay-overlays").innerHTML = "";
      await follow(run.id);
    } catch (e) {
      $("#replay-status").textContent = e.message;
    }
    btn.disabled = false;
  };
  ensureViewer();
  pageViewer = () => ensureViewer();
  const latest = JSON.parse(document.getElementById("latest-replay").textContent);
  if (latest) follow(latest).catch((e) => { $("#replay-status").textContent = e.message; });
})();
