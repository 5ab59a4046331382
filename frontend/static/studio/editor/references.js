// The editor's reference syntax, with no DOM: `<key> from trajectory[N].obs` (dora-format.md §b;
// the server's rule is kernel/references.py), references held as data, why one is broken, and the
// order of the reference picker. Imported by the editor's page modules and by node's tests
// (tests/js/references.test.mjs).
//
// References are data, not text: a reference in a step argument or an answer source is held as
// {"$ref": <step uid>, key} and bound to the step itself, so insert, delete, move, duplicate, change
// tool, undo and redo never rewrite it into a reference to another step. Its index is worked out
// when it is shown or sent; a reference to a deleted step is sent as "<key> from trajectory[deleted].obs"
// (the server refuses it: references.malformed) and shown as broken until undo or a rebind.
//
// `steps` below is the editor's list [{uid, call, args}]; `m` is the editor's state
// ({steps, graveyard: {uid: {index, call}}, toolByName: {name: {params, results: [{key, type}]}}}).

/** A well-formed reference: `<key> from trajectory[N].obs` (spaces around the parts allowed, any case). */
export const REF_RE = /^\s*<\s*([^<>]+?)\s*>\s+from\s+trajectory\[(\d+)\]\.obs\s*$/i;
/** Text that means to be a reference (`<key> from trajectory…` / `<key> from step…`), well formed or not. */
export const REF_LIKE = /^\s*<[^<>]*>\s*from\s+(trajectory|step)\b/i;

/**
 * The parts of a reference string.
 * @param {*} text
 * @returns {{key: string, index: number}|null}  null when `text` is not a well-formed reference
 */
export function refInfo(text) {
  const m = REF_RE.exec(String(text || ""));
  return m ? { key: m[1], index: parseInt(m[2], 10) } : null;
}

/** Whether `v` is a reference held as data ({"$ref": uid, key}). */
export const isRef = (v) => !!v && typeof v === "object" && !Array.isArray(v) && Object.prototype.hasOwnProperty.call(v, "$ref");

/** The position of the step with this uid in `steps`, -1 when it is not there (deleted). */
export function indexOfUid(steps, uid) { return steps.findIndex((s) => s.uid === uid); }

/** A held reference as the benchmark writes it, at its step's index now ("deleted" when the step is gone). */
export function refText(r, steps) {
  const i = indexOfUid(steps, r.$ref);
  return `<${r.key}> from trajectory[${i < 0 ? "deleted" : i}].obs`;
}

/**
 * Text/JSON values -> model values: every reference string (at any depth) binds to the step now at
 * its index; a reference past the last step stays a string (shown as broken).
 */
export function bind(v, steps) {
  if (typeof v === "string") {
    const r = refInfo(v);
    return r && r.index < steps.length ? { $ref: steps[r.index].uid, key: r.key } : v;
  }
  if (Array.isArray(v)) return v.map((x) => bind(x, steps));
  if (v && typeof v === "object" && !isRef(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, bind(x, steps)]));
  return v;
}

/** Model values -> the benchmark's JSON (what is saved, drafted and checked): references as text. */
export function wire(v, steps) {
  if (isRef(v)) return refText(v, steps);
  if (Array.isArray(v)) return v.map((x) => wire(x, steps));
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, wire(x, steps)]));
  return v;
}

/** A model value as the editor's text field shows it: strings as they are, references as text, the rest as JSON. */
export function showArg(v, steps) {
  return v === undefined ? "" : typeof v === "string" ? v : isRef(v) ? refText(v, steps) : JSON.stringify(wire(v, steps));
}

/** The outputs [{key, type}] of the tool of step `index` ([] when the step has no known tool). */
export function resultsOf(m, index) {
  const s = m.steps[index];
  const t = s && m.toolByName[s.call];
  return t ? t.results : [];
}

/**
 * Why a (model) reference is broken when read by the step at `position` (an answer field reads
 * at steps.length), or "" when it is fine; the first problem found at any depth of a list/object.
 * @param {*} v  a model value: a string, a held reference, or JSON holding either
 * @param {number} position
 * @param {{steps: Array, graveyard: Object, toolByName: Object}} m
 * @returns {string}
 */
export function refProblem(v, position, m) {
  if (typeof v === "string") {
    if (REF_LIKE.test(v) && !refInfo(v)) return "not a reference to a step: rebind it (⤷ ref)";
    const r = refInfo(v);
    return r ? `trajectory[${r.index}] does not exist (there are ${m.steps.length} steps)` : "";
  }
  if (Array.isArray(v)) return v.map((x) => refProblem(x, position, m)).find(Boolean) || "";
  if (!v || typeof v !== "object") return "";
  if (!isRef(v)) return Object.values(v).map((x) => refProblem(x, position, m)).find(Boolean) || "";
  const i = indexOfUid(m.steps, v.$ref);
  if (i < 0) {
    const g = m.graveyard[v.$ref] || {};
    return `step ${g.index} (${g.call || "no tool"}) was deleted: undo (u) or rebind`;
  }
  if (i >= position) return `trajectory[${i}] is not an earlier step`;
  const keys = resultsOf(m, i).map((x) => x.key);
  if (m.steps[i].call && keys.length && !keys.includes(v.key)) return `step ${i} (${m.steps[i].call}) returns no '${v.key}': it returns ${keys.join(", ")}`;
  return "";
}

/**
 * Every broken reference of the task, as "<where>: <why>" lines: each step argument, then each
 * answer field's source (its name, "field" when blank).
 * @param {{steps: Array, graveyard: Object, toolByName: Object}} m
 * @param {Array<{name: string, source: *}>} answers  the answer fields in order (model sources)
 * @returns {string[]}  e.g. ["trajectory[2].args.vector_path: trajectory[2] is not an earlier step"]
 */
export function brokenRefs(m, answers) {
  const out = [];
  m.steps.forEach((s, i) => Object.entries(s.args || {}).forEach(([k, v]) => {
    const why = refProblem(v, i, m);
    if (why) out.push(`trajectory[${i}].args.${k}: ${why}`);
  }));
  answers.forEach((a, j) => {
    const why = refProblem(a.source, m.steps.length, m);
    if (why) out.push(`answer_spec[${j}].source (${a.name || "field"}): ${why}`);
  });
  return out;
}

/**
 * The editor's own message for what a QC finding at `location` reports, when the editor knows that
 * reference is broken: one message for a broken reference everywhere (its field, a refused save, the
 * QC list), where the server can only say that "<key> from trajectory[deleted].obs" is malformed.
 * @param {string[]} lines  brokenRefs(...)'s lines
 * @param {string} location  a finding's location: "answer_spec[0].source", "trajectory[2].args.mask_path",
 *   or a place inside one ("trajectory[2].args.paths[1]")
 * @returns {string}  the "why" of the line at that location, "" when the editor has none
 */
export function brokenRefAt(lines, location) {
  const at = String(location || "");
  for (const line of lines) {
    const m = /^([^\s:]+)(?: \(.*?\))?: ([\s\S]*)$/.exec(line);
    if (!m) continue;
    const where = m[1];
    if (at === where || at.startsWith(where + ".") || at.startsWith(where + "[")) return m[2];
  }
  return "";
}

// ------------------------------------------------------------------ the reference picker

/**
 * The family of a catalogue type ("list[int]" -> "list", "str|int" -> "any"): what the editor checks
 * a typed value against and how the picker tells outputs that may not fit.
 * @returns {"list"|"dict"|"bool"|"number"|"str"|"any"}
 */
export function typeFamily(type) {
  const t = String(type || "any").toLowerCase();
  if (t.startsWith("list") || t.startsWith("[")) return "list";
  if (t.startsWith("dict") || t.startsWith("{")) return "dict";
  if (t.startsWith("bool")) return "bool";
  if (/^(int|float|number)/.test(t)) return "number";
  if (t.startsWith("str")) return t.includes("|") && /int|float/.test(t) ? "any" : "str";
  return "any";
}

/**
 * Whether an output of type `resultType` named `key` may fill `param` (null: an answer source, anything fits).
 * A path parameter takes only string outputs whose name or type says path/file.
 */
export function compatible(param, resultType, key) {
  const want = param ? typeFamily(param.type) : "any";
  const have = typeFamily(String(resultType).split("|")[0]);
  if (want === "any" || have === "any") return true;
  if (param && /path/.test(param.name)) return have === "str" && /path|file/.test(key + resultType);
  return want === have;
}

/**
 * The picker's groups for a field of the step at `beforeIndex`: one per earlier step that returns
 * something (a step with no tool or no outputs gets no header over nothing), its outputs with the
 * ones that fit `param` first (the catalogue's order otherwise).
 * @returns {Array<{index: number, call: string, results: Array<{key, type, ok: boolean, ref: string}>}>}
 */
export function refGroups(m, beforeIndex, param) {
  const groups = [];
  for (let n = 0; n < beforeIndex && n < m.steps.length; n++) {
    const res = resultsOf(m, n);
    if (!res.length) continue;
    const results = res.map((r) => ({ ...r, ok: compatible(param, r.type, r.key), ref: `<${r.key}> from trajectory[${n}].obs` }))
      .sort((a, b) => (b.ok - a.ok));
    groups.push({ index: n, call: m.steps[n].call, results });
  }
  return groups;
}

/**
 * The rank of one picker row for the filter text `w` (lower case, trimmed): 0 when there is no
 * filter, 1 the exact key, 2 a key that contains `w`, 3 a match only on the row's other words
 * (the tool's name, the output's type), null when the row does not match (hidden).
 * @param {string} key  the output's key, lower case
 * @param {string} search  "<key> <type> <tool name>", lower case
 */
export function refRank(key, search, w) {
  if (!w) return 0;
  if (key === w) return 1;
  if (key.includes(w)) return 2;
  return search.includes(w) ? 3 : null;
}

/**
 * The picker's rows while filtering by `w`: the matching rows, the exact key first, then keys that
 * contain the text, then rows that match only on their tool's name or type; the nearest step first
 * among equals, then the unfiltered order. Ranked, the list is flat (no group headers).
 * @param {Array<{key: string, search: string, step: number, order: number}>} rows
 * @returns {Array}  the same row objects, filtered and sorted, each given its `rank`
 */
export function rankRefs(rows, w) {
  return rows.map((r) => ({ r, rank: refRank(r.key, r.search, w) }))
    .filter((x) => x.rank !== null)
    .sort((a, b) => (a.rank - b.rank) || (b.r.step - a.r.step) || (a.r.order - b.r.order))
    .map((x) => Object.assign(x.r, { rank: x.rank }));
}
