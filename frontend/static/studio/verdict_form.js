// Human verdict form: E1–E6 flags (keys 1–6 toggle them),
// correctness derived from the flags, Ctrl+Enter submits to POST /api/records/<id>/verdicts/
// with the form's one-time token, so a double submission creates one verdict.
(function () {
  "use strict";
  const form = document.getElementById("verdict-form");
  if (!form) return;
  const codes = ["E1", "E2", "E3", "E4", "E5", "E6"];
  const derived = document.getElementById("derived-correct");
  function update() {
    derived.textContent = codes.some((c) => form.elements[c].checked) ? "no" : "yes";
  }
  codes.forEach((c) => form.elements[c].addEventListener("change", update));
  function csrf() {
    const m = document.cookie.match(/csrftoken=([^;]+)/);
    return m ? m[1] : "";
  }
  async function submit() {
    const errors = {}, reasons = {};
    codes.forEach((c) => { errors[c] = form.elements[c].checked; reasons[c] = form.elements["reason-" + c].value; });
    const grade = parseFloat(form.querySelector("input[name=grade]:checked").value);
    const state = document.getElementById("verdict-state");
    state.textContent = "saving…";
    const resp = await fetch(`/api/records/${form.dataset.record}/verdicts/`, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf() },
      body: JSON.stringify({ errors, reasons, grade, reasoning: form.elements.reasoning.value,
                             idempotency_key: form.elements.token ? form.elements.token.value : null }),
    });
    const body = await resp.json().catch(() => ({}));
    if (resp.status === 201) { state.textContent = "saved"; location.reload(); }
    else state.textContent = body.detail || JSON.stringify(body);
  }
  document.getElementById("verdict-submit").onclick = submit;
  document.addEventListener("keydown", (ev) => {
    if (ev.target.tagName === "TEXTAREA" || (ev.target.tagName === "INPUT" && ev.target.type === "text")) {
      if (ev.key === "Enter" && ev.ctrlKey) submit();
      return;
    }
    if (ev.key >= "1" && ev.key <= "6" && !ev.ctrlKey && !ev.altKey) {
      const cb = form.elements["E" + ev.key]; cb.checked = !cb.checked; update();
    }
    if (ev.key === "Enter" && ev.ctrlKey) submit();
  });
})();
