// The editor's state rules (frontend/static/studio/editor/state.js), run by `node --test tests/js`.
// Expected values worked out by hand from the rules the module documents: structural edits keep
// uids (references follow them), undo coalesces typing in one field within a second, and a change
// back to the saved revision drops the autosaved draft; a comment pinned to an answer field shows the
// field's name in the unsaved edits (answerRenames), and the server's pins replace the editor's.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  UndoLog, answerRenames, applyServerFields, changeOutcome, changeTool, commentPinLabel, createState, deleteStepAt, duplicateStepAt,
  followRenames, insertStepAt, moveStepBy, offersDraft, pinnedField,
} from "../../frontend/static/studio/editor/state.js";

test("createState: a new task is an editable draft; a task its author may not edit is read-only", () => {
  const fresh = createState(null, [{ name: "vec.count" }]);
  assert.deepEqual([fresh.id, fresh.version, fresh.status, fresh.readOnly, fresh.steps, fresh.nextUid], [null, 0, "draft", false, [], 1]);
  assert.deepEqual(Object.keys(fresh.toolByName), ["vec.count"]);
  const other = createState({ id: 5, version: 3, status: "returned", can_edit: false }, []);
  assert.deepEqual([other.id, other.version, other.status, other.readOnly], [5, 3, "returned", true]);
});

test("structural edits: new uids for new steps, the graveyard remembers a deleted step, the selection follows", () => {
  const s = createState(null, []);
  insertStepAt(s, 0);                       // [1]
  insertStepAt(s, 1);                       // [1, 2]
  s.steps[0].call = "vec.filter";
  s.steps[0].args = { a: [1] };
  duplicateStepAt(s, 0);                    // [1, 3, 2]
  assert.deepEqual(s.steps.map((x) => x.uid), [1, 3, 2]);
  assert.equal(s.selected, 1);
  assert.deepEqual(s.steps[1], { uid: 3, call: "vec.filter", args: { a: [1] } });
  assert.notEqual(s.steps[1].args.a, s.steps[0].args.a);  // a deep copy
  assert.equal(moveStepBy(s, 2, 1), false);  // past the end: nothing
  assert.equal(moveStepBy(s, 2, -1), true);  // [1, 2, 3]
  assert.deepEqual([s.steps.map((x) => x.uid), s.selected], [[1, 2, 3], 1]);
  const removed = deleteStepAt(s, 2);        // [1, 2]
  assert.equal(removed.uid, 3);
  assert.deepEqual(s.graveyard, { 3: { index: 2, call: "vec.filter" } });
  assert.equal(s.selected, 1);               // min(2, last index 1)
  assert.equal(deleteStepAt(s, 5), null);
  insertStepAt(s, 0);
  assert.equal(s.steps[0].uid, 4);           // uids are never reused
});

test("changeTool keeps only the arguments the new tool has", () => {
  const step = { uid: 1, call: "vec.filter", args: { vector_path: "a.geojson", attribute_name: "x" } };
  changeTool(step, { name: "vec.count", params: [{ name: "vector_path" }, { name: "where" }] });
  assert.deepEqual(step, { uid: 1, call: "vec.count", args: { vector_path: "a.geojson" } });
});

test("UndoLog: the first snapshot is the start, typing in one field within a second is one edit, redo is cleared by an edit", () => {
  const log = new UndoLog();
  const field = {}, other = {};
  assert.equal(log.record("a", null, 0), false);        // the starting point
  assert.equal(log.record("a", null, 10), false);       // no change: no edit
  assert.equal(log.record("b", field, 1000), true);
  assert.equal(log.record("c", field, 1500), true);     // 500 ms later, same field: merged into b's edit
  assert.deepEqual(log.undo, ["a"]);
  log.record("d", field, 2600);                         // 1100 ms after the last keystroke: a new edit
  log.record("e", other, 2700);                         // another field: a new edit
  assert.deepEqual(log.undo, ["a", "c", "d"]);
  assert.equal(log.travel("undo"), "d");
  assert.equal(log.travel("undo"), "c");
  assert.deepEqual(log.redo, ["e", "d"]);
  assert.equal(log.travel("redo"), "d");
  log.record("x", null, 3000);                          // an edit after undo: no redo left
  assert.deepEqual([log.undo, log.redo, log.current], [["a", "c", "d"], [], "x"]);
  assert.equal(log.travel("redo"), null);
});

test("UndoLog keeps at most its limit, dropping the oldest", () => {
  const log = new UndoLog(2);
  ["s0", "s1", "s2", "s3"].forEach((s, k) => log.record(s, null, k * 5000));
  assert.deepEqual(log.undo, ["s1", "s2"]);
});

test("changeOutcome: what a change means for the replay, the save state and the draft", () => {
  // an edit: stale, unsaved, an autosave a moment later
  assert.deepEqual(changeOutcome("B", "A", "A", false), { stale: true, dirty: true, draft: "schedule" });
  // undone back to the saved revision with a draft kept: the draft of the edits undone goes
  assert.deepEqual(changeOutcome("A", "B", "A", true), { stale: true, dirty: false, draft: "discard" });
  assert.deepEqual(changeOutcome("A", "B", "A", false), { stale: true, dirty: false, draft: "cancel" });
  // nothing that QC reads changed (the same payload): not stale
  assert.deepEqual(changeOutcome("B", "B", "A", true), { stale: false, dirty: true, draft: "schedule" });
});

test("offersDraft: never read-only, never a draft equal to the saved revision", () => {
  const baseline = JSON.stringify({ question: "q" });
  assert.equal(offersDraft({ content: { question: "q2" } }, false, baseline), true);
  assert.equal(offersDraft({ content: { question: "q" } }, false, baseline), false);
  assert.equal(offersDraft({ content: { question: "q2" } }, true, baseline), false);
  assert.equal(offersDraft(null, false, baseline), false);
});

test("answerRenames: a field renamed in place is a rename; a removal, an addition or a swap is not (the server's rule)", () => {
  const spec = (...names) => names.map((name) => ({ name, eval_type: "scalar_count", source: 1 }));
  assert.deepEqual(answerRenames(spec("count", "area"), spec("total", "area")), { count: "total" });
  assert.deepEqual(answerRenames(spec("count", "area"), spec("n", "km2")), { count: "n", area: "km2" });
  assert.deepEqual(answerRenames(spec("count", "area"), spec("area")), {});
  assert.deepEqual(answerRenames(spec("count", "area"), spec("area", "extra")), {});
  assert.deepEqual(answerRenames(spec("count"), spec("count", "extra")), {});
  assert.deepEqual(answerRenames(spec("a", "b"), spec("b", "a")), {});
  assert.deepEqual(answerRenames(spec("count"), spec("")), {});
  assert.deepEqual(answerRenames(undefined, spec("x")), {});
});

test("commentPinLabel: a comment on an answer field is labelled with the field's name in the unsaved edits", () => {
  const onField = { step_index: null, answer_field: "count", location: null };
  assert.equal(commentPinLabel(onField, {}), "answer count");
  assert.equal(commentPinLabel(onField, { count: "total" }), "answer total");
  assert.equal(commentPinLabel(onField, { area: "km2" }), "answer count");
  // a field named like an Object property is a name like any other, not a lookup into Object.prototype
  assert.equal(commentPinLabel({ answer_field: "constructor" }, {}), "answer constructor");
  assert.equal(commentPinLabel({ answer_field: "toString" }, { constructor: "x" }), "answer toString");
  // step, map and task pins do not change with renames
  assert.equal(commentPinLabel({ step_index: 0, answer_field: "" }, { count: "total" }), "step 0");
  assert.equal(commentPinLabel({ step_index: null, answer_field: "", location: { x: 1, y: 2 } }, {}), "map");
  assert.equal(commentPinLabel({ step_index: null, answer_field: "", location: null }, {}), "task");
  assert.equal(pinnedField({ answer_field: "" }, { "": "x" }), null);
});

test("followRenames: comments move to the new names, others stay; the count of those moved", () => {
  const threads = [{ id: 1, answer_field: "count" }, { id: 2, answer_field: "area" }, { id: 3, answer_field: "" }];
  assert.equal(followRenames(threads, { count: "total" }), 1);
  assert.deepEqual(threads.map((c) => c.answer_field), ["total", "area", ""]);
  assert.equal(followRenames(threads, {}), 0);
  // a rename undone before the save is no rename: answerRenames gives {}, nothing moves
  const spec = (...names) => names.map((name) => ({ name }));
  assert.equal(followRenames(threads, answerRenames(spec("total", "area"), spec("total", "area"))), 0);
  assert.deepEqual(threads.map((c) => c.answer_field), ["total", "area", ""]);
});

test("applyServerFields: the server's pins replace the editor's; comments it did not list stay", () => {
  const threads = [{ id: 1, answer_field: "w_count" }, { id: 2, answer_field: "area" }, { id: 3, answer_field: "x" }];
  assert.equal(applyServerFields(threads, { 1: "intersecting_a_count", 2: "area" }), 1);
  assert.deepEqual(threads.map((c) => c.answer_field), ["intersecting_a_count", "area", "x"]);
  assert.equal(applyServerFields(threads, { 3: "" }), 1);
  assert.equal(threads[2].answer_field, "");
  assert.equal(applyServerFields(threads, null), 0);
});
