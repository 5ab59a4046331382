// The editor's state and its rules, with no DOM: the task's identity and flags, the list of steps
// (each with a uid that references bind to), what structural edits do to it, the undo log (a
// snapshot per edit) and what a change means for the draft. Imported by the editor's page modules
// and by node's tests (tests/js/state.test.mjs).

/**
 * The editor's state for a task (`task`: editor-config's "task", null for a new task).
 * @param {Object|null} task  {id, version, status, can_edit, ...}
 * @param {Array<{name: string}>} tools  the tool catalogue (editor-config's "tools")
 * @returns {Object}  {id, version, status, readOnly, dirty, jsonView, selected, stepValues (index -> obs
 *   of the last replay), stepStatus, drawn (answer field -> L.Layer drawn on the map), steps
 *   ([{uid, call, args}], references inside args as {"$ref": uid, key}), nextUid, graveyard (uid of a
 *   deleted step -> {index, call} when it was deleted, for messages), toolByName}
 */
export function createState(task, tools) {
  return {
    id: task ? task.id : null,
    version: task ? task.version : 0,
    status: task ? task.status : "draft",
    readOnly: task ? !task.can_edit : false,
    dirty: false,
    jsonView: false,
    selected: 0,
    stepValues: {},
    stepStatus: {},
    drawn: {},
    steps: [],
    nextUid: 1,
    graveyard: {},
    toolByName: Object.fromEntries((tools || []).map((t) => [t.name, t])),
  };
}

/** A new empty step with the next uid. */
export function newStep(s) { return { uid: s.nextUid++, call: "", args: {} }; }

/** Insert an empty step at `at` and select it. */
export function insertStepAt(s, at) { s.steps.splice(at, 0, newStep(s)); s.selected = at; }

/**
 * Delete step `i`: its uid goes to the graveyard (references to it say which step was deleted);
 * the selection stays at `i`, within the list. Returns the removed step, or null when there is none.
 */
export function deleteStepAt(s, i) {
  const removed = s.steps[i];
  if (!removed) return null;
  s.graveyard[removed.uid] = { index: i, call: removed.call };
  s.steps.splice(i, 1);
  s.selected = Math.max(0, Math.min(i, s.steps.length - 1));
  return removed;
}

/** A copy of step `i` (a new uid, the same tool, a deep copy of its arguments) right after it, selected. */
export function duplicateStepAt(s, i) {
  s.steps.splice(i + 1, 0, { uid: s.nextUid++, call: s.steps[i].call, args: JSON.parse(JSON.stringify(s.steps[i].args || {})) });
  s.selected = i + 1;
}

/** Swap step `i` with its neighbour `i + delta`; false (nothing done) past either end. */
export function moveStepBy(s, i, delta) {
  const j = i + delta;
  if (j < 0 || j >= s.steps.length) return false;
  [s.steps[i], s.steps[j]] = [s.steps[j], s.steps[i]];
  s.selected = j;
  return true;
}

/** Keep the arguments of `step` that `tool` has as parameters, then make it a call of `tool`. */
export function changeTool(step, tool) {
  const keep = {};
  tool.params.forEach((p) => { if (step.args && step.args[p.name] !== undefined) keep[p.name] = step.args[p.name]; });
  step.call = tool.name;
  step.args = keep;
}

/**
 * Undo/redo over snapshots (strings) of the editor's model: every edit is one entry; typing in one
 * field within a second is one edit; at most `limit` entries are kept (the oldest go first).
 */
export class UndoLog {
  constructor(limit = 200) {
    this.limit = limit;
    this.undo = [];
    this.redo = [];
    this.current = null;
    this.typingIn = null;
    this.typingAt = 0;
  }

  /**
   * Note the model as it is now. The first call sets the starting point; a snapshot equal to the
   * current one is no edit.
   * @param {string} snap
   * @param {*} typing  the field typed in (any value compared by identity), null for other edits
   * @param {number} now  milliseconds (Date.now())
   * @returns {boolean}  whether an edit was recorded
   */
  record(snap, typing, now) {
    if (this.current === null) { this.current = snap; return false; }
    if (snap === this.current) return false;
    const coalesce = typing && this.typingIn === typing && now - this.typingAt < 1000 && this.undo.length;
    if (!coalesce) this.undo.push(this.current);
    if (this.undo.length > this.limit) this.undo.shift();
    this.redo = [];
    this.current = snap;
    this.typingIn = typing || null;
    this.typingAt = now;
    return true;
  }

  /**
   * Go one edit back ("undo") or forward ("redo").
   * @returns {string|null}  the snapshot to restore, null when there is none that way
   */
  travel(direction) {
    const [from, to] = direction === "undo" ? [this.undo, this.redo] : [this.redo, this.undo];
    if (!from.length) return null;
    to.push(this.current);
    this.current = from.pop();
    this.typingIn = null;
    return this.current;
  }
}

/**
 * What a change means, from the payload (JSON text) now, the payload last checked, the saved
 * revision's payload (`baseline`) and whether an autosaved draft is kept:
 * {stale: the replay and QC are out of date, dirty: unsaved, draft: "schedule" (autosave a moment
 * later) | "discard" (back to the saved revision, e.g. by undo: the draft of the edits undone is
 * not kept) | "cancel" (back to it with no draft kept: only the pending autosave is cancelled)}.
 */
export function changeOutcome(now, lastChecked, baseline, draftKept) {
  const dirty = now !== baseline;
  return { stale: now !== lastChecked, dirty, draft: dirty ? "schedule" : draftKept ? "discard" : "cancel" };
}

/**
 * Whether the editor offers to restore a draft ({content}: the server's draft of an existing task,
 * or this browser's of a new one): never read-only, never one equal to the saved revision.
 */
export function offersDraft(draft, readOnly, baseline) {
  return !!draft && !readOnly && JSON.stringify(draft.content) !== baseline;
}

/**
 * The answer fields renamed between two answer_spec lists ([{name, ...}]): {old name: new name}.
 * The server's rule (kernel.content.answer_renames), the same: the field at position i is renamed
 * when its name differs, the old name is gone from the new list and the new name was not in the
 * old one (a field removed or added, or two names swapped, is no rename). Empty names are ignored.
 */
export function answerRenames(oldSpec, newSpec) {
  const names = (spec) => (Array.isArray(spec) ? spec : []).map((f) => (f && typeof f === "object" ? String(f.name || "") : ""));
  const [before, after] = [names(oldSpec), names(newSpec)];
  const out = {};
  before.forEach((a, i) => {
    const b = after[i];
    if (a && b && a !== b && !after.includes(a) && !before.includes(b)) out[a] = b;
  });
  return out;
}

/**
 * The answer field a review comment is pinned to as the editor shows it now: its saved name
 * (`comment.answer_field`), or the name that field has in the unsaved edits when `renames`
 * ({old: new}, answerRenames between the saved revision and the edits) renames it; null when the
 * comment is not pinned to an answer field.
 */
export function pinnedField(comment, renames) {
  const field = comment && comment.answer_field;
  if (!field) return null;
  return (renames && Object.prototype.hasOwnProperty.call(renames, field) && renames[field]) || field;
}

/**
 * The label of a review comment's pin: "step N" (pinned to step N), "answer <field>" (to an answer
 * field, under its name in the unsaved edits: pinnedField), "map" (to a location), "task" (none).
 * @param {Object} comment  {step_index, answer_field, location} (editor-config's task.comments)
 * @param {Object} renames  {old field name: new name} of the unsaved edits ({} for none)
 */
export function commentPinLabel(comment, renames) {
  if (comment.step_index !== null && comment.step_index !== undefined) return `step ${comment.step_index}`;
  const field = pinnedField(comment, renames);
  if (field) return `answer ${field}`;
  return comment.location ? "map" : "task";
}

/**
 * Pin comments to the new names of their answer fields (`renames`, {old: new}: what the server
 * did when the revision that renamed them was saved). Changes `threads` in place; returns the
 * number of comments moved.
 */
export function followRenames(threads, renames) {
  let moved = 0;
  (threads || []).forEach((c) => {
    const to = pinnedField(c, renames);
    if (to && to !== c.answer_field) { c.answer_field = to; moved++; }
  });
  return moved;
}

/**
 * Pin comments to the answer fields the server holds (`serverFields`: {comment id: answer_field},
 * "" for none, from GET /api/tasks/<id>/comments/): after a save or on loading another revision the
 * server's pins are the truth, whatever the editor guessed. Comments the server did not list are
 * left as they are. Changes `threads` in place; returns the number of comments whose field changed.
 */
export function applyServerFields(threads, serverFields) {
  let changed = 0;
  (threads || []).forEach((c) => {
    if (!serverFields || !Object.prototype.hasOwnProperty.call(serverFields, c.id)) return;
    const field = serverFields[c.id] || "";
    if (field !== (c.answer_field || "")) { c.answer_field = field; changed++; }
  });
  return changed;
}
