// A step argument or an answer source typed as text, with no DOM: what value it is for the
// parameter's catalogue type, or why it is refused. Imported by the editor's page modules and by
// node's tests (tests/js/args.test.mjs).
import { REF_LIKE, REF_RE, refInfo, typeFamily } from "./references.js";

/**
 * The values of "one of a, b, c" in a parameter's note (a select offers them), or null when the
 * note names fewer than 2 or more than 12, or a value that is long or has a space.
 * @param {{note?: string}} p  a catalogue parameter
 * @returns {string[]|null}
 */
export function enumOf(p) {
  const m = /one of ([^;()]+)/i.exec(p.note || "");
  if (!m) return null;
  const vals = m[1].split(/,\s*|\s+or\s+/).map((s) => s.trim().replace(/^['"]|['"]$/g, "")).filter(Boolean);
  return vals.length >= 2 && vals.length <= 12 && vals.every((v) => v.length < 24 && !/\s/.test(v)) ? vals : null;
}

/**
 * An argument's text for parameter `p` ({type} from the catalogue; null: any).
 * @returns {{value: *}|{error: string}|{}}  {} when empty (the default applies); a reference, even a
 *   broken one, is its text (checked as a reference, never as the parameter's type)
 */
export function parseArg(text, p) {
  const t = text.trim();
  if (t === "") return {};
  if (REF_RE.test(t) || REF_LIKE.test(t) || /^<[^<>]+>$/.test(t)) return { value: t };
  const fam = typeFamily(p ? p.type : "any");
  if (fam === "str") return { value: text };
  if (fam === "number") {
    const n = Number(t);
    if (!Number.isFinite(n)) return { error: `expects ${p.type}` };
    if (/^int/.test(p.type) && !Number.isInteger(n)) return { error: "expects an integer" };
    return { value: n };
  }
  if (fam === "bool") return t === "true" ? { value: true } : t === "false" ? { value: false } : { error: "true or false" };
  if (/^[\[{\d\-"]/.test(t) || t === "true" || t === "false" || t === "null") {
    try {
      const v = JSON.parse(t);
      // a list parameter also takes a JSON-encoded list in a string (dora-format.md §0), nothing else
      if (fam === "list" && !Array.isArray(v) && !(typeof v === "string" && /^\s*\[/.test(v))) return { error: "expects a JSON list, e.g. [1, 2]" };
      if (fam === "dict" && (typeof v !== "object" || Array.isArray(v) || v === null)) return { error: "expects a JSON object" };
      return { value: v };
    } catch (e) {
      return { error: `not valid JSON: ${e.message}` };
    }
  }
  if (fam === "list" || fam === "dict") return { error: `expects JSON (${p.type})` };
  return { value: text };
}

/**
 * An answer source's text: a reference or plain text as it is (trimmed), JSON (numbers, lists,
 * objects, true/false/null, quoted strings) parsed; text that only looks like JSON stays text.
 */
export function parseSource(text) {
  const t = text.trim();
  if (t === "" || refInfo(t)) return t;
  if (/^[\[{\d\-"]/.test(t) || t === "true" || t === "false" || t === "null") { try { return JSON.parse(t); } catch (e) { return t; } }
  return t;
}
