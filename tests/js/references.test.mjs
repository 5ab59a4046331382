// The editor's reference logic (frontend/static/studio/editor/references.js), run by `node --test tests/js`.
// Every expected value is worked out by hand from the rules written in references.js and
// docs/authoring.md ("References are data"): the syntax `<key> from trajectory[N].obs`
// (dora-format.md §b), its messages, and the picker's order (exact key, key contains, tool name).
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  bind, brokenRefAt, brokenRefs, compatible, isRef, rankRefs, refGroups, refInfo, refProblem, refRank, refText, showArg, typeFamily, wire,
} from "../../frontend/static/studio/editor/references.js";

const TOOLS = {
  "vec.filter": { name: "vec.filter", results: [{ key: "vector_path", type: "str" }, { key: "total_filtered", type: "int" }] },
  "vec.count": { name: "vec.count", results: [{ key: "count", type: "int" }] },
  "geo.area": { name: "geo.area", results: [] },
};
const model = (steps, graveyard) => ({ steps, graveyard: graveyard || {}, toolByName: TOOLS });

test("refInfo reads the key and the index, with spaces and any case; anything else is not a reference", () => {
  assert.deepEqual(refInfo("<count> from trajectory[2].obs"), { key: "count", index: 2 });
  assert.deepEqual(refInfo("  < total area >   FROM Trajectory[10].obs "), { key: "total area", index: 10 });
  assert.equal(refInfo("count from trajectory[2].obs"), null);      // no angle brackets
  assert.equal(refInfo("<count> from trajectory[-1].obs"), null);   // not an index
  assert.equal(refInfo("<count> from step 2"), null);
  assert.equal(refInfo(undefined), null);
});

test("bind holds references to steps by uid, at any depth; wire writes them at the steps' indexes now", () => {
  const steps = [{ uid: 7, call: "vec.filter", args: {} }, { uid: 9, call: "vec.count", args: {} }];
  const held = bind({ a: ["<count> from trajectory[1].obs", 3], b: "plain" }, steps);
  assert.deepEqual(held, { a: [{ $ref: 9, key: "count" }, 3], b: "plain" });
  assert.ok(isRef(held.a[0]) && !isRef(held.a));
  // the two steps swapped: the reference follows its step (uid 9), now at index 0
  const swapped = [steps[1], steps[0]];
  assert.deepEqual(wire(held, swapped), { a: ["<count> from trajectory[0].obs", 3], b: "plain" });
  // the step deleted: written as "deleted" (the server refuses it)
  assert.equal(refText({ $ref: 9, key: "count" }, [steps[0]]), "<count> from trajectory[deleted].obs");
  // an index past the last step stays text (shown as broken)
  assert.equal(bind("<x> from trajectory[2].obs", steps), "<x> from trajectory[2].obs");
  assert.equal(showArg({ $ref: 7, key: "vector_path" }, steps), "<vector_path> from trajectory[0].obs");
  assert.equal(showArg([1, { $ref: 7, key: "k" }], steps), '[1,"<k> from trajectory[0].obs"]');
  assert.equal(showArg(undefined, steps), "");
});

test("refProblem says why a reference is broken, or nothing", () => {
  const steps = [{ uid: 1, call: "vec.filter", args: {} }, { uid: 2, call: "vec.count", args: {} }, { uid: 3, call: "", args: {} }];
  const m = model(steps, { 5: { index: 1, call: "vec.intersect" } });
  assert.equal(refProblem({ $ref: 1, key: "vector_path" }, 1, m), "");
  assert.equal(refProblem({ $ref: 5, key: "x" }, 2, m), "step 1 (vec.intersect) was deleted: undo (u) or rebind");
  assert.equal(refProblem({ $ref: 2, key: "count" }, 1, m), "trajectory[1] is not an earlier step");
  assert.equal(refProblem({ $ref: 2, key: "count" }, 3, m), "");
  assert.equal(refProblem({ $ref: 1, key: "cnt" }, 2, m), "step 0 (vec.filter) returns no 'cnt': it returns vector_path, total_filtered");
  assert.equal(refProblem({ $ref: 3, key: "anything" }, 3, m), "");  // a step with no tool yet: any key
  assert.equal(refProblem("<x> from trajectory[5].obs", 3, m), "trajectory[5] does not exist (there are 3 steps)");
  assert.equal(refProblem("<x> from step 2", 3, m), "not a reference to a step: rebind it (⤷ ref)");
  assert.equal(refProblem("just text", 3, m), "");
  // the first problem at any depth
  assert.equal(refProblem({ paths: ["ok", { $ref: 5, key: "x" }] }, 3, m), "step 1 (vec.intersect) was deleted: undo (u) or rebind");
});

test("brokenRefs lists step arguments then answer sources, an unnamed field as 'field'", () => {
  const steps = [{ uid: 1, call: "vec.filter", args: { p: "<x> from trajectory[0].obs" } },
    { uid: 2, call: "vec.count", args: { vector_path: { $ref: 1, key: "vector_path" } } }];
  const lines = brokenRefs(model(steps), [{ name: "n", source: { $ref: 2, key: "count" } }, { name: "", source: { $ref: 2, key: "area" } }]);
  assert.deepEqual(lines, [
    "trajectory[0].args.p: trajectory[0] does not exist (there are 2 steps)",
    "answer_spec[1].source (field): step 1 (vec.count) returns no 'area': it returns count",
  ]);
});

test("brokenRefAt finds the editor's message for a QC finding's location, or inside it; nothing elsewhere", () => {
  const lines = [
    "trajectory[1].args.vector_b_path: step 1 (vec.buffer) was deleted: undo (u) or rebind",
    "answer_spec[0].source (count): step 1 (vec.buffer) was deleted: undo (u) or rebind",
  ];
  assert.equal(brokenRefAt(lines, "answer_spec[0].source"), "step 1 (vec.buffer) was deleted: undo (u) or rebind");
  assert.equal(brokenRefAt(lines, "trajectory[1].args.vector_b_path"), "step 1 (vec.buffer) was deleted: undo (u) or rebind");
  assert.equal(brokenRefAt(lines, "trajectory[1].args.vector_b_path[0]"), "step 1 (vec.buffer) was deleted: undo (u) or rebind");
  assert.equal(brokenRefAt(lines, "trajectory[1].args.vector_b"), "");       // another argument, a prefix of the name
  assert.equal(brokenRefAt(lines, "answer_spec[0].source_x"), "");
  assert.equal(brokenRefAt(lines, "answer_spec[1].source"), "");
  assert.equal(brokenRefAt([], "answer_spec[0].source"), "");
  // a message with a colon of its own is kept whole
  assert.equal(brokenRefAt(["answer_spec[1].source (field): step 1 (vec.count) returns no 'area': it returns count"],
    "answer_spec[1].source"), "step 1 (vec.count) returns no 'area': it returns count");
});

test("typeFamily and compatible: what the picker marks as fitting a parameter", () => {
  assert.deepEqual(["list[int]", "dict", "bool", "float", "str", "str|int", "Path"].map(typeFamily),
    ["list", "dict", "bool", "number", "str", "any", "any"]);
  assert.equal(compatible({ name: "meter", type: "float" }, "int", "count"), true);
  assert.equal(compatible({ name: "meter", type: "float" }, "str", "vector_path"), false);
  assert.equal(compatible({ name: "vector_path", type: "str" }, "str", "vector_path"), true);
  assert.equal(compatible({ name: "vector_path", type: "str" }, "str", "label"), false);  // a path takes only a path/file output
  assert.equal(compatible(null, "str", "label"), true);  // an answer source takes anything
});

test("refGroups: one group per earlier step that returns something (no empty header), fitting outputs first", () => {
  const steps = [{ uid: 1, call: "vec.filter" }, { uid: 2, call: "" }, { uid: 3, call: "geo.area" }, { uid: 4, call: "vec.count" }, { uid: 5, call: "vec.count" }];
  const groups = refGroups(model(steps), 4, { name: "meter", type: "float" });
  assert.deepEqual(groups.map((g) => g.index), [0, 3]);  // step 1 has no tool, step 2's tool returns nothing, step 4 is not earlier
  assert.deepEqual(groups[0].results.map((r) => [r.key, r.ok]), [["total_filtered", true], ["vector_path", false]]);
  assert.equal(groups[1].results[0].ref, "<count> from trajectory[3].obs");
});

test("the picker's ranking: exact key, then keys containing the text, then tool-name matches; nearest step first", () => {
  assert.equal(refRank("count", "count int vec.count", ""), 0);
  assert.equal(refRank("count", "count int vec.count", "count"), 1);
  assert.equal(refRank("building_count", "building_count int seg.count", "count"), 2);
  assert.equal(refRank("total_filtered", "total_filtered int vec.count", "count"), 3);
  assert.equal(refRank("area", "area float geo.area", "count"), null);
  const rows = [
    { id: "a", key: "total_filtered", search: "total_filtered int vec.count", step: 0, order: 1 },
    { id: "b", key: "building_count", search: "building_count int seg.count", step: 1, order: 3 },
    { id: "c", key: "count", search: "count int vec.count", step: 0, order: 2 },
    { id: "d", key: "area", search: "area float geo.area", step: 2, order: 5 },
    { id: "e", key: "count_2", search: "count_2 int x.y", step: 2, order: 6 },
  ];
  const ranked = rankRefs(rows, "count");
  // c exact (1); e and b contain it (2: step 2 before step 1); a only by its tool's name (3); d hidden
  assert.deepEqual(ranked.map((r) => [r.id, r.rank]), [["c", 1], ["e", 2], ["b", 2], ["a", 3]]);
});
