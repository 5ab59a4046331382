// The event page's "Record GSD / CRS" forms (maintainers): POST /api/layers/<id>/georeferencing/
// with the reason, then reload to show the new values and the audit line; a 400 names the field.
import { send } from "./api.js";

(function () {
  document.querySelectorAll(".georef-form").forEach((form) => {
    form.addEventListener("submit", async () => {
      const err = form.querySelector(".georef-error");
      err.textContent = "";
      const gsd = form.elements.gsd_m.value.trim();
      const body = { gsd_m: gsd === "" ? null : Number(gsd), crs: form.elements.crs.value.trim(), reason: form.elements.reason.value };
      const resp = await send("POST", `/api/layers/${form.dataset.layer}/georeferencing/`, body).catch(() => null);
      if (!resp) { err.textContent = "the server cannot be reached"; return; }
      const data = await resp.json().catch(() => ({}));
      if (!resp.ok) { err.textContent = data.detail || Object.entries(data).map(([k, v]) => `${k}: ${[].concat(v).join(" ")}`).join("; ") || `HTTP ${resp.status}`; return; }
      location.reload();
    });
  });
})();
