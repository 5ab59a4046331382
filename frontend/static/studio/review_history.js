// Revision history: "Restore as new revision" posts to /api/tasks/<id>/revisions/<n>/restore/ with
// the head version it saw (a 409 means someone saved meanwhile: reload and look again).
import { send } from "./api.js";

(function () {
  const taskId = JSON.parse(document.getElementById("task-id").textContent);
  const version = JSON.parse(document.getElementById("task-version").textContent);
  document.querySelectorAll("button.restore").forEach((b) => b.addEventListener("click", async () => {
    b.disabled = true;
    const resp = await send("POST", `/api/tasks/${taskId}/revisions/${b.dataset.number}/restore/`, { expected_version: version });
    const data = await resp.json().catch(() => ({}));
    if (resp.ok) { location.href = `/tasks/${taskId}/history/?a=${version}&b=${data.version}`; return; }
    const li = document.createElement("li");
    li.textContent = resp.status === 409 ? `Someone saved r${data.version} meanwhile: reload the page and compare again.` : (data.detail || `HTTP ${resp.status}`);
    document.getElementById("errors").appendChild(li);
    b.disabled = false;
  }));
})();
