// The map-native task editor, its page module: query, data manifest from the event's layers, gold
// trajectory (form and JSON views that round-trip), answer spec (references, literals, geometry
// drawn on the map), replay with per-step outputs, drafts autosaved to the server, immutable
// revisions with optimistic locking (a 409 shows both versions), review comments and transitions,
// keyboard shortcuts. The editor's other modules (frontend/static/studio/editor/):
//   state.js       the state, the steps and their structural edits, the undo log, the draft rules (no DOM)
//   references.js  the reference syntax, references held as data, broken-reference messages, the
//                  reference picker's groups and ranking (no DOM)
//   args.js        typed argument and answer-source text -> values or errors (no DOM)
//   pickers.js     the tool and reference pickers (DOM)
//   map_glue.js    the map: the event's layers, drawing answers, pinned comments, replay overlays
//   qc.js          the QC card and the findings next to Submit (DOM)
//   comments.js    review comments on the steps, the answer fields and the map (DOM)
//   dom.js         $, $$, el, textTip
// Undo/redo (u / U, Ctrl+Z / Ctrl+Shift+Z) cover every edit: each is a snapshot of the model.
// QC is the server's suite (POST /api/qc/), a moment after each change; the last replay is marked
// stale by any edit, and saving starts a replay.
//
// Reads {{ config|json_script:"editor-config" }} (see frontend/views/tasks._editor_context) and
// {{ map_config|json_script:"map-config" }} (StudioMap layer specs of the event). Exposes
// window.studioEditor (the browser tests drive the editor through it).
import { send } from "../api.js";
import * as R from "../replay_view.js";
import { enumOf, parseArg, parseSource } from "./args.js";
import { $, $$, el } from "./dom.js";
import { initComments } from "./comments.js";
import { initMap } from "./map_glue.js";
import { initPickers } from "./pickers.js";
import { initQc } from "./qc.js";
import * as refs from "./references.js";
import { REF_LIKE, isRef, refInfo, typeFamily } from "./references.js";
import {
  UndoLog, answerRenames, changeOutcome, changeTool, createState, deleteStepAt, duplicateStepAt, insertStepAt, moveStepBy,
  offersDraft,
} from "./state.js";

(function () {
  const CFG = JSON.parse(document.getElementById("editor-config").textContent);
  const MAPCFG = JSON.parse(document.getElementById("map-config").textContent);
  const tools = CFG.tools;
  const layers = CFG.layers;
  const layerById = Object.fromEntries(layers.map((l) => [String(l.id), l]));
  const layerByFile = Object.fromEntries(layers.map((l) => [l.file_name, l]));

  // ------------------------------------------------------------------ state
  const T = CFG.task;  // null for a new task
  const state = createState(T, tools);  // state.steps: [{uid, call, args}]; references inside args are {"$ref": uid, key}
  const toolByName = state.toolByName;

  // ------------------------------------------------------------------ toast, errors, save state
  let toastTimer = null;
  function toast(text, action) {
    const t = $("#toast");
    t.innerHTML = "";
    t.appendChild(document.createTextNode(text));
    if (action) t.appendChild(el("button", { type: "button", text: action.label, onclick: () => { t.hidden = true; action.run(); } }));
    t.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { t.hidden = true; }, 6000);
  }
  function showErrors(lines) {
    const ul = $("#errors");
    ul.innerHTML = "";
    lines.forEach((l) => ul.appendChild(el("li", { text: l })));
  }
  function flatten(body) {
    const lines = [];
    (function walk(v, path) {
      if (Array.isArray(v) && v.every((x) => typeof x === "string")) lines.push(`${path}: ${v.join(" ")}`);
      else if (Array.isArray(v)) v.forEach((x, i) => walk(x, `${path}[${i}]`));
      else if (v && typeof v === "object") Object.entries(v).forEach(([k, x]) => walk(x, path ? `${path}.${k}` : k));
      else if (v !== undefined && v !== null && v !== "") lines.push(`${path}: ${v}`);
    })(body, "");
    return lines;
  }
  function setSaveState(kind, text) {
    const s = $("#save-state");
    s.className = `save-state ${kind}`;
    s.dataset.state = kind;
    s.textContent = text;
  }
  function savedText() { return state.id ? `All changes saved · r${state.version}` : "Not saved yet"; }

  // ------------------------------------------------------------------ question card
  function fillSelect(sel, options, value) {
    sel.innerHTML = "";
    options.forEach(([v, label]) => sel.appendChild(el("option", { value: v, text: label })));
    if (value !== undefined) sel.value = value;
  }
  fillSelect($("#event"), CFG.events.map((s) => [s, s]), CFG.event.slug);
  $("#event").addEventListener("change", () => { location.href = `/tasks/new/?event=${encodeURIComponent($("#event").value)}`; });
  fillSelect($("#dimension"), CFG.dimensions);
  const dl = (id, values) => document.body.appendChild(el("datalist", { id }, values.map((v) => el("option", { value: v }))));
  dl("disaster-types", CFG.disaster_types);
  dl("task-categories", []);
  function refreshCategories() {
    const d = $("#dimension").value;
    const list = $("#task-categories");
    list.innerHTML = "";
    (CFG.task_categories[d] || []).forEach((c) => list.appendChild(el("option", { value: c })));
    const code = $("#task-category-code");
    if (!code.value || /^T[1-5]$/.test(code.value)) code.value = CFG.category_codes[d] || "";
    $("#add-phase").classList.toggle("emph", d === "t4");
  }
  $("#dimension").addEventListener("change", () => { refreshCategories(); changed(); });

  // ------------------------------------------------------------------ data manifest
  const INPUT_KEYS = ["pre_image", "post_image", "image", "sar_image", "dem", "slope", "mask", "poi_data", "road_data",
    "building_data", "damage_data", "boundary_data", "temporal_images.t1", "temporal_images.t2", "temporal_images.t3"];
  dl("input-keys", INPUT_KEYS);
  function layerMeta(l) {
    if (!l) return "";
    if (l.kind === "vector") return [l.modality || "vector", l.feature_count != null ? `${l.feature_count} features` : "", l.crs || l.frame].filter(Boolean).join(" · ");
    return [l.modality || l.kind, l.gsd_m ? `${Number(l.gsd_m).toFixed(2)} m/px` : "no GSD", l.crs || "pixel frame",
      (l.bands || []).length ? `bands ${(l.bands || []).join(",")}` : "", l.phase ? `phase ${l.phase}` : ""].filter(Boolean).join(" · ");
  }
  function manifestEntry(l) {  // mirrors annotation.services.tasks.layer_manifest_entry
    if (l.kind === "vector") return { path: l.file_name };
    return { image_path: l.file_name, modality: l.modality || "optical", pixel_size_m: l.gsd_m,
      spatial_coordinate_system: l.crs || "pixel", band_info: l.bands || [] };
  }
  function addInput(key, layerId, verbatim) {
    const row = el("div", { class: "input-row" });
    const keyIn = el("input", { class: "input-key", list: "input-keys", value: key || "", placeholder: "input_data key", "aria-label": "input_data key" });
    const sel = el("select", { class: "input-layer", "aria-label": "layer" });
    if (verbatim) sel.appendChild(el("option", { value: "", text: `(kept as is) ${JSON.stringify(verbatim).slice(0, 60)}` }));
    ["raster", "mask", "vector"].forEach((kind) => {
      const group = layers.filter((l) => l.kind === kind);
      if (!group.length) return;
      const og = el("optgroup", { label: kind });
      group.forEach((l) => og.appendChild(el("option", { value: l.id, text: `${l.file_name}${l.phase ? " (" + l.phase + ")" : ""}${l.ground_truth ? " · ground truth" : ""}` })));
      sel.appendChild(og);
    });
    if (layerId) sel.value = String(layerId);
    else if (verbatim) sel.value = "";
    row._verbatim = verbatim || null;
    const meta = el("span", { class: "input-meta hint" });
    const rm = el("button", { type: "button", class: "icon", text: "×", title: "remove this input", onclick: () => { row.remove(); changed(); } });
    const update = () => {
      const l = layerById[sel.value];
      meta.textContent = sel.value ? layerMeta(l) : "not a layer of this event: kept verbatim";
      if (l && l.ground_truth) meta.prepend(el("b", { class: "gt-warning", text: "⚠ ground truth: the gold's own source, the agent would get the answer · " }));
      row.classList.toggle("ground-truth", !!(l && l.ground_truth));
      renderPreview();
    };
    sel.addEventListener("change", () => { update(); changed(); });
    keyIn.addEventListener("input", () => { renderPreview(); changed({ typing: keyIn }); });
    row.append(keyIn, sel, meta, rm);
    $("#manifest").appendChild(row);
    update();
    return row;
  }
  function inputRows() {
    const input_layers = {}, input_data = {};
    $$("#manifest .input-row").forEach((r) => {
      const k = $(".input-key", r).value.trim();
      if (!k) return;
      const v = $(".input-layer", r).value;
      if (v) input_layers[k] = parseInt(v, 10);
      else if (r._verbatim) setDotted(input_data, k, r._verbatim);
    });
    return { input_layers, input_data };
  }
  function setDotted(obj, key, value) {
    const parts = key.split(".");
    let node = obj;
    parts.slice(0, -1).forEach((p) => { if (typeof node[p] !== "object" || !node[p]) node[p] = {}; node = node[p]; });
    node[parts[parts.length - 1]] = value;
  }
  function previewInputData() {
    const { input_layers, input_data } = inputRows();
    const out = JSON.parse(JSON.stringify(input_data));
    Object.entries(input_layers).forEach(([k, id]) => setDotted(out, k, manifestEntry(layerById[String(id)])));
    return out;
  }
  function renderPreview() { $("#manifest-preview").textContent = JSON.stringify(previewInputData(), null, 2); }
  function loadInputData(inputData) {
    $("#manifest").innerHTML = "";
    (function walk(obj, prefix) {
      Object.entries(obj || {}).forEach(([k, v]) => {
        const key = prefix ? `${prefix}.${k}` : k;
        if (v && typeof v === "object" && !Array.isArray(v)) {
          const file = v.image_path || v.path;
          if (typeof file === "string") {
            const l = layerByFile[file.split("/").pop()];
            addInput(key, l ? l.id : null, l ? null : v);
          } else walk(v, key);
        }
      });
    })(inputData, "");
    renderPreview();
  }
  $("#add-input").onclick = () => { const r = addInput("", null); $(".input-key", r).focus(); changed(); };
  $("#add-phase").onclick = () => {
    const used = $$("#manifest .input-key").map((i) => i.value);
    let n = 1;
    while (used.includes(`temporal_images.t${n}`)) n++;
    const rasters = layers.filter((l) => l.kind === "raster");
    addInput(`temporal_images.t${n}`, (rasters[n - 1] || rasters[0] || {}).id);
    changed();
  };

  // ------------------------------------------------------------------ references (references.js) on this editor's steps
  const showArg = (v) => refs.showArg(v, state.steps);
  const bind = (v) => refs.bind(v, state.steps);  // text/JSON values -> model values
  const wire = (v) => refs.wire(v, state.steps);  // model values -> the benchmark's JSON
  const refProblem = (v, position) => refs.refProblem(v, position, state);
  // -> ["trajectory[2].args.vector_path: why"] over every step and answer field
  function brokenRefs() {
    return refs.brokenRefs(state, answerRows().map((tr) => ({ name: $(".ans-name", tr).value.trim(), source: tr._source })));
  }

  // ------------------------------------------------------------------ steps (form view)
  function renderSteps() {
    const ol = $("#steps");
    ol.innerHTML = "";
    state.steps.forEach((s, i) => ol.appendChild(stepCard(s, i)));
    selectStep(Math.min(state.selected, state.steps.length - 1), false);
    renderStepOutputs();
    renderPinnedComments();
  }
  function stepCard(step, i) {
    const tool = toolByName[step.call];
    const li = el("li", { class: "step card" + (tool ? "" : " no-tool"), "data-index": i, tabindex: "-1" });
    const toolBtn = el("button", { type: "button", class: "tool-button", title: "Pick the tool (/)", text: step.call || "choose a tool…",
      onclick: () => openToolPicker(i) });
    const ctrl = el("span", { class: "step-ctrl" },
      el("button", { type: "button", class: "icon move-up", title: "Move up (Alt+↑)", text: "↑", disabled: i === 0 || state.readOnly, onclick: () => moveStep(i, -1) }),
      el("button", { type: "button", class: "icon move-down", title: "Move down (Alt+↓)", text: "↓", disabled: i === state.steps.length - 1 || state.readOnly, onclick: () => moveStep(i, 1) }),
      el("button", { type: "button", class: "icon insert-step", title: "Insert a step before (i)", text: "+↑", disabled: state.readOnly, onclick: () => insertStep(i) }),
      el("button", { type: "button", class: "icon duplicate-step", title: "Duplicate (c)", "aria-label": "Duplicate step", disabled: state.readOnly, onclick: () => duplicateStep(i) }),
      el("button", { type: "button", class: "icon remove-step", title: "Delete (d)", text: "×", disabled: state.readOnly, onclick: () => deleteStep(i) }));
    li.append(el("div", { class: "step-head" }, el("span", { class: "step-index", text: `[${i}]` }), toolBtn,
      tool ? el("span", { class: "badge module" }, tool.module) : null, ctrl));
    if (step.call && !tool) li.appendChild(el("p", { class: "field-error", text: `unknown tool '${step.call}'` }));
    if (tool) li.appendChild(el("p", { class: "tool-desc hint", text: tool.description || "" }));
    // a perception step's GT replay reads the event's mask through a remap: show it where it applies
    (CFG.class_remaps[step.call] || []).forEach((r) => li.appendChild(el("p", { class: "class-remap hint", "data-mask": r.mask },
      el("b", { text: `GT remap of ${r.mask}: ` }), r.rows.map(([v, label, c, cl]) => `${v} ${label} → ${c} ${cl}`).join(" · "))));
    const box = el("div", { class: "args" });
    if (tool) {
      tool.params.forEach((p) => box.appendChild(argRow(step, i, p)));
      Object.keys(step.args || {}).filter((k) => !tool.params.some((p) => p.name === k))
        .forEach((k) => box.appendChild(el("div", { class: "arg-row unknown" },
          el("span", { class: "arg-name", text: k }), el("code", { text: showArg(step.args[k]) }),
          el("span", { class: "field-error", text: "not a parameter of this tool" }),
          el("button", { type: "button", class: "icon", text: "×", onclick: () => structural(() => { delete step.args[k]; }) }))));
    }
    li.appendChild(box);
    li.appendChild(el("div", { class: "step-output" }));
    li.appendChild(el("div", { class: "step-comments" }));
    li.addEventListener("focusin", () => selectStep(i, false));
    li.addEventListener("click", () => selectStep(i, false));
    return li;
  }
  function argRow(step, i, p) {
    const value = (step.args || {})[p.name];
    const row = el("div", { class: "arg-row" + (p.required ? " required" : "") });
    const label = el("label", { class: "arg-name", title: p.note || "" }, p.name, p.required ? el("span", { class: "req", title: "required", text: "*" }) : null);
    const typeTag = el("span", { class: "arg-type", text: p.type });
    const enumVals = enumOf(p);
    const fam = typeFamily(p.type);
    let input;
    const valueIsRef = isRef(value) || (typeof value === "string" && !!refInfo(value));
    if ((enumVals || fam === "bool") && !valueIsRef) {
      input = el("select", { class: "arg", "data-name": p.name, "data-type": p.type });
      input.appendChild(el("option", { value: "", text: p.default !== null && p.default !== undefined ? `(default ${JSON.stringify(p.default)})` : "(unset)" }));
      (enumVals || ["true", "false"]).forEach((v) => input.appendChild(el("option", { value: v, text: v })));
      input.value = value === undefined ? "" : String(value);
    } else {
      const ph = p.default !== null && p.default !== undefined ? `default ${JSON.stringify(p.default)}` : (p.required ? "required" : "optional");
      input = el("input", { class: "arg", "data-name": p.name, "data-type": p.type, placeholder: ph,
        list: /path|image|vector|raster|mask/.test(p.name) && fam !== "list" ? "file-names" : null, value: showArg(value) });
    }
    input.disabled = state.readOnly;
    input.setAttribute("aria-label", `step ${i} ${p.name}`);
    const err = el("span", { class: "field-error" });
    const refBtn = el("button", { type: "button", class: "icon ref-button", title: "Insert a reference to an earlier step's output (r)", text: "⤷ ref",
      disabled: state.readOnly || i === 0, onclick: () => openRefPicker(input, i, p) });
    const validate = () => {
      const r = input.tagName === "SELECT" ? (input.value === "" ? {} : parseArg(input.value, enumVals ? { type: "str" } : p)) : parseArg(input.value, p);
      let msg = r.error || "";
      if (!msg && r.value === undefined && p.required) msg = "required";
      // the model value while the text shows it (a reference keeps its step), else the typed text
      const mv = r.value !== undefined && input.value === showArg(step.args[p.name]) ? step.args[p.name] : bind(r.value);
      if (!msg && mv !== undefined) msg = refProblem(mv, i);
      err.textContent = msg;
      row.classList.toggle("invalid", !!msg);
      row.classList.toggle("broken-ref", !!msg && (isRef(mv) || REF_LIKE.test(String(r.value || ""))));
      input.classList.toggle("is-ref", isRef(mv) || (typeof r.value === "string" && !!refInfo(r.value)));
      r.model = mv;
      return r;
    };
    const commit = () => {
      const r = validate();
      if (r.error) return;
      if (r.value === undefined) delete step.args[p.name]; else step.args[p.name] = r.model;
      changed({ typing: input });
    };
    input.addEventListener(input.tagName === "SELECT" ? "change" : "input", commit);
    input._validate = validate;
    row.append(label, typeTag, input, refBtn, err);
    if (p.note) row.appendChild(el("span", { class: "arg-note hint", text: p.note }));
    setTimeout(validate, 0);
    return row;
  }
  function selectStep(i, focus) {
    if (i < 0 || !state.steps.length) return;
    state.selected = i;
    $$("#steps > li").forEach((li, k) => li.classList.toggle("selected", k === i));
    const li = $$("#steps > li")[i];
    if (focus && li) { li.focus({ preventScroll: true }); li.scrollIntoView({ block: "nearest" }); }
  }
  function clearOutputs() { state.stepValues = {}; state.stepStatus = {}; }
  // Every edit that changes the structure: one undo step; references follow their steps by uid.
  function structural(fn) {
    if (state.readOnly) return false;
    if (fn() === false) return false;
    clearOutputs();
    changed({ structural: true });
    renderSteps();
    refreshAnswerSources();
    return true;
  }
  function insertStep(at, pick) {
    if (!structural(() => { insertStepAt(state, at); })) return;
    if (pick !== false) openToolPicker(at);
  }
  function addStep() { insertStep(state.steps.length ? state.selected + 1 : 0); }
  function deleteStep(i) {
    const removed = state.steps[i];
    if (!removed) return;
    structural(() => { deleteStepAt(state, i); });
    if (removed) toast(`Step ${i} (${removed.call || "no tool"}) deleted.`, { label: "Undo (u)", run: undo });
  }
  function duplicateStep(i) {
    if (!state.steps[i]) return;
    structural(() => { duplicateStepAt(state, i); });
  }
  function moveStep(i, delta) {
    const j = i + delta;
    if (j < 0 || j >= state.steps.length) return;
    if (structural(() => { moveStepBy(state, i, delta); })) selectStep(j, true);
  }
  function refreshAnswerSources() {
    answerRows().forEach((tr) => { $(".ans-source", tr).value = showArg(tr._source); tr._validate(); });
  }

  // ------------------------------------------------------------------ undo / redo: snapshots of the model
  const undoLog = new UndoLog(200);
  function snapshot() { return JSON.stringify({ model: model(), selected: state.selected }); }
  function record(opts) {
    if (undoLog.record(snapshot(), opts && opts.typing ? opts.typing : null, Date.now())) updateUndoButtons();
  }
  function travel(direction) {
    if (state.readOnly) return;
    const current = undoLog.travel(direction);
    if (current === null) return;
    const snap = JSON.parse(current);
    restoring = true;
    try { load(snap.model, { model: true }); } finally { restoring = false; }
    state.selected = Math.min(snap.selected, Math.max(state.steps.length - 1, 0));
    selectStep(state.selected, false);
    clearOutputs();
    renderStepOutputs();
    changed({ restoring: true });
    updateUndoButtons();
  }
  function undo() { travel("undo"); }
  function redo() { travel("redo"); }
  function updateUndoButtons() {
    if ($("#undo")) $("#undo").disabled = state.readOnly || !undoLog.undo.length;
    if ($("#redo")) $("#redo").disabled = state.readOnly || !undoLog.redo.length;
  }
  let restoring = false;
  $("#add-step").onclick = () => addStep();
  document.body.appendChild(el("datalist", { id: "file-names" }, layers.map((l) => el("option", { value: l.file_name, label: `${l.kind}${l.phase ? " · " + l.phase : ""}` }))));

  // ------------------------------------------------------------------ pickers (pickers.js)
  const { openToolPicker, openRefPicker, closePickers } = initPickers({ state, tools, toast, chooseTool: (i, name) => chooseTool(i, name) });
  function chooseTool(i, name) {
    const step = state.steps[i];
    const tool = toolByName[name];
    closePickers();
    // references to this step keep pointing at it; a key the new tool does not return shows as broken
    structural(() => { changeTool(step, tool); });
    const first = $$("#steps > li")[i] && $(".arg", $$("#steps > li")[i]);
    if (first) first.focus();
  }

  // ------------------------------------------------------------------ JSON view
  function setJsonView(on) {
    if (on === state.jsonView) return;
    if (!on) {
      const errs = validateJson();
      if (errs.hard) { toast("Fix the JSON before switching back to the form."); return; }
    }
    state.jsonView = on;
    $("#steps-form").hidden = on;
    $("#steps-json").hidden = !on;
    $("#view-form").classList.toggle("active", !on);
    $("#view-json").classList.toggle("active", on);
    if (on) {
      $("#trajectory-json").value = JSON.stringify(payload().trajectory, null, 2);
      $("#json-errors").innerHTML = "";
      $("#trajectory-json").focus();
    } else renderSteps();
  }
  function validateJson() {  // -> {hard: bool}; applies to `state.steps` when the structure is right
    const ul = $("#json-errors");
    ul.innerHTML = "";
    const text = $("#trajectory-json").value;
    const add = (msg, cls) => ul.appendChild(el("li", { class: cls || "", text: msg }));
    let data;
    try {
      data = JSON.parse(text);
    } catch (e) {
      const m = /position (\d+)/.exec(e.message);
      if (m) {
        const pos = parseInt(m[1], 10), before = text.slice(0, pos);
        add(`JSON: ${e.message} (line ${before.split("\n").length}, column ${pos - before.lastIndexOf("\n")})`);
      } else add(`JSON: ${e.message}`);
      return { hard: true };
    }
    if (!Array.isArray(data)) { add("The trajectory is a JSON list of steps."); return { hard: true }; }
    let hard = false;
    data.forEach((s, i) => {
      if (!s || typeof s !== "object" || Array.isArray(s)) { add(`[${i}]: a step is an object {"call", "args"}`); hard = true; return; }
      const extra = Object.keys(s).filter((k) => !["call", "args", "obs", "purpose", "thought"].includes(k));
      if (typeof s.call !== "string") { add(`[${i}].call: a tool name (string) is required`); hard = true; return; }
      if (s.args !== undefined && (typeof s.args !== "object" || Array.isArray(s.args) || s.args === null)) { add(`[${i}].args: must be an object`); hard = true; return; }
      if (extra.length) add(`[${i}]: unknown key(s) ${extra.join(", ")} are dropped`, "warning");
      const t = toolByName[s.call.split("(")[0].trim()];
      if (!t) { add(`[${i}].call: unknown tool '${s.call}'`, "warning"); return; }
      const names = t.params.map((p) => p.name);
      Object.keys(s.args || {}).filter((k) => !names.includes(k)).forEach((k) => add(`[${i}].args.${k}: not a parameter of ${t.name} (${names.join(", ")})`, "warning"));
      t.params.filter((p) => p.required && (s.args || {})[p.name] === undefined).forEach((p) => add(`[${i}].args.${p.name}: required`, "warning"));
      Object.entries(s.args || {}).forEach(([k, v]) => {
        const r = typeof v === "string" ? refInfo(v) : null;
        if (r && r.index >= i) add(`[${i}].args.${k}: trajectory[${r.index}] is not an earlier step`, "warning");
      });
    });
    if (!hard) {
      // the text names positions: step k keeps the uid of the step now at k, references bind by index
      const uids = state.steps.map((x) => x.uid);
      state.steps = data.map((s, k) => ({ uid: uids[k] !== undefined ? uids[k] : state.nextUid++, call: s.call.split("(")[0].trim(), args: s.args ? JSON.parse(JSON.stringify(s.args)) : {} }));
      state.steps.forEach((x) => { x.args = bind(x.args); });
      if (!ul.children.length) ul.appendChild(el("li", { class: "ok", text: `valid: ${state.steps.length} step(s)` }));
    }
    return { hard };
  }
  $("#trajectory-json").addEventListener("input", () => { const r = validateJson(); if (!r.hard) { refreshAnswerSources(); changed({ typing: $("#trajectory-json") }); } });
  $("#view-form").onclick = () => setJsonView(false);
  $("#view-json").onclick = () => setJsonView(true);

  // ------------------------------------------------------------------ answer spec
  function answerRows() { return $$("#answers tbody tr"); }
  function addAnswer(f, isModel) {
    f = f || {};
    const tr = el("tr", { class: "answer-row" });
    const name = el("input", { class: "ans-name", value: f.name || "", placeholder: "intersecting_count", "aria-label": "answer field name" });
    const type = el("select", { class: "ans-type", "aria-label": "eval_spec type" });
    CFG.eval_types.forEach((t) => type.appendChild(el("option", { value: t, text: t })));
    type.value = f.eval_type || "scalar_count";
    const src = el("input", { class: "ans-source", value: showArg(f.source), placeholder: "<count> from trajectory[2].obs", size: 34, "aria-label": "answer source" });
    const fmt = el("input", { class: "ans-format", value: f.answer_format || "", placeholder: "optional note for the agent", "aria-label": "answer_format" });
    const err = el("div", { class: "field-error" });
    const refBtn = el("button", { type: "button", class: "icon ref-button", text: "⤷ ref", title: "Bind to a step's output (r)",
      onclick: () => openRefPicker(src, state.steps.length, null) });
    const drawBtn = el("button", { type: "button", class: "icon draw-button", text: "✎ draw", title: "Draw the geometry on the map", onclick: () => startDraw(tr) });
    const filled = el("td", { class: "ans-value" });
    const rm = el("button", { type: "button", class: "icon", text: "×", title: "remove field", onclick: () => { tr.remove(); changed(); } });
    tr._source = isModel ? f.source : bind(f.source);
    const validate = () => {
      const v = src.value.trim();
      let msg = "";
      if (!v) msg = "no source";
      else msg = refProblem(tr._source, state.steps.length) || (/^</.test(v) && !isRef(tr._source) && !refInfo(v) ? "a reference reads <key> from trajectory[N].obs" : "");
      err.textContent = msg;
      tr.classList.toggle("broken-ref", !!msg && !!v);
      src.classList.toggle("is-ref", isRef(tr._source));
      drawBtn.hidden = !/polygon|point/.test(type.value) && !/_(row|col|lat|lon|latitude|longitude)$/.test(name.value);
    };
    src.addEventListener("input", () => {
      if (src.value !== showArg(tr._source)) tr._source = bind(parseSource(src.value));
      validate();
      changed({ typing: src });
    });
    [name, fmt].forEach((x) => x.addEventListener("input", () => { validate(); changed({ typing: x }); }));
    type.addEventListener("change", () => { validate(); changed(); });
    tr.append(el("td", {}, name), el("td", {}, type), el("td", { class: "src-cell" }, src, refBtn, drawBtn, err), el("td", {}, fmt), filled, el("td", {}, rm));
    [name, type, src, fmt, refBtn, drawBtn, rm].forEach((x) => { x.disabled = state.readOnly; });
    $("#answers tbody").appendChild(tr);
    tr._validate = validate;
    validate();
    return tr;
  }
  $("#add-answer").onclick = () => { const tr = addAnswer(); $(".ans-name", tr).focus(); changed(); };

  // ------------------------------------------------------------------ the map and drawing (map_glue.js)
  const map = initMap({ state, layers: MAPCFG.layers, toast, changed: () => changed(), answerRows: () => answerRows(),
    addAnswer: (f) => addAnswer(f), parseSource });
  const { currentMap, startDraw, showLiteralGeometries } = map;

  // ------------------------------------------------------------------ payload, dirty tracking, save
  // the editor's model: the payload's shape, steps with their uids, references as {"$ref": uid, key}
  function model() {
    const { input_layers, input_data } = inputRows();
    return JSON.parse(JSON.stringify({
      event: $("#event").value, dimension: $("#dimension").value, question: $("#question").value,
      task_category: $("#task-category").value.trim(), task_category_code: $("#task-category-code").value.trim(),
      disaster_type: $("#disaster-type").value.trim(),
      input_layers, input_data,
      trajectory: state.steps.map((s) => ({ uid: s.uid, call: s.call, args: s.args || {} })),
      answer_spec: answerRows().map((tr) => ({
        name: $(".ans-name", tr).value.trim(), eval_type: $(".ans-type", tr).value,
        source: tr._source === undefined ? "" : tr._source, answer_format: $(".ans-format", tr).value.trim(),
      })),
    }));
  }
  // what is saved, drafted and checked: the model with every reference written at its step's index now
  function payload() {
    const m = model();
    m.trajectory = m.trajectory.map((s) => ({ call: s.call, args: wire(s.args) }));
    m.answer_spec = m.answer_spec.map((f) => ({ ...f, source: wire(f.source) }));
    return m;
  }
  function load(content, opts) {
    const isModel = !!(opts && opts.model);
    $("#question").value = content.question || "";
    $("#task-category").value = content.task_category || "";
    $("#task-category-code").value = content.task_category_code || "";
    $("#disaster-type").value = content.disaster_type || "";
    if (content.dimension) $("#dimension").value = content.dimension;
    refreshCategories();
    if (content.input_layers) {  // a draft: {key: layer id} + verbatim entries
      loadInputData(content.input_data || {});
      Object.entries(content.input_layers).forEach(([k, id]) => addInput(k, id));
      renderPreview();
    } else loadInputData(content.input_data || {});
    if (isModel) {
      state.steps = (content.trajectory || []).map((s) => ({ uid: s.uid, call: s.call || "", args: JSON.parse(JSON.stringify(s.args || {})) }));
      state.nextUid = Math.max(state.nextUid, ...state.steps.map((s) => s.uid + 1));
    } else {
      state.steps = (content.trajectory || []).map((s) => ({ uid: state.nextUid++, call: s.call || "", args: JSON.parse(JSON.stringify(s.args || {})) }));
      state.steps.forEach((s) => { s.args = bind(s.args); });
    }
    $("#answers tbody").innerHTML = "";
    (content.answer_spec || []).forEach((f) => addAnswer(f, isModel));
    if (state.jsonView) $("#trajectory-json").value = JSON.stringify(payload().trajectory, null, 2);
    renderSteps();
  }
  let draftTimer = null;
  let baseline = "";
  // answer fields renamed since the saved revision ({old: new}, state.js answerRenames): comments
  // pinned to the old name are shown under the new one as it is typed, and follow it on save
  function pendingRenames(spec) {
    return baseline ? answerRenames(JSON.parse(baseline).answer_spec, spec || payload().answer_spec) : {};
  }
  let shownRenames = "{}";
  function relabelComments() {
    const key = JSON.stringify(pendingRenames());
    if (key !== shownRenames) { shownRenames = key; renderPinnedComments(); }
  }
  function changed(opts) {
    if (state.readOnly || restoring) return;
    if (!(opts && opts.restoring)) record(opts);
    const now = JSON.stringify(payload());
    const outcome = changeOutcome(now, lastChecked, baseline, draftKept);
    if (outcome.stale) { markReplayStale(); scheduleQc(); }
    lastChecked = now;
    relabelComments();
    state.dirty = outcome.dirty;
    if (!state.dirty) {  // back to the saved revision (undo): a draft of the edits undone is not kept
      setSaveState("saved", savedText());
      if (outcome.draft === "discard") discardDraft();
      else clearTimeout(draftTimer);
      return;
    }
    setSaveState("dirty", "Unsaved changes");
    clearTimeout(draftTimer);
    draftTimer = setTimeout(saveDraft, 1200);
  }
  function markClean() { baseline = JSON.stringify(payload()); lastChecked = baseline; state.dirty = false; draftKept = false; setSaveState("saved", savedText()); }
  let lastChecked = "";
  const localKey = `studio-new-task:${CFG.event.slug}`;
  // whether this editor autosaved a draft that is still kept (server, or this browser for a new task),
  // and the autosave under way (a discard waits for it, so the draft cannot come back after it)
  let draftKept = false;
  let draftInFlight = null;
  async function discardDraft() {
    clearTimeout(draftTimer);
    draftKept = false;
    await draftInFlight;
    if (state.dirty) return;  // edited again meanwhile: the next autosave keeps those edits
    if (!state.id) { try { localStorage.removeItem(localKey); } catch (e) { /* private mode */ } return; }
    await send("DELETE", `/api/tasks/${state.id}/draft/`).catch(() => null);
  }
  async function saveDraft() {
    if (!state.dirty || state.readOnly) return;
    const content = payload();
    if (!state.id) {  // a task that does not exist yet: keep the draft in this browser until the first save
      try { localStorage.setItem(localKey, JSON.stringify({ content, at: new Date().toISOString() })); draftKept = true; } catch (e) { /* private mode */ }
      setSaveState("draft", `Draft kept in this browser ${new Date().toLocaleTimeString()} · not saved yet`);
      return;
    }
    draftInFlight = send("PUT", `/api/tasks/${state.id}/draft/`, { base_version: state.version, content }).catch(() => null);
    const resp = await draftInFlight;
    const s = $("#save-state");
    if (resp && resp.ok) {
      draftKept = true;
      s.dataset.draftAt = new Date().toISOString();
      if (s.dataset.state === "conflict") s.textContent = s.textContent.replace(/ · your edits are kept.*$/, "") + " · your edits are kept in a server draft";
      else if (state.dirty && s.dataset.state !== "error") setSaveState("draft", `Draft autosaved ${new Date().toLocaleTimeString()} · not a revision yet`);
    } else if (s.dataset.state !== "conflict") setSaveState("error", "Draft not autosaved (offline?) · keep this tab open");
  }
  async function save(opts) {
    opts = opts || {};
    if (state.readOnly) return false;
    if (state.jsonView && validateJson().hard) { toast("The JSON view has errors: fix them before saving."); return false; }
    // a broken reference is never saved (the server refuses it too): say where, keep the edits in the draft
    const broken = brokenRefs();
    if (broken.length) {
      setSaveState("error", `Not saved: ${broken.length} broken reference${broken.length > 1 ? "s" : ""}`);
      showErrors(broken);
      jumpTo(broken[0].split(":")[0]);
      saveDraft();
      return false;
    }
    clearTimeout(draftTimer);
    setSaveState("saving", "Saving…");
    showErrors([]);
    const body = payload();
    const version = opts.expectedVersion !== undefined ? opts.expectedVersion : state.version;
    let resp;
    try {
      resp = state.id
        ? await send("PUT", `/api/tasks/${state.id}/`, { ...body, expected_version: version, message: opts.message || "" })
        : await send("POST", "/api/tasks/", body);
    } catch (e) {
      setSaveState("error", "Not saved: the server cannot be reached");
      return false;
    }
    const data = await resp.json().catch(() => ({}));
    if (resp.status === 200 || resp.status === 201) {
      const created = !state.id;
      state.id = data.id;
      state.version = data.version;
      state.status = data.status;
      if (created) {
        try { localStorage.removeItem(localKey); } catch (e) { /* ignore */ }
        history.replaceState(null, "", `/tasks/${data.id}/edit/`);
        document.title = `Edit ${data.question_id}`;
        $("h1", $("#editor-bar")).firstChild.textContent = `${data.question_id} `;
        $("#event").disabled = true;
        addTaskLinks(data.id);
      }
      comments.followRenames(pendingRenames(body.answer_spec));  // the server moved their pins too
      markClean();
      relabelComments();
      comments.syncFields();  // then the server's pins (a save over a conflict renames from its head)
      renderQc(data.qc || [], null, data.version);
      renderTransitions(data.actions || []);
      $("#conflict").hidden = true;
      toast(created ? `Created ${data.question_id} (r1).` : `Saved revision r${data.version}.`);
      if (!opts.noReplay) replay();  // a new revision gets its replay: the filled answer is never stale
      return true;
    }
    if (resp.status === 409) { showConflict(data, body); setSaveState("conflict", `Conflict: r${data.version} is newer than your r${state.version}`); saveDraft(); return false; }
    if (resp.status === 423) { setSaveState("error", "Locked"); showErrors([data.detail]); return false; }
    setSaveState("error", "Not saved: see the errors");
    showErrors(data.qc ? data.qc.map((f) => `${f.location}: ${f.message}`) : flatten(data));
    if (data.qc && data.qc.length) jumpTo(data.qc[0].location);
    return false;
  }
  function addTaskLinks(id) {
    if ($("#history-link")) return;
    $("#help-button").before(el("a", { class: "button", href: `/tasks/${id}/`, id: "review-link", text: "Review page" }), " ",
      el("a", { class: "button", href: `/tasks/${id}/history/`, id: "history-link", text: "History" }), " ");
  }
  $("#save-task").onclick = () => save();

  // ------------------------------------------------------------------ conflict: both versions side by side
  function versionBlock(c) {
    const box = el("div", {});
    box.appendChild(el("p", { class: "conflict-q" }, el("b", { text: "Query: " }), c.question || ""));
    const ol = el("ol", { start: "0", class: "conflict-steps" });
    (c.trajectory || []).forEach((s) => ol.appendChild(el("li", {}, el("code", { text: s.call }), " ", el("span", { class: "hint", text: JSON.stringify(s.args || {}) }))));
    box.appendChild(ol);
    const ans = el("ul", {});
    (c.answer_spec || []).forEach((f) => ans.appendChild(el("li", {}, el("code", { text: f.name }), ` (${f.eval_type}) ← ${showArg(f.source)}`)));
    box.appendChild(ans);
    return box;
  }
  function markDiff(theirs, mine) {
    const a = $$("li, p", theirs), b = $$("li, p", mine);
    b.forEach((x, k) => { if (!a[k] || a[k].textContent !== x.textContent) x.classList.add("differs"); });
    a.forEach((x, k) => { if (!b[k] || b[k].textContent !== x.textContent) x.classList.add("differs"); });
  }
  let conflictTheirs = null;
  function showConflict(data, mine) {
    conflictTheirs = data;
    const head = data.head || {};
    $("#conflict-text").textContent = `${data.detail || ""}. Revision r${data.version}${head.author ? " by " + head.author : ""} was saved after the r${state.version} you started from. Nothing of yours was discarded: compare, then choose.`;
    $("#theirs-label").textContent = `(r${data.version}${head.author ? ", " + head.author : ""})`;
    const t = versionBlock(head), m = versionBlock(mine);
    $("#conflict-theirs").innerHTML = "";
    $("#conflict-mine").innerHTML = "";
    $("#conflict-theirs").appendChild(t);
    $("#conflict-mine").appendChild(m);
    markDiff(t, m);
    $("#conflict").hidden = false;
    $("#conflict-keep-mine").focus();
  }
  $("#conflict-keep-mine").onclick = async () => {
    const v = conflictTheirs.version;
    $("#conflict").hidden = true;
    await save({ expectedVersion: v, message: `kept my edits over r${v}` });
  };
  $("#conflict-take-theirs").onclick = () => {
    const mine = payload();
    const ours = baseline ? JSON.parse(baseline).answer_spec : [];
    state.version = conflictTheirs.version;
    // their revisions may have renamed answer fields, and the server moved those pins: follow at
    // once by the rule (from the revision this editor loaded to theirs), then read the server's
    comments.followRenames(answerRenames(ours, (conflictTheirs.head || {}).answer_spec));
    load(conflictTheirs.head);
    markClean();
    relabelComments();
    comments.syncFields();
    $("#conflict").hidden = true;
    // keep mine retrievable: the server draft holds them (autosaved on the conflict); say so
    toast(`Loaded r${state.version}. Your edits stay in the server draft until you save.`, { label: "Put mine back", run: () => { load(mine); changed(); } });
  };
  $("#conflict-close").onclick = () => { $("#conflict").hidden = true; };

  // ------------------------------------------------------------------ replay from the editor
  let replaying = null, replayQueued = null, replayingVersion = null;
  // -> true when the head revision's replay succeeded (saving first when needed). A call while a
  // replay runs (a save in the meantime) waits for it, then replays the new head once.
  async function replay() {
    if (replaying && state.version === replayingVersion && !state.dirty) return replaying;  // that head is being replayed
    if (replaying) {
      if (!replayQueued) replayQueued = replaying.catch(() => false).then(() => { replayQueued = null; return replay(); });
      return replayQueued;
    }
    replaying = (async () => {
      if (!state.id || state.dirty) { if (!(await save({ noReplay: true }))) return false; }
      replayingVersion = state.version;
      $("#replay-task").disabled = true;
      $("#replay-status").textContent = "starting…";
      $("#replay-status").className = "";
      clearFilled("(replaying…)");
      clearReplayStale();
      state.stepValues = {};
      state.stepStatus = {};
      renderStepOutputs();
      try {
        const run = await R.start(state.id);
        return (await followReplay(run.id)).status === "succeeded";
      } catch (e) {
        $("#replay-status").textContent = e.message;
        $("#replay-status").className = "failed";
        return false;
      } finally {
        $("#replay-task").disabled = false;
      }
    })();
    try { return await replaying; } finally { replaying = null; }
  }
  function clearFilled(text) {
    answerRows().forEach((tr) => { $(".ans-value", tr).textContent = ""; });
    $("#final-answer").textContent = text;
    $("#replay-hash").textContent = "";
  }
  async function followReplay(runId) {
    const run = await R.poll(runId, renderRun);
    if (run.status === "succeeded") {
      const specs = await R.overlays(run.id);
      map.clearOverlays();
      specs.forEach((spec) => {
        const li = $$("#steps > li")[spec.step];
        const out = li && $(".step-output", li);
        if (spec.kind === "image") { if (out) out.appendChild(el("img", { class: "step-chart", src: spec.url, alt: spec.name })); return; }
        if (spec.kind === "error") { if (out) out.appendChild(el("p", { class: "field-error", text: spec.error })); return; }
        map.addOverlay(spec);
        if (out) out.appendChild(el("span", { class: "badge overlay-badge", text: `on the map: ${spec.key}` }));
      });
    }
    return run;
  }
  function renderRun(run) {
    const prog = $("#replay-progress");
    prog.max = Math.max(run.steps_total, 1);
    prog.value = run.steps_done;
    const failedStep = run.steps.find((x) => x.status === "failed");
    $("#replay-status").textContent = `${run.status} · ${run.steps_done}/${run.steps_total} steps` +
      (failedStep ? ` · failed at step ${failedStep.index} (${failedStep.call || "?"})` : "") + (run.error ? ` · ${run.error}` : "");
    $("#replay-status").className = run.status;
    state.replayShown = true;
    state.stepValues = {};
    state.stepStatus = {};
    run.steps.forEach((s) => { state.stepStatus[s.index] = s; if (s.obs) state.stepValues[s.index] = s.obs; });
    renderStepOutputs();
    if (run.status === "succeeded") {
      $("#final-answer").textContent = JSON.stringify(run.final_answer, null, 2);
      $("#replay-hash").textContent = run.replay_hash;
      answerRows().forEach((tr) => {
        const n = $(".ans-name", tr).value.trim();
        $(".ans-value", tr).textContent = run.final_answer && n in run.final_answer ? showArg(run.final_answer[n]) : "";
      });
    } else if (run.status === "failed") {
      // nothing of an older replay stays on show: the filled values go, the failing step is shown
      clearFilled(`(no answer: the replay failed${failedStep ? ` at step ${failedStep.index}` : ""})`);
      const li = failedStep && $$("#steps > li")[failedStep.index];
      if (li && !renderRun.shownFailure) { renderRun.shownFailure = true; selectStep(failedStep.index, false); li.scrollIntoView({ block: "nearest" }); }
    }
  }
  function renderStepOutputs() {
    $$("#steps > li").forEach((li, i) => {
      const out = $(".step-output", li);
      const s = (state.stepStatus || {})[i];
      li.classList.remove("succeeded", "failed", "skipped", "pending");
      if (!s) { out.innerHTML = ""; return; }
      li.classList.add(s.status);
      if (out.dataset.run === String(s.status) + (s.duration_ms || "")) return;
      out.dataset.run = String(s.status) + (s.duration_ms || "");
      out.innerHTML = "";
      out.appendChild(el("div", { class: "out-head" }, el("span", { class: `badge ${s.status}`, text: s.status }),
        s.duration_ms != null ? el("span", { class: "meta", text: ` ${s.duration_ms.toFixed(1)} ms` }) : null));
      if (s.error) out.appendChild(el("p", { class: "field-error", text: s.error }));
      const vals = R.obsValues(s.obs);
      if (vals.length) {
        const tbl = el("table", { class: "obs-values" });
        vals.forEach(([k, v]) => tbl.appendChild(el("tr", {}, el("th", { text: k }), el("td", {}, el("code", { text: v })))));
        out.appendChild(tbl);
      }
    });
  }
  $("#replay-task").onclick = () => replay();

  // ------------------------------------------------------------------ QC, transitions, comments
  // QC (qc.js): the server's suite a moment after each change; findings jump to their step or field
  const qc = initQc({ state, eventSlug: CFG.event.slug, payload: () => payload(), flatten, jumpTo: (loc) => jumpTo(loc),
    brokenRefAt: (loc) => refs.brokenRefAt(brokenRefs(), loc) });
  function scheduleQc(now) { qc.schedule(now); }
  function renderQc(findings, failure, version) { qc.render(findings, failure, version); }
  function jumpTo(location) {  // "trajectory[2].args.meter", "answer_spec[0].source", "final_answer.x", "question", "input_data.k"
    let m = /^trajectory\[(\d+)\](?:\.args\.([A-Za-z_]\w*))?/.exec(location || "");
    if (m) {
      if (state.jsonView) setJsonView(false);
      const i = parseInt(m[1], 10);
      const li = $$("#steps > li")[i];
      if (!li) return;
      selectStep(i, true);
      const target = (m[2] && $(`.arg[data-name="${CSS.escape(m[2])}"]`, li)) || $(".tool-button", li);
      flash(target || li);
      return;
    }
    m = /^answer_spec\[(\d+)\]/.exec(location || "");
    let row = m ? answerRows()[parseInt(m[1], 10)] : null;
    m = /^(?:replay\.)?final_answer\.(.+)$/.exec(location || "");
    if (m) row = answerRows().find((tr) => $(".ans-name", tr).value.trim() === m[1]);
    if (row) { flash($(".ans-source", row)); return; }
    if (/^question/.test(location)) { flash($("#question")); return; }
    m = /^input_data\.(.+)$/.exec(location || "");
    const inRow = m && $$("#manifest .input-row").find((r) => $(".input-key", r).value.trim() === m[1]);
    if (inRow) { flash($(".input-layer", inRow)); return; }
    flash($("#qc-box"));
  }
  function flash(node) {
    if (!node) return;
    node.scrollIntoView({ block: "center" });
    if (node.focus) node.focus({ preventScroll: true });
    node.classList.add("flash");
    setTimeout(() => node.classList.remove("flash"), 1500);
  }

  // ------------------------------------------------------------------ replay staleness
  function markReplayStale() {
    if (!state.replayShown || state.replayStale) return;
    state.replayStale = true;
    $("#replay-card").classList.add("stale");
    $("#answer-card").classList.add("stale");
    $("#steps").classList.add("stale");
    $("#replay-stale").hidden = false;
  }
  function clearReplayStale() {
    state.replayStale = false;
    $("#replay-card").classList.remove("stale");
    $("#answer-card").classList.remove("stale");
    $("#steps").classList.remove("stale");
    $("#replay-stale").hidden = true;
  }
  function renderTransitions(actions) {
    const box = $("#transition-buttons");
    box.innerHTML = "";
    (actions || []).forEach((a) => {
      const name = typeof a === "string" ? a : a.name;
      if (name !== "submit" && name !== "withdraw") return;  // review actions live on the review page
      box.appendChild(el("button", { type: "button", id: `do-${name}`, class: name === "submit" ? "primary" : "",
        text: name === "submit" ? "Submit for review" : "Withdraw", onclick: () => transition(name) }));
    });
  }
  async function transition(name) {
    // the reviewer judges the filled answer of the head revision: unsaved edits are saved and replayed first
    if (name === "submit" && (state.dirty || state.replayStale)) { if (!(await replay())) return; }
    const resp = await send("POST", `/api/tasks/${state.id}/transitions/`, { action: name });
    const data = await resp.json().catch(() => ({}));
    if (!resp.ok) { qc.refused(data, resp.status); return; }
    location.href = `/tasks/${state.id}/`;
  }
  // review comments (comments.js): drawn again with the steps
  const comments = initComments({ task: T, state, userName: CFG.user.name, toast, showMarkers: (threads) => map.showCommentMarkers(threads),
    renames: () => pendingRenames() });
  const threads = comments.threads;
  function renderPinnedComments() { comments.render(); }

  // ------------------------------------------------------------------ banners (returned, draft, read-only)
  function banner(cls, kids) { const b = el("div", { class: `banner ${cls}` }, kids); $("#banners").appendChild(b); return b; }
  function setReadOnly() {
    $$("#task-form input, #task-form select, #task-form textarea, #task-form button").forEach((x) => { x.disabled = true; });
    $("#save-task").hidden = true;
    setSaveState("locked", `Read-only · ${state.status}`);
  }

  // ------------------------------------------------------------------ keyboard
  function typing(e) { const t = e.target; return t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable); }
  function toggleHelp(show) { $("#help").hidden = show === undefined ? !$("#help").hidden : !show; if (!$("#help").hidden) $("#help-close").focus(); }
  $("#help-button").onclick = () => toggleHelp(true);
  $("#help-close").onclick = () => toggleHelp(false);
  document.addEventListener("keydown", (e) => {
    const mod = e.ctrlKey || e.metaKey;
    if (mod && (e.key === "s" || e.key === "S")) { e.preventDefault(); save(); return; }
    if (mod && e.key === "Enter") { e.preventDefault(); replay(); return; }
    if (mod && !typing(e) && (e.key === "z" || e.key === "Z" || e.key === "y")) { e.preventDefault(); if (e.key === "y" || e.shiftKey) redo(); else undo(); return; }
    if (e.key === "Escape") {
      if (!$("#help").hidden) { toggleHelp(false); return; }
      if (!$("#conflict").hidden) { $("#conflict").hidden = true; return; }
      const m = currentMap();
      if (m && m.map.pm && m.map.pm.globalDrawModeEnabled()) { m.map.pm.disableDraw(); $("#draw-hint").textContent = ""; return; }
      if (typing(e) && !e.target.closest(".picker")) { e.target.blur(); const li = $$("#steps > li")[state.selected]; if (li) li.focus({ preventScroll: true }); }
      return;
    }
    if ((e.key === "r" || e.key === "R" || e.code === "KeyR") && typing(e) && e.altKey) { e.preventDefault(); refForFocused(e.target); return; }
    if (typing(e) || mod || e.altKey && !/Arrow/.test(e.key)) return;
    if (e.altKey && e.key === "ArrowUp") { e.preventDefault(); moveStep(state.selected, -1); return; }
    if (e.altKey && e.key === "ArrowDown") { e.preventDefault(); moveStep(state.selected, 1); return; }
    const keys = {
      "?": () => toggleHelp(),
      a: () => addStep(),
      i: () => insertStep(state.steps.length ? state.selected : 0),
      j: () => selectStep(Math.min(state.steps.length - 1, state.selected + 1), true),
      k: () => selectStep(Math.max(0, state.selected - 1), true),
      "/": () => state.steps.length ? openToolPicker(state.selected) : addStep(),
      d: () => deleteStep(state.selected),
      c: () => duplicateStep(state.selected),
      u: () => undo(),
      U: () => redo(),
      t: () => setJsonView(!state.jsonView),
      f: () => { const tr = addAnswer(); $(".ans-name", tr).focus(); changed(); },
      h: () => { if (state.id) location.href = `/tasks/${state.id}/history/`; },
      r: () => refForFocused(document.activeElement),
    };
    if (!keys[e.key] || (state.readOnly && !"?jkht".includes(e.key))) return;
    e.preventDefault();
    keys[e.key]();
  });
  function refForFocused(target) {
    const li = target && target.closest && target.closest("#steps > li");
    const i = li ? parseInt(li.dataset.index, 10) : state.selected;
    const input = target && target.classList && (target.classList.contains("arg") || target.classList.contains("ans-source")) ? target
      : (li || $$("#steps > li")[i]) ? $(".arg", li || $$("#steps > li")[i]) : null;
    if (!input) return;
    if (input.classList.contains("ans-source")) openRefPicker(input, state.steps.length, null);
    else {
      const tool = toolByName[(state.steps[i] || {}).call];
      openRefPicker(input, i, tool && tool.params.find((p) => p.name === input.dataset.name));
    }
  }
  window.addEventListener("beforeunload", (e) => { if (state.dirty) { saveDraft(); e.preventDefault(); e.returnValue = ""; } });

  // ------------------------------------------------------------------ start
  ["#question", "#task-category", "#task-category-code", "#disaster-type"].forEach((s) => $(s).addEventListener("input", (e) => changed({ typing: e.target })));
  if (T) {
    $("#dimension").value = T.dimension;
    $("#dimension").disabled = true;
    $("#dimension").title = "The dimension is fixed when a task is created (it decides its release file).";
    load({ ...T.content, dimension: T.dimension });
    renderTransitions(T.actions);
    if (T.returned) banner("returned", [el("b", { text: `Returned by ${T.returned.by}: ` }), T.returned.reason,
      el("span", { class: "hint", text: ` — ${threads.filter((c) => !c.resolved).length} open comment(s) below and on the steps.` })]);
  } else {
    $("#disaster-type").value = CFG.event.disaster_type || "";
    refreshCategories();
    // the event's imagery by default (the skeleton's behaviour): pre and post when present
    const pre = layers.find((l) => l.kind === "raster" && l.phase === "pre");
    const post = layers.find((l) => l.kind === "raster" && l.phase === "post");
    if (pre) addInput("pre_image", pre.id);
    if (post) addInput("post_image", post.id);
    renderPreview();
    addAnswer();
    renderSteps();
  }
  markClean();
  undoLog.current = snapshot();  // the starting point
  updateUndoButtons();
  scheduleQc(true);
  showLiteralGeometries();
  renderPinnedComments();
  if (state.readOnly) {
    setReadOnly();
    banner("locked", [`This task is ${state.status}${T && !T.can_edit && ["draft", "returned"].includes(state.status) ? " and not yours to edit" : ""}: the editor is read-only. `,
      state.status === "submitted" || state.status === "in_review" ? "The author can withdraw it to edit again." : ""]);
  }
  // offer to restore unsaved work: the server draft (existing task) or this browser's (new task)
  const draft = T ? T.draft : (() => { try { return JSON.parse(localStorage.getItem(localKey) || "null"); } catch (e) { return null; } })();
  if (offersDraft(draft, state.readOnly, baseline)) {
    const at = new Date(draft.updated_at || draft.at);
    const sameDay = at.toDateString() === new Date().toDateString();
    const when = sameDay ? at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) : at.toLocaleString();
    const b = banner("draft", [`Restore the draft of ${when}? `, el("span", { class: "hint", text: `Unsaved edits${T ? ` started from r${draft.base_version}` : " of a task not created yet, kept in this browser"}. ` })]);
    b.appendChild(el("button", { type: "button", id: "restore-draft", class: "primary", text: "Restore them", onclick: () => {
      load(draft.content);
      if (T && draft.base_version < state.version) toast(`Those edits started from r${draft.base_version}; saving will show what changed since.`);
      if (T) state.version = draft.base_version;
      changed();
      b.remove();
    } }));
    b.appendChild(el("button", { type: "button", text: "Discard", onclick: async () => { await discardDraft(); b.remove(); } }));
  }
  if (T && T.latest_replay) followReplay(T.latest_replay).catch(() => {});
  $("#undo").onclick = () => undo();
  $("#redo").onclick = () => redo();
  window.studioEditor = { addStep, insertStep, deleteStep, duplicateStep, moveStep, chooseTool, undo, redo, addAnswer, addInput,
    save, replay, payload, brokenRefs, setJsonView, state, steps: () => state.steps };
})();
