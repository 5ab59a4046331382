// The editor's quality control (DOM): one QC, the server's suite (POST /api/qc/) on the saved head
// when nothing is unsaved (the task page's findings, the same function), on the unsaved content
// otherwise; at most ~0.4 s after the last change. Findings jump to their step or field; the
// blocking errors sit next to Submit too, with a refused transition's own reason.
import { send } from "../api.js";
import { $, el } from "./dom.js";

/**
 * Wire the QC card and the findings next to Submit.
 * @param {Object} ctx  {state, eventSlug, payload() -> the task's JSON, flatten(body) -> lines, jumpTo(location),
 *   brokenRefAt(location) -> the editor's message for a broken reference there, or ""}
 * @returns {{schedule(now?: boolean), render(findings, failure, version), refused(data, status)}}
 */
export function initQc(ctx) {
  const { state } = ctx;
  let qcTimer = null, qcSeq = 0;
  let lastFindings = [];
  let transitionRefusal = "";  // next to Submit: the blocking errors (QC errors, then the transition's own refusal), each once

  function schedule(now) {
    clearTimeout(qcTimer);
    qcTimer = setTimeout(runQc, now ? 0 : 400);
  }
  async function runQc() {
    const seq = ++qcSeq;
    const body = state.id && !state.dirty ? { task: state.id }
      : { task: state.id, event: ctx.eventSlug, content: ctx.payload() };
    const box = qcBox();
    box.dataset.state = "checking";
    let resp, data;
    try {
      resp = await send("POST", "/api/qc/", body);
      data = await resp.json().catch(() => ({}));
    } catch (e) { resp = null; }
    if (seq !== qcSeq) return;  // a newer check is under way
    if (!resp || !resp.ok) {
      render(null, resp ? (data.detail || ctx.flatten(data).join("; ") || `HTTP ${resp.status}`) : "the server cannot be reached");
      return;
    }
    render(data.findings, null, data.version);
  }
  function qcBox() {
    let box = $("#qc-box");
    if (!box) { box = el("section", { class: "card", id: "qc-box" }); $("#answer-card").after(box); }
    return box;
  }
  // a broken reference reads as the editor says it next to the field (ctx.brokenRefAt), not as the
  // server's "'<key> from trajectory[deleted].obs' is not a reference…"
  function message(f) {
    const own = f.check.startsWith("references.") && ctx.brokenRefAt ? ctx.brokenRefAt(f.location) : "";
    return own || f.message;
  }
  function findingNode(f) {
    return el("li", { class: `${f.severity} jump`, "data-location": f.location, title: "Show it", tabindex: "0",
      onclick: () => ctx.jumpTo(f.location), onkeydown: (e) => { if (e.key === "Enter") ctx.jumpTo(f.location); } },
    el("b", { text: f.check }), ` (${f.location}): ${message(f)}`);
  }
  function render(findings, failure, version) {
    const box = qcBox();
    box.innerHTML = "";
    box.dataset.state = failure ? "failed" : "done";
    box.appendChild(el("h2", { text: "Quality control" }, el("small", { text: version ? ` r${version} (as on the task page)` : " unsaved edits (replay checks follow the save)" })));
    if (failure) { box.appendChild(el("p", { class: "field-error", text: `QC could not run: ${failure}` })); return; }
    // a value the editor knows is a broken reference is reported once, as that reference: not again by
    // a check of the value itself (tools.invalid_value on "<key> from trajectory[deleted].obs")
    findings = findings.filter((f) => f.check.startsWith("references.") || !(ctx.brokenRefAt && ctx.brokenRefAt(f.location)));
    lastFindings = findings;
    if (!findings.length) box.appendChild(el("p", { class: "ok", id: "qc-clean", text: "No finding: the checks pass." }));
    else {
      const ul = el("ul", { class: "qc" });
      findings.forEach((f) => ul.appendChild(findingNode(f)));
      box.appendChild(ul);
    }
    renderSubmitFindings();
  }
  function renderSubmitFindings() {
    const panel = $("#submit-findings");
    const errors = lastFindings.filter((f) => f.severity === "error");
    const warnings = lastFindings.length - errors.length;
    const sum = $("#qc-summary");
    sum.hidden = false;
    sum.className = `qc-summary ${errors.length ? "error" : warnings ? "warning" : "ok"}`;
    sum.textContent = errors.length ? `${errors.length} error${errors.length > 1 ? "s" : ""} block submission` : warnings ? `QC: ${warnings} warning${warnings > 1 ? "s" : ""}` : "QC passes";
    panel.innerHTML = "";
    if (transitionRefusal) panel.appendChild(el("p", { class: "field-error", text: transitionRefusal }));
    if (errors.length) {
      const ul = el("ul", { class: "qc" });
      errors.forEach((f) => ul.appendChild(findingNode(f)));
      panel.appendChild(ul);
    }
    panel.hidden = !transitionRefusal && !(errors.length && panel.dataset.open === "1");
  }
  /** A refused transition: QC errors are listed once, next to Submit; a refusal that is not QC (no replay, status) says why. */
  function refused(data, status) {
    if (data.qc) { lastFindings = data.qc; transitionRefusal = ""; render(data.qc, null, state.version); }
    else transitionRefusal = data.detail || `HTTP ${status}`;
    $("#submit-findings").dataset.open = "1";
    renderSubmitFindings();
  }
  $("#qc-summary").onclick = () => {
    const panel = $("#submit-findings");
    panel.dataset.open = panel.dataset.open === "1" ? "0" : "1";
    renderSubmitFindings();
  };
  return { schedule, render, refused };
}
