// The task page's "Make a variant" form (task_variants.html): shows the parameters of the chosen
// kind, posts them to /api/tasks/<id>/variants/ (annotation.api_variants) and opens the variant
// made (a draft task of its own); an error names the field.
import { send } from "./api.js";

(function () {
  const form = document.getElementById("variant-form");
  if (!form) return;
  const taskId = JSON.parse(document.getElementById("task-id").textContent);
  const kind = form.querySelector("#variant-kind");
  const result = form.querySelector("#variant-result");
  function showKind() {
    form.querySelectorAll("label[data-kinds]").forEach((l) => {
      l.hidden = !l.dataset.kinds.split(" ").includes(kind.value);
    });
  }
  kind.addEventListener("change", showKind);
  showKind();
  form.querySelector("#variant-make").addEventListener("click", async (ev) => {
    const button = ev.currentTarget;
    const body = { kind: kind.value };
    form.querySelectorAll("label[data-kinds]").forEach((l) => {
      if (l.hidden) return;
      const input = l.querySelector("input, select");
      if (input.value === "") return;
      body[input.name] = input.type === "number" ? Number(input.value) : input.value;
    });
    button.disabled = true;
    result.textContent = "making…";
    const resp = await send("POST", `/api/tasks/${taskId}/variants/`, body);
    const data = await resp.json().catch(() => ({}));
    button.disabled = false;
    if (!resp.ok) {
      const detail = data.detail || Object.entries(data).map(([k, v]) => `${k}: ${[].concat(v).join(" ")}`).join("; ");
      result.textContent = detail || `HTTP ${resp.status}`;
      result.className = "error";
      return;
    }
    result.className = "muted";
    result.textContent = `${data.created ? "made" : "already made"}: ${data.question_id}`;
    location.href = `/tasks/${data.id}/`;
  });
})();
