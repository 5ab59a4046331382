// The map-native task editor: query, data manifest from the event's layers, gold trajectory (form
// and JSON views that round-trip), answer spec (references, literals, geometry drawn on the map),
// replay with per-step outputs, drafts autosaved to the server, immutable revisions with optimistic
// locking (a 409 shows both versions), review comments and transitions, keyboard shortcuts.
//
// References are data, not text: a reference in a step argument or an answer source is held as
// {"$ref": <step uid>, key} and bound to the step itself, so insert, delete, move, duplicate, change
// tool, undo and redo never rewrite it into a reference to another step. Its index is worked out
// when it is shown or sent; a reference to a deleted step is sent as "<key> from trajectory[deleted].obs"
// (the server refuses it: references.malformed) and shown as broken until undo or a rebind.
// Undo/redo (u / U, Ctrl+Z / Ctrl+Shift+Z) cover every edit: each is a snapshot of the model.
// QC is the server's suite (POST /api/qc/), a moment after each change; the last replay is marked
// stale by any edit, and saving starts a replay.
//
// Reads {{ config|json_script:"editor-config" }} (see frontend/views_tasks._editor_context) and
// {{ map_config|json_script:"map-config" }} (StudioMap layer specs of the event).
import { send } from "../api.js";
import { StudioMap } from "../map.js";
import * as R from "../replay_view.js";

(function () {
  const CFG = JSON.parse(document.getElementById("editor-config").textContent);
  const MAPCFG = JSON.parse(document.getElementById("map-config").textContent);
  const $ = (sel, root) => (root || document).querySelector(sel);
  const $$ = (sel, root) => [...(root || document).querySelectorAll(sel)];
  function el(tag, attrs, ...kids) {
    const n = document.createElement(tag);
    Object.entries(attrs || {}).forEach(([k, v]) => {
      if (v === undefined || v === null || v === false) return;
      if (k === "text") n.textContent = v;
      else if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
      else n.setAttribute(k, v === true ? "" : v);
    });
    kids.flat().forEach((k) => { if (k !== null && k !== undefined) n.appendChild(typeof k === "string" ? document.createTextNode(k) : k); });
    return n;
  }
  // Leaflet sets a tooltip's innerHTML from a string: user text goes in as a text node.
  function textTip(text) { return el("span", { text: text }); }
  const tools = CFG.tools;
  const toolByName = Object.fromEntries(tools.map((t) => [t.name, t]));
  const layers = CFG.layers;
  const layerById = Object.fromEntries(layers.map((l) => [String(l.id), l]));
  const layerByFile = Object.fromEntries(layers.map((l) => [l.file_name, l]));
  const REF_RE = /^\s*<\s*([^<>]+?)\s*>\s+from\s+trajectory\[(\d+)\]\.obs\s*$/i;

  // ------------------------------------------------------------------ state
  const T = CFG.task;  // null for a new task
  const state = {
    id: T ? T.id : null,
    version: T ? T.version : 0,
    status: T ? T.status : "draft",
    readOnly: T ? !T.can_edit : false,
    dirty: false,
    jsonView: false,
    selected: 0,
    stepValues: {},   // index -> obs of the last replay
    drawn: {},        // answer field -> L.Layer drawn on the map
  };
  let steps = [];     // [{uid, call, args}]; references inside args are {"$ref": uid, key}
  let nextUid = 1;
  const graveyard = {};  // uid of a deleted step -> {index, call} when it was deleted (for messages)

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

  // ------------------------------------------------------------------ argument types
  function typeFamily(type) {
    const t = String(type || "any").toLowerCase();
    if (t.startsWith("list") || t.startsWith("[")) return "list";
    if (t.startsWith("dict") || t.startsWith("{")) return "dict";
    if (t.startsWith("bool")) return "bool";
    if (/^(int|float|number)/.test(t)) return "number";
    if (t.startsWith("str")) return t.includes("|") && /int|float/.test(t) ? "any" : "str";
    return "any";
  }
  function enumOf(p) {  // "one of a, b, c" in a parameter's note
    const m = /one of ([^;()]+)/i.exec(p.note || "");
    if (!m) return null;
    const vals = m[1].split(/,\s*|\s+or\s+/).map((s) => s.trim().replace(/^['"]|['"]$/g, "")).filter(Boolean);
    return vals.length >= 2 && vals.length <= 12 && vals.every((v) => v.length < 24 && !/\s/.test(v)) ? vals : null;
  }
  function parseArg(text, p) {  // -> {value} | {error} | {} (empty: default applies)
    const t = text.trim();
    if (t === "") return {};
    // a reference, even a broken one, is checked as a reference (refProblem), never as the parameter's type
    if (REF_RE.test(t) || REF_LIKE.test(t) || /^<[^<>]+>$/.test(t)) return { value: t };
    const fam = typeFamily(p ? p.type : "any");
    if (fam === "str") return { value: text };
    if (fam === "number") {
      const n = Number(t);
      if (!Number.isFinite(n)) return { error: `expects ${p.type}` };
      if (/^int/.test(p.type) && !Number.isInteger(n)) return { error: "expects an integer" };
      return { value: n };
    }
    if (fam === "bool") return t === "true" ? { value: true } : t === "false" ? { value: false } : { error: "true or false" };
    if (/^[\[{\d\-"]/.test(t) || t === "true" || t === "false" || t === "null") {
      try {
        const v = JSON.parse(t);
        // a list parameter also takes a JSON-encoded list in a string (dora-format.md §0), nothing else
        if (fam === "list" && !Array.isArray(v) && !(typeof v === "string" && /^\s*\[/.test(v))) return { error: "expects a JSON list, e.g. [1, 2]" };
        if (fam === "dict" && (typeof v !== "object" || Array.isArray(v) || v === null)) return { error: "expects a JSON object" };
        return { value: v };
      } catch (e) {
        return { error: `not valid JSON: ${e.message}` };
      }
    }
    if (fam === "list" || fam === "dict") return { error: `expects JSON (${p.type})` };
    return { value: text };
  }
  function showArg(v) { return v === undefined ? "" : typeof v === "string" ? v : isRef(v) ? refText(v) : JSON.stringify(wire(v)); }
  function refInfo(text) {
    const m = REF_RE.exec(String(text || ""));
    return m ? { key: m[1], index: parseInt(m[2], 10) } : null;
  }
  // a reference held as data: bound to the step (its uid), not to a position
  const isRef = (v) => !!v && typeof v === "object" && !Array.isArray(v) && Object.prototype.hasOwnProperty.call(v, "$ref");
  const REF_LIKE = /^\s*<[^<>]*>\s*from\s+(trajectory|step)\b/i;
  function indexOfUid(uid) { return steps.findIndex((s) => s.uid === uid); }
  function refText(r) {
    const i = indexOfUid(r.$ref);
    return `<${r.key}> from trajectory[${i < 0 ? "deleted" : i}].obs`;
  }
  // text/JSON values -> model values: reference strings bind to the step now at that index
  function bind(v) {
    if (typeof v === "string") {
      const r = refInfo(v);
      return r && r.index < steps.length ? { $ref: steps[r.index].uid, key: r.key } : v;
    }
    if (Array.isArray(v)) return v.map(bind);
    if (v && typeof v === "object" && !isRef(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, bind(x)]));
    return v;
  }
  // model values -> the benchmark's JSON (what is saved, drafted and checked)
  function wire(v) {
    if (isRef(v)) return refText(v);
    if (Array.isArray(v)) return v.map(wire);
    if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, wire(x)]));
    return v;
  }
  function refProblem(v, position) {  // -> why a (model) reference is broken at this position, or ""
    if (typeof v === "string") {
      if (REF_LIKE.test(v) && !refInfo(v)) return "not a reference to a step: rebind it (⤷ ref)";
      const r = refInfo(v);
      return r ? `trajectory[${r.index}] does not exist (there are ${steps.length} steps)` : "";
    }
    if (Array.isArray(v)) return v.map((x) => refProblem(x, position)).find(Boolean) || "";
    if (!v || typeof v !== "object") return "";
    if (!isRef(v)) return Object.values(v).map((x) => refProblem(x, position)).find(Boolean) || "";
    const i = indexOfUid(v.$ref);
    if (i < 0) {
      const g = graveyard[v.$ref] || {};
      return `step ${g.index} (${g.call || "no tool"}) was deleted: undo (u) or rebind`;
    }
    if (i >= position) return `trajectory[${i}] is not an earlier step`;
    const keys = resultsOf(i).map((x) => x.key);
    if (steps[i].call && keys.length && !keys.includes(v.key)) return `step ${i} (${steps[i].call}) returns no '${v.key}': it returns ${keys.join(", ")}`;
    return "";
  }
  function resultsOf(index) {
    const s = steps[index];
    const t = s && toolByName[s.call];
    return t ? t.results : [];
  }
  function brokenRefs() {  // -> ["trajectory[2].args.vector_path: why"] over every step and answer field
    const out = [];
    steps.forEach((s, i) => Object.entries(s.args || {}).forEach(([k, v]) => {
      const why = refProblem(v, i);
      if (why) out.push(`trajectory[${i}].args.${k}: ${why}`);
    }));
    answerRows().forEach((tr, j) => {
      const why = refProblem(tr._source, steps.length);
      if (why) out.push(`answer_spec[${j}].source (${$(".ans-name", tr).value.trim() || "field"}): ${why}`);
    });
    return out;
  }

  // ------------------------------------------------------------------ steps (form view)
  function renderSteps() {
    const ol = $("#steps");
    ol.innerHTML = "";
    steps.forEach((s, i) => ol.appendChild(stepCard(s, i)));
    selectStep(Math.min(state.selected, steps.length - 1), false);
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
      el("button", { type: "button", class: "icon move-down", title: "Move down (Alt+↓)", text: "↓", disabled: i === steps.length - 1 || state.readOnly, onclick: () => moveStep(i, 1) }),
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
    if (i < 0 || !steps.length) return;
    state.selected = i;
    $$("#steps > li").forEach((li, k) => li.classList.toggle("selected", k === i));
    const li = $$("#steps > li")[i];
    if (focus && li) { li.focus({ preventScroll: true }); li.scrollIntoView({ block: "nearest" }); }
  }
  function newStep() { return { uid: nextUid++, call: "", args: {} }; }
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
    if (!structural(() => { steps.splice(at, 0, newStep()); state.selected = at; })) return;
    if (pick !== false) openToolPicker(at);
  }
  function addStep() { insertStep(steps.length ? state.selected + 1 : 0); }
  function deleteStep(i) {
    const removed = steps[i];
    if (!removed) return;
    structural(() => {
      graveyard[removed.uid] = { index: i, call: removed.call };
      steps.splice(i, 1);
      state.selected = Math.max(0, Math.min(i, steps.length - 1));
    });
    if (removed) toast(`Step ${i} (${removed.call || "no tool"}) deleted.`, { label: "Undo (u)", run: undo });
  }
  function duplicateStep(i) {
    if (!steps[i]) return;
    structural(() => {
      steps.splice(i + 1, 0, { uid: nextUid++, call: steps[i].call, args: JSON.parse(JSON.stringify(steps[i].args || {})) });
      state.selected = i + 1;
    });
  }
  function moveStep(i, delta) {
    const j = i + delta;
    if (j < 0 || j >= steps.length) return;
    if (structural(() => { [steps[i], steps[j]] = [steps[j], steps[i]]; state.selected = j; })) selectStep(j, true);
  }
  function refreshAnswerSources() {
    answerRows().forEach((tr) => { $(".ans-source", tr).value = showArg(tr._source); tr._validate(); });
  }

  // ------------------------------------------------------------------ undo / redo: snapshots of the model
  const undoLog = { undo: [], redo: [], current: null, typingIn: null, typingAt: 0 };
  function snapshot() { return JSON.stringify({ model: model(), selected: state.selected }); }
  function record(opts) {
    const snap = snapshot();
    if (undoLog.current === null) { undoLog.current = snap; return; }
    if (snap === undoLog.current) return;
    const now = Date.now();
    // typing in one field within a second is one edit
    const coalesce = opts && opts.typing && undoLog.typingIn === opts.typing && now - undoLog.typingAt < 1000 && undoLog.undo.length;
    if (!coalesce) undoLog.undo.push(undoLog.current);
    if (undoLog.undo.length > 200) undoLog.undo.shift();
    undoLog.redo = [];
    undoLog.current = snap;
    undoLog.typingIn = opts && opts.typing ? opts.typing : null;
    undoLog.typingAt = now;
    updateUndoButtons();
  }
  function travel(from, to) {
    if (state.readOnly || !from.length) return;
    to.push(undoLog.current);
    undoLog.current = from.pop();
    undoLog.typingIn = null;
    const snap = JSON.parse(undoLog.current);
    restoring = true;
    try { load(snap.model, { model: true }); } finally { restoring = false; }
    state.selected = Math.min(snap.selected, Math.max(steps.length - 1, 0));
    selectStep(state.selected, false);
    clearOutputs();
    renderStepOutputs();
    changed({ restoring: true });
    updateUndoButtons();
  }
  function undo() { travel(undoLog.undo, undoLog.redo); }
  function redo() { travel(undoLog.redo, undoLog.undo); }
  function updateUndoButtons() {
    if ($("#undo")) $("#undo").disabled = state.readOnly || !undoLog.undo.length;
    if ($("#redo")) $("#redo").disabled = state.readOnly || !undoLog.redo.length;
  }
  let restoring = false;
  $("#add-step").onclick = () => addStep();
  document.body.appendChild(el("datalist", { id: "file-names" }, layers.map((l) => el("option", { value: l.file_name, label: `${l.kind}${l.phase ? " · " + l.phase : ""}` }))));

  // ------------------------------------------------------------------ pickers
  let pickerTarget = null;
  function placePicker(picker, anchor) {
    picker.hidden = false;
    const r = anchor.getBoundingClientRect();
    const w = picker.offsetWidth;
    picker.style.left = `${Math.max(8, Math.min(window.scrollX + r.left, window.scrollX + document.documentElement.clientWidth - w - 8))}px`;
    picker.style.top = `${window.scrollY + r.bottom + 4}px`;
  }
  function closePickers() { $("#tool-picker").hidden = true; $("#ref-picker").hidden = true; pickerTarget = null; }
  function listNav(list, e) {
    const items = $$(".pick-item:not([hidden])", list);
    if (!items.length) return false;
    let k = items.findIndex((x) => x.classList.contains("active"));
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      k = e.key === "ArrowDown" ? Math.min(items.length - 1, k + 1) : Math.max(0, k - 1);
      items.forEach((x, n) => x.classList.toggle("active", n === k));
      items[k].scrollIntoView({ block: "nearest" });
      return true;
    }
    if (e.key === "Enter") {
      e.preventDefault();
      // several equally exact matches (vec. and poi.filter_by_attribute): Enter never guesses
      if (k < 0 && list.dataset.ambiguous) { toast(list.dataset.ambiguous); return true; }
      (items[k] || items[0]).click();
      return true;
    }
    return false;
  }
  function openToolPicker(i) {
    if (state.readOnly) return;
    pickerTarget = { kind: "tool", index: i };
    const list = $("#tool-list");
    list.innerHTML = "";
    const modules = {};
    tools.forEach((t) => { (modules[t.module] = modules[t.module] || []).push(t); });
    Object.keys(modules).sort().forEach((m) => {
      list.appendChild(el("div", { class: "pick-group", "data-module": m, text: `${m} (${modules[m].length})` }));
      modules[m].forEach((t) => list.appendChild(el("div", {
        class: "pick-item", role: "option", "data-tool": t.name, "data-module": m,
        "data-search": `${t.name} ${t.alias} ${m} ${t.description}`.toLowerCase(),
        onclick: () => chooseTool(i, t.name),
      }, el("b", { text: t.name }), el("span", { class: "hint", text: ` ${t.params.map((p) => p.name + (p.required ? "*" : "")).join(", ")}` }),
        el("div", { class: "pick-desc", text: t.description || "" }))));
    });
    const anchor = $$("#steps > li")[i] ? $(".tool-button", $$("#steps > li")[i]) : $("#add-step");
    placePicker($("#tool-picker"), anchor);
    const search = $("#tool-search");
    search.value = "";
    filterTools();
    const cur = steps[i] && steps[i].call && list.querySelector(`[data-tool="${CSS.escape(steps[i].call)}"]`);
    if (cur) { cur.classList.add("active"); cur.scrollIntoView({ block: "nearest" }); }
    search.focus();
  }
  function filterTools() {
    const words = $("#tool-search").value.toLowerCase().split(/\s+/).filter(Boolean);
    const list = $("#tool-list");
    const shownModules = new Set();
    $$(".pick-item", list).forEach((it) => {
      const ok = words.every((w) => it.dataset.search.includes(w));
      it.hidden = !ok;
      it.classList.remove("active");
      if (ok) shownModules.add(it.dataset.module);
    });
    $$(".pick-group", list).forEach((g) => { g.hidden = !shownModules.has(g.dataset.module); });
    // the one Enter picks: the exact dotted name, then an exact short name (when only one tool
    // has it), then words in the name, then anywhere; exact matches are marked
    const q = words.join(" ");
    const score = (it) => {
      const name = it.dataset.tool.toLowerCase();
      if (name === q) return 4;
      if (name.split(".").pop() === q) return 3;
      return words.every((w) => name.includes(w)) ? 2 : 1;
    };
    const shown = $$(".pick-item:not([hidden])", list);
    $$(".pick-item", list).forEach((it) => it.classList.toggle("exact", !it.hidden && words.length > 0 && score(it) >= 3));
    let best = null;
    shown.forEach((it) => { if (!best || score(it) > score(best)) best = it; });
    const ties = best ? shown.filter((it) => score(it) === score(best)) : [];
    delete list.dataset.ambiguous;
    if (best && words.length && score(best) === 3 && ties.length > 1) {
      list.dataset.ambiguous = `${ties.length} tools are called ${q} (${ties.map((t) => t.dataset.tool).join(", ")}): pick one with ↓ and Enter, or type its module.`;
      return;
    }
    if (best && words.length) { best.classList.add("active"); best.scrollIntoView({ block: "nearest" }); }
  }
  $("#tool-search").addEventListener("input", filterTools);
  $("#tool-search").addEventListener("keydown", (e) => {
    if (e.key === "Escape") { e.preventDefault(); const i = pickerTarget && pickerTarget.index; closePickers(); focusStepTool(i); return; }
    listNav($("#tool-list"), e);
  });
  function focusStepTool(i) { const li = $$("#steps > li")[i]; if (li) $(".tool-button", li).focus(); }
  function chooseTool(i, name) {
    const step = steps[i];
    const tool = toolByName[name];
    closePickers();
    // references to this step keep pointing at it; a key the new tool does not return shows as broken
    structural(() => {
      const keep = {};
      tool.params.forEach((p) => { if (step.args && step.args[p.name] !== undefined) keep[p.name] = step.args[p.name]; });
      step.call = name;
      step.args = keep;
    });
    const first = $$("#steps > li")[i] && $(".arg", $$("#steps > li")[i]);
    if (first) first.focus();
  }

  function compatible(param, resultType, key) {
    const want = param ? typeFamily(param.type) : "any";
    const have = typeFamily(String(resultType).split("|")[0]);
    if (want === "any" || have === "any") return true;
    if (param && /path/.test(param.name)) return have === "str" && /path|file/.test(key + resultType);
    return want === have;
  }
  function openRefPicker(input, beforeIndex, param) {
    if (state.readOnly) return;
    pickerTarget = { kind: "ref", input };
    const list = $("#ref-list");
    list.innerHTML = "";
    let any = false;
    list.classList.remove("ranked");
    for (let n = 0; n < beforeIndex && n < steps.length; n++) {
      const res = resultsOf(n);
      if (!res.length) continue;  // no header over nothing
      list.appendChild(el("div", { class: "pick-group", "data-order": list.children.length, text: `trajectory[${n}] · ${steps[n].call || "no tool"}` }));
      const sorted = res.map((r) => ({ ...r, ok: compatible(param, r.type, r.key) })).sort((a, b) => (b.ok - a.ok));
      sorted.forEach((r) => {
        any = true;
        const ref = `<${r.key}> from trajectory[${n}].obs`;
        const value = state.stepValues[n] && state.stepValues[n][r.key];
        list.appendChild(el("div", {
          class: "pick-item" + (r.ok ? "" : " incompatible"), role: "option", "data-ref": ref, "data-key": r.key.toLowerCase(),
          "data-search": `${r.key} ${r.type} ${steps[n].call}`.toLowerCase(), "data-step": n, "data-order": list.children.length,
          title: r.ok ? "" : `type ${r.type} may not fit ${param ? param.type : ""}`,
          onclick: () => { input.value = ref; input.dispatchEvent(new Event("input", { bubbles: true })); input.dispatchEvent(new Event("change", { bubbles: true })); closePickers(); input.focus(); },
        }, el("code", { text: r.key }), el("span", { class: "arg-type", text: r.type }),
          el("span", { class: "pick-step hint", text: ` · trajectory[${n}] ${steps[n].call}` }),
          value !== undefined ? el("span", { class: "hint", text: ` = ${showArg(value).slice(0, 40)}` }) : null));
      });
    }
    if (!any) list.appendChild(el("div", { class: "hint", text: "No earlier step returns anything yet: pick the tools of the steps above first." }));
    placePicker($("#ref-picker"), input);
    $("#ref-search").value = "";
    $$(".pick-item", list).forEach((x) => x.classList.remove("active"));
    const first = $(".pick-item:not(.incompatible)", list) || $(".pick-item", list);
    if (first) first.classList.add("active");
    $("#ref-search").focus();
  }
  // the reference picker's order while filtering: the exact key first, then keys that contain the
  // text, then outputs that match only on their tool's name or type; the nearest step first among
  // equals. Ranked, the list is flat (each row names its step); unfiltered, it is grouped by step.
  function refRank(item, w) {
    if (!w) return 0;
    if (item.dataset.key === w) return 1;
    if (item.dataset.key.includes(w)) return 2;
    return item.dataset.search.includes(w) ? 3 : null;
  }
  $("#ref-search").addEventListener("input", () => {
    const list = $("#ref-list");
    const w = $("#ref-search").value.trim().toLowerCase();
    const rows = [...list.children].filter((x) => x.classList.contains("pick-item") || x.classList.contains("pick-group"));
    const items = rows.filter((x) => x.classList.contains("pick-item"));
    items.forEach((it) => { it.dataset.rank = refRank(it, w) ?? ""; it.hidden = it.dataset.rank === ""; it.classList.remove("active"); });
    const byOrder = (a, b) => a.dataset.order - b.dataset.order;
    if (w) {
      list.classList.add("ranked");
      rows.filter((x) => x.classList.contains("pick-group")).forEach((g) => { g.hidden = true; });
      items.filter((it) => !it.hidden)
        .sort((a, b) => (a.dataset.rank - b.dataset.rank) || (b.dataset.step - a.dataset.step) || byOrder(a, b))
        .forEach((it) => list.appendChild(it));
    } else {  // back to the steps' groups, in their order
      list.classList.remove("ranked");
      rows.sort(byOrder).forEach((x) => { if (x.classList.contains("pick-group")) x.hidden = false; list.appendChild(x); });
    }
    const first = $("#ref-list .pick-item:not([hidden]):not(.incompatible)") || $("#ref-list .pick-item:not([hidden])");
    if (first) { first.classList.add("active"); first.scrollIntoView({ block: "nearest" }); }
  });
  $("#ref-search").addEventListener("keydown", (e) => {
    if (e.key === "Escape") { e.preventDefault(); const t = pickerTarget; closePickers(); if (t && t.input) t.input.focus(); return; }
    listNav($("#ref-list"), e);
  });
  document.addEventListener("mousedown", (e) => {
    if (!e.target.closest(".picker") && !e.target.closest(".ref-button") && !e.target.closest(".tool-button")) closePickers();
  });

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
  function validateJson() {  // -> {hard: bool}; applies to `steps` when the structure is right
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
      const uids = steps.map((x) => x.uid);
      steps = data.map((s, k) => ({ uid: uids[k] !== undefined ? uids[k] : nextUid++, call: s.call.split("(")[0].trim(), args: s.args ? JSON.parse(JSON.stringify(s.args)) : {} }));
      steps.forEach((x) => { x.args = bind(x.args); });
      if (!ul.children.length) ul.appendChild(el("li", { class: "ok", text: `valid: ${steps.length} step(s)` }));
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
      onclick: () => openRefPicker(src, steps.length, null) });
    const drawBtn = el("button", { type: "button", class: "icon draw-button", text: "✎ draw", title: "Draw the geometry on the map", onclick: () => startDraw(tr) });
    const filled = el("td", { class: "ans-value" });
    const rm = el("button", { type: "button", class: "icon", text: "×", title: "remove field", onclick: () => { tr.remove(); changed(); } });
    tr._source = isModel ? f.source : bind(f.source);
    const validate = () => {
      const v = src.value.trim();
      let msg = "";
      if (!v) msg = "no source";
      else msg = refProblem(tr._source, steps.length) || (/^</.test(v) && !isRef(tr._source) && !refInfo(v) ? "a reference reads <key> from trajectory[N].obs" : "");
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
  function parseSource(text) {
    const t = text.trim();
    if (t === "" || refInfo(t)) return t;
    if (/^[\[{\d\-"]/.test(t) || t === "true" || t === "false" || t === "null") { try { return JSON.parse(t); } catch (e) { return t; } }
    return t;
  }
  $("#add-answer").onclick = () => { const tr = addAnswer(); $(".ans-name", tr).focus(); changed(); };

  // ------------------------------------------------------------------ the map and drawing
  let viewer = null;
  try {
    viewer = StudioMap.viewer(document.getElementById("editor-map"), { layers: MAPCFG.layers || [], wheelModifier: true });
  } catch (e) {
    $("#editor-map").textContent = `The map could not start: ${e.message}`;
  }
  function currentMap() { const c = viewer && viewer.controllers()[0]; return c ? { map: c.map, frame: c.frame } : null; }
  function round(v, n) { const f = Math.pow(10, n); return Math.round(v * f) / f; }
  function startDraw(tr) {
    const m = currentMap();
    if (!m || !m.map.pm) { toast("Drawing needs the map (leaflet-geoman) to be loaded."); return; }
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
      changed();
    });
  }
  function applyDrawn(tr, name, type, geom, frame) {
    const pixel = frame === "pixel";
    if (geom.type === "Point") {
      const [x, y] = geom.coordinates;
      const base = name.replace(/_(row|col|lat|lon|latitude|longitude)$/, "") || "point";
      const evalType = pixel ? "point_pixel" : "point_haversine";
      const names = pixel ? [base + "_row", base + "_col"] : [base + "_lat", base + "_lon"];
      const values = pixel ? [round(y, 1), round(x, 1)] : [round(y, 7), round(x, 7)];
      names.forEach((n, k) => {
        let row = answerRows().find((r) => $(".ans-name", r).value.trim() === n);
        if (!row) row = k === 0 && tr && !answerRows().some((r) => $(".ans-name", r).value.trim() === names[0]) ? tr : addAnswer({});
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
  function roundCoords(c, n) { return Array.isArray(c[0]) ? c.map((x) => roundCoords(x, n)) : c.map((v) => round(v, n)); }
  function showLiteralGeometries() {  // literal GeoJSON sources drawn on the map on load
    const m = currentMap();
    if (!m) return;
    answerRows().forEach((tr) => {
      const v = parseSource($(".ans-source", tr).value);
      if (v && typeof v === "object" && v.type && v.coordinates) {
        const geo = L.geoJSON(v, { style: { color: "#ff3d7f", weight: 2 } }).bindTooltip(textTip($(".ans-name", tr).value)).addTo(m.map);
        state.drawn[$(".ans-name", tr).value] = geo;
      }
    });
  }

  // ------------------------------------------------------------------ payload, dirty tracking, save
  // the editor's model: the payload's shape, steps with their uids, references as {"$ref": uid, key}
  function model() {
    const { input_layers, input_data } = inputRows();
    return JSON.parse(JSON.stringify({
      event: $("#event").value, dimension: $("#dimension").value, question: $("#question").value,
      task_category: $("#task-category").value.trim(), task_category_code: $("#task-category-code").value.trim(),
      disaster_type: $("#disaster-type").value.trim(),
      input_layers, input_data,
      trajectory: steps.map((s) => ({ uid: s.uid, call: s.call, args: s.args || {} })),
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
      steps = (content.trajectory || []).map((s) => ({ uid: s.uid, call: s.call || "", args: JSON.parse(JSON.stringify(s.args || {})) }));
      nextUid = Math.max(nextUid, ...steps.map((s) => s.uid + 1));
    } else {
      steps = (content.trajectory || []).map((s) => ({ uid: nextUid++, call: s.call || "", args: JSON.parse(JSON.stringify(s.args || {})) }));
      steps.forEach((s) => { s.args = bind(s.args); });
    }
    $("#answers tbody").innerHTML = "";
    (content.answer_spec || []).forEach((f) => addAnswer(f, isModel));
    if (state.jsonView) $("#trajectory-json").value = JSON.stringify(payload().trajectory, null, 2);
    renderSteps();
  }
  let draftTimer = null;
  let baseline = "";
  function changed(opts) {
    if (state.readOnly || restoring) return;
    if (!(opts && opts.restoring)) record(opts);
    const now = JSON.stringify(payload());
    if (now !== lastChecked) { markReplayStale(); scheduleQc(); }
    lastChecked = now;
    state.dirty = now !== baseline;
    if (!state.dirty) {  // back to the saved revision (undo): a draft of the edits undone is not kept
      setSaveState("saved", savedText());
      if (draftKept) discardDraft();
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
      markClean();
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
    state.version = conflictTheirs.version;
    load(conflictTheirs.head);
    markClean();
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
  let overlayIds = [];
  async function followReplay(runId) {
    const run = await R.poll(runId, renderRun);
    if (run.status === "succeeded") {
      const specs = await R.overlays(run.id);
      overlayIds.forEach((id) => viewer && viewer.controllers().forEach((c) => c.removeOverlay(id)));
      overlayIds = [];
      specs.forEach((spec) => {
        const li = $$("#steps > li")[spec.step];
        const out = li && $(".step-output", li);
        if (spec.kind === "image") { if (out) out.appendChild(el("img", { class: "step-chart", src: spec.url, alt: spec.name })); return; }
        if (spec.kind === "error") { if (out) out.appendChild(el("p", { class: "field-error", text: spec.error })); return; }
        if (viewer) { viewer.addOverlay(spec, { visible: true, opacity: spec.kind === "mask" ? 0.75 : 1 }); overlayIds.push(spec.id); }
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
  // One QC: the server's suite (POST /api/qc/) on the saved head when nothing is unsaved (the
  // task page's findings, the same function), on the unsaved content otherwise; at most ~0.4 s
  // after the last change. Findings jump to their step or field; errors sit next to Submit too.
  let qcTimer = null, qcSeq = 0;
  function scheduleQc(now) {
    clearTimeout(qcTimer);
    qcTimer = setTimeout(runQc, now ? 0 : 400);
  }
  async function runQc() {
    const seq = ++qcSeq;
    const body = state.id && !state.dirty ? { task: state.id }
      : { task: state.id, event: CFG.event.slug, content: payload() };
    const box = qcBox();
    box.dataset.state = "checking";
    let resp, data;
    try {
      resp = await send("POST", "/api/qc/", body);
      data = await resp.json().catch(() => ({}));
    } catch (e) { resp = null; }
    if (seq !== qcSeq) return;  // a newer check is under way
    if (!resp || !resp.ok) {
      renderQc(null, resp ? (data.detail || flatten(data).join("; ") || `HTTP ${resp.status}`) : "the server cannot be reached");
      return;
    }
    renderQc(data.findings, null, data.version);
  }
  function qcBox() {
    let box = $("#qc-box");
    if (!box) { box = el("section", { class: "card", id: "qc-box" }); $("#answer-card").after(box); }
    return box;
  }
  function findingNode(f) {
    return el("li", { class: `${f.severity} jump`, "data-location": f.location, title: "Show it", tabindex: "0",
      onclick: () => jumpTo(f.location), onkeydown: (e) => { if (e.key === "Enter") jumpTo(f.location); } },
    el("b", { text: f.check }), ` (${f.location}): ${f.message}`);
  }
  let lastFindings = [];
  function renderQc(findings, failure, version) {
    const box = qcBox();
    box.innerHTML = "";
    box.dataset.state = failure ? "failed" : "done";
    box.appendChild(el("h2", { text: "Quality control" }, el("small", { text: version ? ` r${version} (as on the task page)` : " unsaved edits (replay checks follow the save)" })));
    if (failure) { box.appendChild(el("p", { class: "field-error", text: `QC could not run: ${failure}` })); return; }
    lastFindings = findings;
    if (!findings.length) box.appendChild(el("p", { class: "ok", id: "qc-clean", text: "No finding: the checks pass." }));
    else {
      const ul = el("ul", { class: "qc" });
      findings.forEach((f) => ul.appendChild(findingNode(f)));
      box.appendChild(ul);
    }
    renderSubmitFindings();
  }
  // next to Submit: the blocking errors (QC errors, then the transition's own refusal), each once
  let transitionRefusal = "";
  function renderSubmitFindings() {
    const panel = $("#submit-findings");
    const errors = lastFindings.filter((f) => f.severity === "error");
    const warnings = lastFindings.length - errors.length;
    const sum = $("#qc-summary");
    sum.hidden = false;
    sum.className = `qc-summary ${errors.length ? "error" : warnings ? "warning" : "ok"}`;
    sum.textContent = errors.length ? `${errors.length} error${errors.length > 1 ? "s" : ""} block submission` : warnings ? `QC: ${warnings} warning${warnings > 1 ? "s" : ""}` : "QC passes";
    panel.innerHTML = "";
    if (transitionRefusal) panel.appendChild(el("p", { class: "field-error", text: transitionRefusal }));
    if (errors.length) {
      const ul = el("ul", { class: "qc" });
      errors.forEach((f) => ul.appendChild(findingNode(f)));
      panel.appendChild(ul);
    }
    panel.hidden = !transitionRefusal && !(errors.length && panel.dataset.open === "1");
  }
  $("#qc-summary").onclick = () => {
    const panel = $("#submit-findings");
    panel.dataset.open = panel.dataset.open === "1" ? "0" : "1";
    renderSubmitFindings();
  };
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
    if (!resp.ok) {
      // QC errors are listed once, next to Submit; a refusal that is not QC (no replay, status) says why
      if (data.qc) { lastFindings = data.qc; transitionRefusal = ""; renderQc(data.qc, null, state.version); }
      else transitionRefusal = data.detail || `HTTP ${resp.status}`;
      $("#submit-findings").dataset.open = "1";
      renderSubmitFindings();
      return;
    }
    location.href = `/tasks/${state.id}/`;
  }
  const threads = T ? T.comments : [];
  function commentNode(c) {
    const box = el("div", { class: "comment" + (c.resolved ? " resolved" : ""), "data-comment": c.id });
    box.appendChild(el("div", { class: "comment-head" }, el("b", { text: c.author || "?" }), el("span", { class: "meta", text: ` r${c.revision_number} · ${new Date(c.created_at).toLocaleString()}` }),
      c.resolved ? el("span", { class: "badge", text: "resolved" }) : null));
    box.appendChild(el("p", { text: c.body }));
    (c.replies || []).forEach((r) => box.appendChild(el("div", { class: "reply" }, el("b", { text: r.author || "?" }), ": ", r.body)));
    if (T && T.can_comment !== undefined) {
      const actions = el("div", { class: "comment-actions" });
      if (!c.resolved) actions.appendChild(el("button", { type: "button", class: "linkbutton resolve", text: "Resolve", onclick: () => resolveComment(c, true) }));
      actions.appendChild(el("button", { type: "button", class: "linkbutton", text: "Reply", onclick: () => {
        const ta = el("textarea", { rows: 2, class: "reply-body", placeholder: "Reply…" });
        const sendButton = el("button", { type: "button", text: "Send", onclick: async () => { if (await postComment({ body: ta.value, parent: c.id })) { c.replies = (c.replies || []).concat([{ author: CFG.user.name, body: ta.value }]); c.resolved = false; renderPinnedComments(); } } });
        actions.replaceWith(el("div", { class: "reply-form" }, ta, sendButton));
        ta.focus();
      } }));
      box.appendChild(actions);
    }
    return box;
  }
  async function postComment(body) {
    const resp = await send("POST", `/api/tasks/${state.id}/comments/`, body);
    if (!resp.ok) { const d = await resp.json().catch(() => ({})); toast(d.detail || `comment refused (HTTP ${resp.status})`); return false; }
    return true;
  }
  async function resolveComment(c, resolved) {
    const resp = await send("POST", `/api/comments/${c.id}/resolve/`, { resolved });
    if (resp.ok) { c.resolved = resolved; renderPinnedComments(); } else toast(`not resolved (HTTP ${resp.status})`);
  }
  let commentMarkers = [];
  function renderPinnedComments() {
    if (!T) return;
    $$(".step-comments").forEach((b) => { b.innerHTML = ""; });
    $("#answer-comments").innerHTML = "";
    const list = $("#comment-list");
    list.innerHTML = "";
    const open = threads.filter((c) => !c.resolved);
    $("#comments-card").hidden = !threads.length;
    if (threads.length) $("#comments-card h2").textContent = `Review comments (${open.length} open)`;
    threads.forEach((c) => {
      const where = c.step_index !== null && c.step_index !== undefined ? `step ${c.step_index}` : c.answer_field ? `answer ${c.answer_field}` : c.location ? "map" : "task";
      const node = commentNode(c);
      node.prepend(el("span", { class: "pin", text: where }));
      list.appendChild(node);
      if (!c.resolved && c.step_index !== null && c.step_index !== undefined) {
        const li = $$("#steps > li")[c.step_index];
        if (li) $(".step-comments", li).appendChild(commentNode(c));
      } else if (!c.resolved && c.answer_field) $("#answer-comments").appendChild(commentNode(c));
    });
    const m = currentMap();
    commentMarkers.forEach((x) => x.remove());
    commentMarkers = [];
    if (m) threads.filter((c) => c.location && !c.resolved && c.location.x !== undefined).forEach((c) => {
      if ((c.location.frame || "geographic") !== m.frame) return;
      commentMarkers.push(L.circleMarker([c.location.y, c.location.x], { radius: 8, color: "#ffb300", weight: 3, fillOpacity: 0.3 })
        .bindTooltip(textTip(`${c.author}: ${c.body}`)).addTo(m.map));
    });
  }

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
      i: () => insertStep(steps.length ? state.selected : 0),
      j: () => selectStep(Math.min(steps.length - 1, state.selected + 1), true),
      k: () => selectStep(Math.max(0, state.selected - 1), true),
      "/": () => steps.length ? openToolPicker(state.selected) : addStep(),
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
    if (input.classList.contains("ans-source")) openRefPicker(input, steps.length, null);
    else {
      const tool = toolByName[(steps[i] || {}).call];
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
  undoLog.current = snapshot();
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
  if (draft && !state.readOnly && JSON.stringify(draft.content) !== baseline) {
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
    save, replay, payload, brokenRefs, setJsonView, state, steps: () => steps };
})();
