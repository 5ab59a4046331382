// The editor's "Blank answers" block (issue 22): a blank answer field's proposed source is bound
// only when the author clicks "accept"; the server works the proposal out again and saves a new
// revision (POST /api/tasks/<id>/answer-proposals/accept/), then the editor reloads on it.
// Self-contained: it reads nothing from the editor's modules.
import { send } from "./api.js";

(function () {
  const box = document.getElementById("answer-proposals");
  if (!box) return;
  const status = box.querySelector(".proposal-status");
  box.addEventListener("click", async (ev) => {
    const btn = ev.target.closest("button.accept-proposal");
    if (!btn) return;
    btn.disabled = true;
    status.textContent = "saving…";
    const resp = await send("POST", box.dataset.url,
      { field: btn.dataset.field, expected_version: Number(box.dataset.version) });
    const body = await resp.json().catch(() => ({}));
    if (resp.ok) { status.textContent = "accepted: new revision r" + body.version; window.location.reload(); return; }
    btn.disabled = false;
    status.textContent = (body && body.detail) || ("could not accept (HTTP " + resp.status + ")");
  });
})();
