// The one verdict form (scoring queue, record page, adjudication), keyboard-first.
// Keys outside text fields: 1–6 toggle E1–E6, q w e r t y pick grade 0.0 … 1.0, Enter submits final
// (adjudication: records the final verdict), Shift+Enter saves a revisable verdict; Ctrl+Enter
// submits from a text field; Esc leaves a text field.
// Queue mode autosaves the form as the item's draft (PUT /api/scoring/items/<id>/draft/) and submits
// to /api/scoring/items/<id>/submit/; record mode posts to /api/records/<id>/verdicts/ with "final";
// adjudication mode posts the HTML form. The hidden token makes a resubmission harmless.
import { csrf, send } from "./api.js";

// what the adjudication page (scoring_adjudication.js) calls: restore(verdict) fills the form
export const studioVerdictForm = { restore: null };

(function () {
  const form = document.getElementById("verdict-form");
  if (!form) return;
  const mode = form.dataset.mode;
  const codes = ["E1", "E2", "E3", "E4", "E5", "E6"];
  const state = document.getElementById("form-state");
  const derived = document.getElementById("derived-correct");
  const locked = !!document.getElementById("verdict-locked");
  let saveTimer = null, submitting = false;

  const api = send;
  // Claiming the next item changes state: a POST with the CSRF token, never a GET navigation.
  function claimNext(url) {
    const f = document.createElement("form");
    f.method = "post";
    f.action = url;
    const t = document.createElement("input");
    t.type = "hidden";
    t.name = "csrfmiddlewaretoken";
    t.value = csrf();
    f.appendChild(t);
    document.body.appendChild(f);
    f.submit();
  }
  function say(text, isError) {
    if (!state) return;
    state.textContent = text;
    state.classList.toggle("error", !!isError);
  }
  function collect() {
    const errors = {}, reasons = {};
    codes.forEach((c) => { errors[c] = form.elements[c].checked; reasons[c] = form.elements["reason-" + c].value; });
    const g = form.querySelector("input[name=grade]:checked");
    return {
      errors, reasons, grade: g ? g.value : null, reasoning: form.elements.reasoning.value,
      override: form.elements.override.checked, override_reason: form.elements.override_reason.value,
    };
  }
  function refresh() {
    let any = false;
    codes.forEach((c) => {
      const on = form.elements[c].checked;
      any = any || on;
      form.querySelector(`.flag-row[data-code="${c}"]`).classList.toggle("on", on);
      form.elements["reason-" + c].disabled = locked || !on;
    });
    let correct = !any;
    if (form.elements.override.checked) correct = !correct;
    derived.textContent = correct ? "yes" : "no";
    derived.className = correct ? "yes" : "no";
    form.elements.override_reason.hidden = !form.elements.override.checked;
  }
  function restore(d) {
    if (!d || typeof d !== "object") return;
    codes.forEach((c) => {
      form.elements[c].checked = !!(d.errors && d.errors[c]);
      form.elements["reason-" + c].value = (d.reasons && d.reasons[c]) || "";
    });
    if (d.grade !== null && d.grade !== undefined) {
      form.querySelectorAll("input[name=grade]").forEach((r) => { r.checked = Math.abs(parseFloat(r.value) - parseFloat(d.grade)) < 1e-6; });
    }
    form.elements.reasoning.value = d.reasoning || "";
    form.elements.override.checked = !!d.override;
    form.elements.override_reason.value = d.override_reason || "";
  }
  function scheduleSave() {
    if (mode !== "queue") return;
    if (saveTimer) clearTimeout(saveTimer);
    saveTimer = setTimeout(saveDraft, 500);
  }
  async function saveDraft() {
    saveTimer = null;
    if (submitting) return;
    const resp = await api("PUT", `/api/scoring/items/${form.dataset.item}/draft/`, { draft: collect() });
    if (resp.ok) say("draft saved");
    else say("draft not saved: " + ((await resp.json().catch(() => ({}))).detail || resp.status), true);
  }
  function check(s) {
    if (s.grade === null) { say("pick a grade first (q w e r t y)", true); return false; }
    if (s.override && !s.override_reason.trim()) {
      say("say why you override the correctness", true); form.elements.override_reason.focus(); return false;
    }
    return true;
  }
  async function submit(final) {
    if (submitting || locked) return;
    const s = collect();
    if (!check(s)) return;
    if (mode === "adjudicate") { submitting = true; form.submit(); return; }
    const flagsOn = codes.some((c) => s.errors[c]);
    const body = {
      errors: s.errors, reasons: s.reasons, grade: parseFloat(s.grade), reasoning: s.reasoning,
      idempotency_key: form.elements.token.value, final,
    };
    if (s.override) { body.is_correct = flagsOn; body.override_reason = s.override_reason; }
    submitting = true;
    if (saveTimer) { clearTimeout(saveTimer); saveTimer = null; }
    say(final ? "submitting…" : "saving…");
    const queue = form.dataset.queue;
    const url = mode === "queue"
      ? `/api/scoring/items/${form.dataset.item}/submit/${queue ? "?" + queue : ""}`
      : `/api/records/${form.dataset.record}/verdicts/`;
    const resp = await api("POST", url, body);
    const data = await resp.json().catch(() => ({}));
    if (resp.status === 201 || resp.status === 200) {
      say(final ? "submitted" : "saved");
      if (mode === "queue") claimNext(data.next_url);
      else window.location.reload();
      return;
    }
    submitting = false;
    say(data.detail || JSON.stringify(data), true);
  }
  async function giveBack() {
    const resp = await api("POST", `/api/scoring/items/${form.dataset.item}/release/`);
    if (resp.status === 204) window.location.assign("/scoring/");
    else say((await resp.json().catch(() => ({}))).detail || "could not give the item back", true);
  }

  const gradeKeys = {};
  form.querySelectorAll("input[name=grade]").forEach((r) => { gradeKeys[r.dataset.key] = r; });
  const byId = (id) => document.getElementById(id);
  // these buttons are rendered disabled (without this script a click would do nothing) and enabled here
  [["verdict-final", () => submit(true)], ["verdict-save", () => submit(false)], ["scoring-release", giveBack]].forEach(([id, fn]) => {
    const b = byId(id);
    if (!b) return;
    b.addEventListener("click", fn);
    b.disabled = false;
  });
  if (mode === "adjudicate") form.addEventListener("submit", (ev) => { if (!check(collect())) ev.preventDefault(); });
  form.addEventListener("change", () => { refresh(); scheduleSave(); });
  form.addEventListener("input", scheduleSave);
  document.addEventListener("keydown", (ev) => {
    if (locked) return;
    const t = ev.target;
    const typing = t.tagName === "TEXTAREA" || (t.tagName === "INPUT" && t.type === "text");
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); submit(true); return; }
    if (typing) { if (ev.key === "Escape") t.blur(); return; }
    if (ev.ctrlKey || ev.altKey || ev.metaKey) return;
    if (ev.key >= "1" && ev.key <= "6") {
      const cb = form.elements["E" + ev.key];
      cb.checked = !cb.checked;
      ev.preventDefault();
    } else if (gradeKeys[ev.key.toLowerCase()]) {
      gradeKeys[ev.key.toLowerCase()].checked = true;
      ev.preventDefault();
    } else if (ev.key === "Enter") {
      ev.preventDefault();
      submit(!ev.shiftKey || mode === "adjudicate");
      return;
    } else {
      return;
    }
    refresh();
    scheduleSave();
  });
  studioVerdictForm.restore = (d) => { restore(d); refresh(); };

  // The server rendered the form's state (the draft, the own verdict or the posted form); what a
  // person ticked or typed before this script ran is kept as it is, never reset to that state.
  refresh();
  form.dataset.ready = "1";
})();
