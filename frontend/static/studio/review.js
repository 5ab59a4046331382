// The review page (task_detail.html): transitions (submit, start review, return with a reason,
// approve, release, withdraw), comments pinned to a step, an answer field or a map location
// (click the map), replies and resolve/reopen. Everything goes through the REST API; the page
// reloads to show the new state.
import { send } from "./api.js";
import { pageViewer } from "./replay_view.js";
import { StudioMap } from "./map.js";

(function () {
  const $ = (s, r) => (r || document).querySelector(s);
  const $$ = (s, r) => [...(r || document).querySelectorAll(s)];
  const taskId = JSON.parse(document.getElementById("task-id").textContent);
  // Leaflet sets a tooltip's innerHTML from a string: user text goes in as a text node.
  function textTip(text) { const n = document.createElement("span"); n.textContent = text; return n; }
  function showErrors(lines) {
    const ul = $("#errors");
    ul.innerHTML = "";
    lines.forEach((l) => { const li = document.createElement("li"); li.textContent = l; ul.appendChild(li); });
    if (lines.length) ul.scrollIntoView({ block: "nearest" });
  }
  async function post(url, body, onConflict) {
    const resp = await send("POST", url, body || {});
    const data = await resp.json().catch(() => ({}));
    if (resp.status === 409 && onConflict) return onConflict(data);
    if (!resp.ok) {
      // QC errors once each (the detail repeats their messages); otherwise the refusal itself
      const qc = (data.qc || []).filter((f) => f.severity === "error").map((f) => `${f.check} (${f.location}): ${f.message}`);
      showErrors(qc.length ? qc : [data.detail || `HTTP ${resp.status}`]);
      return null;
    }
    return data;
  }

  // ---- transitions
  $$("#transition-form button[data-action]").forEach((b) => {
    b.addEventListener("click", async () => {
      const reason = $("#transition-reason") ? $("#transition-reason").value.trim() : "";
      if (b.dataset.needsReason && !reason) {
        showErrors([`${b.textContent}: write the reason first (the author sees it).`]);
        $("#transition-reason").focus();
        return;
      }
      b.disabled = true;
      const url = `/api/tasks/${taskId}/transitions/`;
      // approving with open review comments asks first; the confirmation is recorded in the audit trail
      const ok = await post(url, { action: b.dataset.action, reason }, (data) => {
        if (!data.open_comments) { showErrors([data.detail || "conflict"]); return null; }
        const yes = window.confirm(`${data.open_comments} review comment(s) are still open. ${b.textContent.trim()} anyway? ` +
          "The audit trail will record that you confirmed it.");
        return yes ? post(url, { action: b.dataset.action, reason, acknowledge_open_comments: true }) : null;
      });
      b.disabled = false;
      if (ok) location.reload();
    });
  });

  // ---- comments: pin to a map location by clicking the map
  let location_ = null;
  let marker = null;
  function currentMap() {
    const v = pageViewer();
    const c = v && v.controllers()[0];
    return c ? { map: c.map, frame: c.frame, ctl: c } : null;
  }
  function armMapClick() {
    const m = currentMap();
    if (!m) return;
    // any click on the map, a building box or a step's polygon too, places the pin
    m.ctl.pickLocation((latlng) => {
      const digits = m.frame === "pixel" ? 1 : 7;
      location_ = { frame: m.frame, x: +latlng.lng.toFixed(digits), y: +latlng.lat.toFixed(digits) };
      if (marker) marker.remove();
      marker = L.circleMarker(latlng, StudioMap.commentPinStyle(false)).addTo(m.map);
      $("#comment-location").textContent = `${m.frame} x=${location_.x}, y=${location_.y}`;
      $("#comment-body").focus();
    });
    $("#comment-location").textContent = "click the map to place the pin…";
  }
  const pin = $("#comment-pin");
  if (pin) pin.addEventListener("change", () => {
    location_ = null;
    $("#comment-location").textContent = "";
    const m = currentMap();
    if (m) m.ctl.cancelPick();
    if (pin.value === "map") armMapClick();
  });
  const sendButton = $("#comment-send");
  if (sendButton) sendButton.addEventListener("click", async () => {
    const body = { body: $("#comment-body").value };
    const v = pin.value;
    if (v.startsWith("step:")) body.step_index = parseInt(v.slice(5), 10);
    else if (v.startsWith("answer:")) body.answer_field = v.slice(7);
    else if (v === "map") {
      if (!location_) { showErrors(["Click the map to place the comment's pin first."]); armMapClick(); return; }
      body.location = location_;
    }
    if (await post(`/api/tasks/${taskId}/comments/`, body)) location.reload();
  });
  document.addEventListener("click", async (e) => {
    const rb = e.target.closest(".resolve-button");
    if (rb) {
      if (await post(`/api/comments/${rb.dataset.comment}/resolve/`, { resolved: rb.dataset.resolved === "1" })) location.reload();
      return;
    }
    const reply = e.target.closest(".reply-button");
    if (reply) {
      const box = reply.closest(".comment-actions");
      const form = document.createElement("div");
      form.className = "reply-form";
      form.innerHTML = '<textarea rows="2" class="reply-body" placeholder="Reply…"></textarea><button type="button" class="reply-send">Send</button>';
      box.replaceWith(form);
      $("textarea", form).focus();
      $(".reply-send", form).addEventListener("click", async () => {
        if (await post(`/api/tasks/${taskId}/comments/`, { body: $("textarea", form).value, parent: parseInt(reply.dataset.comment, 10) })) location.reload();
      });
    }
  });
  // map-pinned comments as markers on the map (again after a replay rebuilt the map)
  function drawPins() {
    const m = currentMap();
    if (!m) return;
    $$("#comments .comment[data-location]").forEach((c) => {
      const loc = JSON.parse(c.dataset.location);
      if (loc.x === undefined || (loc.frame || "geographic") !== m.frame) return;
      L.circleMarker([loc.y, loc.x], StudioMap.commentPinStyle(c.classList.contains("resolved")))
        .bindTooltip(textTip($("p", c).textContent)).addTo(m.map);
    });
  }
  drawPins();
  document.addEventListener("studio:viewer-reset", () => setTimeout(drawPins, 0));
})();
