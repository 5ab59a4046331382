// Typed argument and answer-source text (frontend/static/studio/editor/args.js), run by
// `node --test tests/js`. Expected values worked out by hand from the catalogue's types: int,
// float, bool, list (a JSON list, or a JSON-encoded list in a string, dora-format.md §0), dict.
import assert from "node:assert/strict";
import { test } from "node:test";

import { enumOf, parseArg, parseSource } from "../../frontend/static/studio/editor/args.js";

test("parseArg: values of the parameter's type, or why not", () => {
  assert.deepEqual(parseArg("  ", { type: "int" }), {});
  assert.deepEqual(parseArg("16", { type: "int" }), { value: 16 });
  assert.deepEqual(parseArg("2.5", { type: "int" }), { error: "expects an integer" });
  assert.deepEqual(parseArg("2.5", { type: "float" }), { value: 2.5 });
  assert.deepEqual(parseArg("ten", { type: "float" }), { error: "expects float" });
  assert.deepEqual(parseArg("false", { type: "bool" }), { value: false });
  assert.deepEqual(parseArg("yes", { type: "bool" }), { error: "true or false" });
  assert.deepEqual(parseArg(" a b ", { type: "str" }), { value: " a b " });  // a string keeps its spaces
  assert.deepEqual(parseArg("[1, 2]", { type: "list[int]" }), { value: [1, 2] });
  assert.deepEqual(parseArg('"[1, 2]"', { type: "list" }), { value: "[1, 2]" });
  assert.deepEqual(parseArg("5", { type: "list" }), { error: "expects a JSON list, e.g. [1, 2]" });
  assert.deepEqual(parseArg("a,b", { type: "list" }), { error: "expects JSON (list)" });
  assert.deepEqual(parseArg("[1,", { type: "dict" }).error.startsWith("not valid JSON: "), true);
  // a reference, even a broken one, is its text (checked as a reference, not as an int)
  assert.deepEqual(parseArg("<count> from trajectory[0].obs", { type: "int" }), { value: "<count> from trajectory[0].obs" });
  assert.deepEqual(parseArg("<count> from step 0", { type: "int" }), { value: "<count> from step 0" });
});

test("enumOf: the values a parameter's note names", () => {
  assert.deepEqual(enumOf({ note: "one of 'mean', 'max' or 'min'" }), ["mean", "max", "min"]);
  assert.equal(enumOf({ note: "one of them" }), null);  // a single value is no choice
  assert.equal(enumOf({}), null);
});

test("parseSource: references and text stay text, JSON is parsed", () => {
  assert.equal(parseSource(" <count> from trajectory[2].obs "), "<count> from trajectory[2].obs");
  assert.equal(parseSource("12"), 12);
  assert.deepEqual(parseSource('{"type": "Point", "coordinates": [1, 2]}'), { type: "Point", coordinates: [1, 2] });
  assert.equal(parseSource("{bad"), "{bad");
  assert.equal(parseSource("Tokyo"), "Tokyo");
});
