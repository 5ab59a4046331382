// The editor's review comments (DOM): the task's threads in the comments card, each open one also
// on its step or answer field and, pinned to a location, on the map; reply and resolve through the API.
import { send } from "../api.js";
import { $, $$, el } from "./dom.js";
import { applyServerFields, commentPinLabel, followRenames as followRenamesIn } from "./state.js";

/**
 * @param {Object} ctx  {task (editor-config's task, null for a new task), state, userName, toast(text),
 *   showMarkers(threads) (map_glue.js), renames() ({old answer field: new name} of the unsaved edits,
 *   state.js answerRenames)}
 * @returns {{render(), followRenames(renames), syncFields(), threads: Array}}  render() draws every
 *   thread again (after the steps are drawn), a comment pinned to an answer field renamed in the
 *   unsaved edits under its new name (state.js commentPinLabel), in the list and on the answer
 *   fields; followRenames pins the threads to the new names at once (the server did so when the
 *   revision was saved); syncFields() then reads the server's pins (every page of GET
 *   /api/tasks/<id>/comments/) and draws them again when one differs: resolves to the number of
 *   threads changed (0 at once when there are none), null when not read (no task, an error, or a
 *   save in the meantime)
 */
export function initComments(ctx) {
  const T = ctx.task;
  const { state, toast } = ctx;
  const threads = T ? T.comments : [];

  function commentNode(c) {
    const box = el("div", { class: "comment" + (c.resolved ? " resolved" : ""), "data-comment": c.id });
    box.appendChild(el("div", { class: "comment-head" }, el("b", { text: c.author || "?" }), el("span", { class: "meta", text: ` r${c.revision_number} · ${new Date(c.created_at).toLocaleString()}` }),
      c.resolved ? el("span", { class: "badge", text: "resolved" }) : null));
    box.appendChild(el("p", { text: c.body }));
    (c.replies || []).forEach((r) => box.appendChild(el("div", { class: "reply" }, el("b", { text: r.author || "?" }), ": ", r.body)));
    if (T && T.can_comment !== undefined) {
      const actions = el("div", { class: "comment-actions" });
      if (!c.resolved) actions.appendChild(el("button", { type: "button", class: "linkbutton resolve", text: "Resolve", onclick: () => resolveComment(c, true) }));
      actions.appendChild(el("button", { type: "button", class: "linkbutton", text: "Reply", onclick: () => {
        const ta = el("textarea", { rows: 2, class: "reply-body", placeholder: "Reply…" });
        const sendButton = el("button", { type: "button", text: "Send", onclick: async () => { if (await postComment({ body: ta.value, parent: c.id })) { c.replies = (c.replies || []).concat([{ author: ctx.userName, body: ta.value }]); c.resolved = false; render(); } } });
        actions.replaceWith(el("div", { class: "reply-form" }, ta, sendButton));
        ta.focus();
      } }));
      box.appendChild(actions);
    }
    return box;
  }
  async function postComment(body) {
    const resp = await send("POST", `/api/tasks/${state.id}/comments/`, body);
    if (!resp.ok) { const d = await resp.json().catch(() => ({})); toast(d.detail || `comment refused (HTTP ${resp.status})`); return false; }
    return true;
  }
  async function resolveComment(c, resolved) {
    const resp = await send("POST", `/api/comments/${c.id}/resolve/`, { resolved });
    if (resp.ok) { c.resolved = resolved; render(); } else toast(`not resolved (HTTP ${resp.status})`);
  }
  function render() {
    if (!T) return;
    $$(".step-comments").forEach((b) => { b.innerHTML = ""; });
    $("#answer-comments").innerHTML = "";
    const list = $("#comment-list");
    list.innerHTML = "";
    const open = threads.filter((c) => !c.resolved);
    $("#comments-card").hidden = !threads.length;
    if (threads.length) $("#comments-card h2").textContent = `Review comments (${open.length} open)`;
    const renames = ctx.renames ? ctx.renames() : {};
    threads.forEach((c) => {
      const where = commentPinLabel(c, renames);  // a renamed answer field's comments under its new name
      const node = commentNode(c);
      node.prepend(el("span", { class: "pin", text: where }));
      list.appendChild(node);
      if (!c.resolved && c.step_index !== null && c.step_index !== undefined) {
        const li = $$("#steps > li")[c.step_index];
        if (li) $(".step-comments", li).appendChild(commentNode(c));
      } else if (!c.resolved && c.answer_field) {
        const onField = commentNode(c);
        onField.prepend(el("span", { class: "pin", text: where }));  // which field: the same label
        $("#answer-comments").appendChild(onField);
      }
    });
    ctx.showMarkers(threads);
  }
  function followRenames(renames) { followRenamesIn(threads, renames); }
  async function syncFields() {
    if (!T || !state.id) return null;
    if (!threads.length) return 0;  // nothing to pin (the editor lists the threads it was opened with)
    const version = state.version;
    const fields = {};
    let url = `/api/tasks/${state.id}/comments/?page_size=200`;
    while (url) {
      const resp = await send("GET", url).catch(() => null);
      if (!resp || !resp.ok) return null;
      const page = await resp.json();
      page.results.forEach((c) => { fields[c.id] = c.answer_field; });
      url = page.next;
    }
    if (state.version !== version) return null;  // saved again meanwhile: that save reads them again
    const changed = applyServerFields(threads, fields);
    if (changed) render();
    return changed;
  }
  return { render, followRenames, syncFields, threads };
}
