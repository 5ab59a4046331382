// The editor's two pickers (DOM): the tool picker (search the catalogue, Enter picks the best match)
// and the reference picker (an earlier step's output for a field; its order is references.js's
// refGroups and rankRefs). initPickers wires their search fields once and returns the openers.
import { $, $$, el } from "./dom.js";
import { rankRefs, refGroups, showArg } from "./references.js";

/**
 * How well a tool's dotted name matches the search words (lower case): 4 the exact dotted name,
 * 3 the exact short name (after the last dot), 2 every word in the name, 1 a match elsewhere
 * (alias, module, description). Enter picks the best; several 3s are ambiguous.
 */
export function toolScore(name, words) {
  const q = words.join(" ");
  name = name.toLowerCase();
  if (name === q) return 4;
  if (name.split(".").pop() === q) return 3;
  return words.every((w) => name.includes(w)) ? 2 : 1;
}

/**
 * Wire the pickers' search fields and return {openToolPicker(i), openRefPicker(input, beforeIndex,
 * param), closePickers()}.
 * @param {{state: Object, tools: Array, toast: function(string), chooseTool: function(number, string)}} ctx
 */
export function initPickers(ctx) {
  const { state, tools, toast } = ctx;
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

  // ---------------------------------------------------------------- tool picker
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
        onclick: () => ctx.chooseTool(i, t.name),
      }, el("b", { text: t.name }), el("span", { class: "hint", text: ` ${t.params.map((p) => p.name + (p.required ? "*" : "")).join(", ")}` }),
        el("div", { class: "pick-desc", text: t.description || "" }))));
    });
    const anchor = $$("#steps > li")[i] ? $(".tool-button", $$("#steps > li")[i]) : $("#add-step");
    placePicker($("#tool-picker"), anchor);
    const search = $("#tool-search");
    search.value = "";
    filterTools();
    const steps = state.steps;
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
    const score = (it) => toolScore(it.dataset.tool, words);
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
  function focusStepTool(i) { const li = $$("#steps > li")[i]; if (li) $(".tool-button", li).focus(); }
  $("#tool-search").addEventListener("input", filterTools);
  $("#tool-search").addEventListener("keydown", (e) => {
    if (e.key === "Escape") { e.preventDefault(); const i = pickerTarget && pickerTarget.index; closePickers(); focusStepTool(i); return; }
    listNav($("#tool-list"), e);
  });

  // ---------------------------------------------------------------- reference picker
  function openRefPicker(input, beforeIndex, param) {
    if (state.readOnly) return;
    pickerTarget = { kind: "ref", input };
    const list = $("#ref-list");
    list.innerHTML = "";
    list.classList.remove("ranked");
    const groups = refGroups(state, beforeIndex, param);
    groups.forEach((g) => {
      list.appendChild(el("div", { class: "pick-group", "data-order": list.children.length, text: `trajectory[${g.index}] · ${g.call || "no tool"}` }));
      g.results.forEach((r) => {
        const value = state.stepValues[g.index] && state.stepValues[g.index][r.key];
        list.appendChild(el("div", {
          class: "pick-item" + (r.ok ? "" : " incompatible"), role: "option", "data-ref": r.ref, "data-key": r.key.toLowerCase(),
          "data-search": `${r.key} ${r.type} ${g.call}`.toLowerCase(), "data-step": g.index, "data-order": list.children.length,
          title: r.ok ? "" : `type ${r.type} may not fit ${param ? param.type : ""}`,
          onclick: () => { input.value = r.ref; input.dispatchEvent(new Event("input", { bubbles: true })); input.dispatchEvent(new Event("change", { bubbles: true })); closePickers(); input.focus(); },
        }, el("code", { text: r.key }), el("span", { class: "arg-type", text: r.type }),
          el("span", { class: "pick-step hint", text: ` · trajectory[${g.index}] ${g.call}` }),
          value !== undefined ? el("span", { class: "hint", text: ` = ${showArg(value, state.steps).slice(0, 40)}` }) : null));
      });
    });
    if (!groups.length) list.appendChild(el("div", { class: "hint", text: "No earlier step returns anything yet: pick the tools of the steps above first." }));
    placePicker($("#ref-picker"), input);
    $("#ref-search").value = "";
    $$(".pick-item", list).forEach((x) => x.classList.remove("active"));
    const first = $(".pick-item:not(.incompatible)", list) || $(".pick-item", list);
    if (first) first.classList.add("active");
    $("#ref-search").focus();
  }
  // Filtering: ranked (references.js rankRefs), the list is flat (each row names its step);
  // unfiltered, it is grouped by step again.
  $("#ref-search").addEventListener("input", () => {
    const list = $("#ref-list");
    const w = $("#ref-search").value.trim().toLowerCase();
    const rows = [...list.children].filter((x) => x.classList.contains("pick-item") || x.classList.contains("pick-group"));
    const items = rows.filter((x) => x.classList.contains("pick-item"));
    items.forEach((it) => it.classList.remove("active"));
    const byOrder = (a, b) => a.dataset.order - b.dataset.order;
    if (w) {
      list.classList.add("ranked");
      rows.filter((x) => x.classList.contains("pick-group")).forEach((g) => { g.hidden = true; });
      const ranked = rankRefs(items.map((it) => ({ node: it, key: it.dataset.key, search: it.dataset.search,
        step: Number(it.dataset.step), order: Number(it.dataset.order) })), w);
      const shown = new Set(ranked.map((r) => r.node));
      items.forEach((it) => { it.hidden = !shown.has(it); });
      ranked.forEach((r) => { r.node.dataset.rank = r.rank; list.appendChild(r.node); });
    } else {  // back to the steps' groups, in their order
      list.classList.remove("ranked");
      items.forEach((it) => { it.dataset.rank = 0; it.hidden = false; });
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

  return { openToolPicker, openRefPicker, closePickers };
}
