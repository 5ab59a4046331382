// Adjudication: "start from this" copies a verdict's flags, reasons and grade into the one verdict form.
import { studioVerdictForm } from "./verdict_form.js";

(function () {
  const dataEl = document.getElementById("verdict-data");
  if (!dataEl || !studioVerdictForm.restore) return;
  const verdicts = {};
  JSON.parse(dataEl.textContent).forEach((v) => { verdicts[v.id] = v; });
  document.querySelectorAll(".use-verdict").forEach((btn) => {
    btn.addEventListener("click", () => {
      const v = verdicts[btn.dataset.verdict];
      if (v) studioVerdictForm.restore({ errors: v.errors, reasons: v.reasons, grade: v.grade, override: false });
    });
    // rendered disabled: a click before this script ran would do nothing
    btn.disabled = false;
    btn.removeAttribute("title");
  });
})();
