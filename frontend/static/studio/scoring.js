// Keyboard-first scoring form of one queue item.
// Keys (outside text fields): 1–6 toggle E1–E6, q w e r t y pick grade 0.0 … 1.0, Enter submits and
// opens the next item of the same queue; Ctrl+Enter submits from anywhere; Esc leaves a text field.
// The form state autosaves as a draft (PUT /api/scoring/items/<id>/draft/); the hidden token makes a
// resubmission harmless (the server returns the first verdict).
(function () {
  "use strict";
  const form = document.getElementById("scoring-form");
  if (!form) return;
  const item = form.dataset.item;
  const queue = form.dataset.queue || "";
  const codes = ["E1", "E2", "E3", "E4", "E5", "E6"];
  const state = document.getElementById("form-state");
  const derived = document.getElementById("derived-correct");
  let saveTimer = null, submitting = false;

  function csrf() {
    const m = document.cookie.match(/csrftoken=([^;]+)/);
    return m ? decodeURIComponent(m[1]) : "";
  }
  function api(method, url, body) {
    return fetch(url, {
      method, credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf() },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  }
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
      const row = form.querySelector(`.flag-row[data-code="${c}"]`);
      row.classList.toggle("on", on);
      form.elements["reason-" + c].disabled = !on;
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
      const r = form.querySelector(`input[name=grade][value="${d.grade}"]`);
      if (r) r.checked = true;
    }
    form.elements.reasoning.value = d.reasoning || "";
    form.elements.override.checked = !!d.override;
    form.elements.override_reason.value = d.override_reason || "";
  }
  function scheduleSave() {
    if (saveTimer) clearTimeout(saveTimer);
    saveTimer = setTimeout(saveDraft, 500);
  }
  async function saveDraft() {
    saveTimer = null;
    if (submitting) return;
    const resp = await api("PUT", `/api/scoring/items/${item}/draft/`, { draft: collect() });
    if (resp.ok) say("draft saved");
    else say("draft not saved: " + ((await resp.json().catch(() => ({}))).detail || resp.status), true);
  }

  async function submit() {
    if (submitting) return;
    const s = collect();
    if (s.grade === null) { say("pick a grade first (q w e r t y)", true); return; }
    if (s.override && !s.override_reason.trim()) { say("say why you override the correctness", true); form.elements.override_reason.focus(); return; }
    const flagsOn = codes.some((c) => s.errors[c]);
    const body = {
      errors: s.errors, reasons: s.reasons, grade: parseFloat(s.grade), reasoning: s.reasoning,
      idempotency_key: form.elements.token.value,
    };
    if (s.override) { body.is_correct = flagsOn; body.override_reason = s.override_reason; }
    submitting = true;
    if (saveTimer) { clearTimeout(saveTimer); saveTimer = null; }
    say("submitting…");
    const resp = await api("POST", `/api/scoring/items/${item}/submit/${queue ? "?" + queue : ""}`, body);
    const data = await resp.json().catch(() => ({}));
    if (resp.status === 201) { say("submitted"); claimNext(data.next_url); return; }
    submitting = false;
    say(data.detail || JSON.stringify(data), true);
  }
  async function giveBack() {
    const resp = await api("POST", `/api/scoring/items/${item}/release/`);
    if (resp.status === 204) window.location.assign("/scoring/");
    else say((await resp.json().catch(() => ({}))).detail || "could not give the item back", true);
  }

  const gradeKeys = {};
  form.querySelectorAll("input[name=grade]").forEach((r) => { gradeKeys[r.dataset.key] = r; });

  form.addEventListener("change", () => { refresh(); scheduleSave(); });
  form.addEventListener("input", scheduleSave);
  document.getElementById("scoring-submit").addEventListener("click", submit);
  document.getElementById("scoring-release").addEventListener("click", giveBack);
  document.addEventListener("keydown", (ev) => {
    const t = ev.target;
    const typing = t.tagName === "TEXTAREA" || (t.tagName === "INPUT" && t.type === "text");
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); submit(); return; }
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
      submit();
      return;
    } else {
      return;
    }
    refresh();
    scheduleSave();
  });

  const draftEl = document.getElementById("scoring-draft");
  restore(draftEl ? JSON.parse(draftEl.textContent) : null);
  refresh();
  form.dataset.ready = "1";
})();
