// Task editor (skeleton): query, manifest from the event's layers, steps with argument forms
// generated from the tool registry, answer fields; saves through POST /api/tasks/.
(function () {
  "use strict";
  const layers = JSON.parse(document.getElementById("layers-data").textContent);
  const tools = JSON.parse(document.getElementById("tools-data").textContent);
  const evalTypes = JSON.parse(document.getElementById("eval-types-data").textContent);
  const toolByName = Object.fromEntries(tools.map((t) => [t.name, t]));
  const $ = (sel, root) => (root || document).querySelector(sel);
  const el = (tag, attrs, ...kids) => {
    const n = document.createElement(tag);
    Object.entries(attrs || {}).forEach(([k, v]) => (k === "text" ? (n.textContent = v) : n.setAttribute(k, v)));
    kids.forEach((k) => n.appendChild(typeof k === "string" ? document.createTextNode(k) : k));
    return n;
  };
  function csrf() {
    const m = document.cookie.match(/csrftoken=([^;]+)/);
    return m ? m[1] : "";
  }

  // ---- manifest: input_data key -> layer
  const INPUT_KEYS = ["pre_image", "post_image", "image", "mask", "buildings", "poi_data", "roads"];
  function addInput(key, layerId) {
    const row = el("div", { class: "input-row" });
    const keySel = el("input", { class: "input-key", list: "input-keys", value: key || "", placeholder: "input_data key" });
    const layerSel = el("select", { class: "input-layer" });
    layers.forEach((l) => layerSel.appendChild(el("option", { value: l.id, text: `${l.file_name} (${l.kind}${l.modality ? ", " + l.modality : ""}${l.phase ? ", " + l.phase : ""})` })));
    if (layerId) layerSel.value = layerId;
    const rm = el("button", { type: "button", text: "×", title: "remove" });
    rm.onclick = () => row.remove();
    row.append(keySel, layerSel, rm);
    $("#manifest").appendChild(row);
  }
  const dl = el("datalist", { id: "input-keys" });
  INPUT_KEYS.forEach((k) => dl.appendChild(el("option", { value: k })));
  document.body.appendChild(dl);
  // Defaults: pre and post imagery when the event has them.
  const pre = layers.find((l) => l.kind === "raster" && l.phase === "pre");
  const post = layers.find((l) => l.kind === "raster" && l.phase === "post");
  if (pre) addInput("pre_image", pre.id);
  if (post) addInput("post_image", post.id);
  $("#add-input").onclick = () => addInput("", null);

  // ---- steps
  const fileNames = layers.map((l) => l.file_name);
  const fl = el("datalist", { id: "file-names" });
  fileNames.forEach((f) => fl.appendChild(el("option", { value: f })));
  document.body.appendChild(fl);

  function renderArgs(stepLi, toolName, values) {
    const box = $(".args", stepLi);
    box.innerHTML = "";
    const tool = toolByName[toolName];
    if (!tool) return;
    $(".tool-desc", stepLi).textContent = tool.description || "";
    tool.params.forEach((p) => {
      const input = el("input", {
        class: "arg", "data-name": p.name, list: "file-names",
        placeholder: p.default === null || p.default === undefined ? p.type : `${p.type} (default ${JSON.stringify(p.default)})`,
      });
      if (values && values[p.name] !== undefined) input.value = typeof values[p.name] === "string" ? values[p.name] : JSON.stringify(values[p.name]);
      box.appendChild(el("label", { class: "arg-label", title: p.note || "" }, `${p.name}${p.required ? " *" : ""}`, input));
    });
  }
  function addStep(toolName, values) {
    const li = el("li", { class: "step card" });
    const sel = el("select", { class: "tool" });
    const groups = {};
    tools.forEach((t) => {
      if (!groups[t.module]) groups[t.module] = sel.appendChild(el("optgroup", { label: t.module }));
      groups[t.module].appendChild(el("option", { value: t.name, text: t.name }));
    });
    sel.value = toolName || tools[0].name;
    const rm = el("button", { type: "button", text: "remove", class: "remove-step" });
    rm.onclick = () => li.remove();
    li.append(el("div", { class: "step-head" }, sel, rm), el("p", { class: "tool-desc hint" }), el("div", { class: "args" }));
    sel.onchange = () => renderArgs(li, sel.value, null);
    $("#steps").appendChild(li);
    renderArgs(li, sel.value, values);
    return li;
  }
  $("#add-step").onclick = () => addStep(null, null);

  // ---- answers
  function addAnswer(name, type, source) {
    const tr = el("tr");
    const typeSel = el("select", { class: "ans-type" });
    evalTypes.forEach((t) => typeSel.appendChild(el("option", { value: t, text: t })));
    typeSel.value = type || "scalar_count";
    const rm = el("button", { type: "button", text: "×" });
    rm.onclick = () => tr.remove();
    tr.append(
      el("td", {}, el("input", { class: "ans-name", value: name || "", placeholder: "destroyed_count" })),
      el("td", {}, typeSel),
      el("td", {}, el("input", { class: "ans-source", value: source || "", placeholder: "<total> from trajectory[1].obs", size: 40 })),
      el("td", {}, el("input", { class: "ans-format", placeholder: "optional note" })),
      el("td", {}, rm)
    );
    $("#answers tbody").appendChild(tr);
  }
  $("#add-answer").onclick = () => addAnswer();
  addAnswer();

  function parseValue(text) {
    const t = text.trim();
    if (t === "") return undefined;
    if (/^[\[{\d\-]/.test(t) || t === "true" || t === "false" || t === "null") {
      try { return JSON.parse(t); } catch (e) { return t; }
    }
    return t;
  }
  function payload() {
    const input_layers = {};
    document.querySelectorAll("#manifest .input-row").forEach((r) => {
      const k = $(".input-key", r).value.trim();
      if (k) input_layers[k] = parseInt($(".input-layer", r).value, 10);
    });
    const trajectory = [...document.querySelectorAll("#steps > li")].map((li) => {
      const args = {};
      li.querySelectorAll(".arg").forEach((a) => {
        const v = parseValue(a.value);
        if (v !== undefined) args[a.dataset.name] = v;
      });
      return { call: $(".tool", li).value, args };
    });
    const answer_spec = [...document.querySelectorAll("#answers tbody tr")].map((tr) => ({
      name: $(".ans-name", tr).value.trim(),
      eval_type: $(".ans-type", tr).value,
      source: parseValue($(".ans-source", tr).value) ?? "",
      answer_format: $(".ans-format", tr).value.trim(),
    }));
    return {
      event: $("#event").value, dimension: $("#dimension").value, question: $("#question").value,
      input_layers, trajectory, answer_spec,
    };
  }
  $("#save-task").onclick = async () => {
    $("#save-state").textContent = "saving…";
    $("#errors").innerHTML = "";
    const resp = await fetch("/api/tasks/", {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf() },
      body: JSON.stringify(payload()),
    });
    const body = await resp.json().catch(() => ({}));
    if (resp.status === 201) {
      $("#save-state").textContent = "saved";
      location.href = `/tasks/${body.id}/`;
      return;
    }
    $("#save-state").textContent = "not saved";
    const lines = [];
    (function walk(v, path) {
      if (Array.isArray(v) && v.every((x) => typeof x === "string")) lines.push(`${path}: ${v.join(" ")}`);
      else if (v && typeof v === "object") Object.entries(v).forEach(([k, x]) => walk(x, path ? `${path}.${k}` : k));
      else if (v !== undefined) lines.push(`${path}: ${v}`);
    })(body, "");
    lines.forEach((l) => $("#errors").appendChild(el("li", { text: l })));
  };
  window.studioEditor = { addStep, addAnswer, addInput };
})();
