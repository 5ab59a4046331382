// Adjudication: "start from this" copies a verdict's flags, reasons and grade into the final-verdict form.
(function () {
  "use strict";
  const form = document.getElementById("adjudication-form");
  const dataEl = document.getElementById("verdict-data");
  if (!form || !dataEl) return;
  const verdicts = {};
  JSON.parse(dataEl.textContent).forEach((v) => { verdicts[v.id] = v; });
  const codes = ["E1", "E2", "E3", "E4", "E5", "E6"];
  document.querySelectorAll(".use-verdict").forEach((btn) => {
    btn.addEventListener("click", () => {
      const v = verdicts[btn.dataset.verdict];
      if (!v) return;
      codes.forEach((c) => {
        form.elements[c].checked = !!(v.errors && v.errors[c]);
        form.elements["reason-" + c].value = (v.reasons && v.reasons[c]) || "";
      });
      form.querySelectorAll("input[name=grade]").forEach((r) => {
        r.checked = v.grade !== null && Math.abs(parseFloat(r.value) - v.grade) < 1e-6;
      });
      form.elements.override.checked = false;
      form.elements.override_reason.value = "";
    });
  });
})();
