// The editor's DOM helpers: query shorthands and an element builder. DOM is touched only when they
// are called, so a module importing them still loads in node.

/** The first element matching `sel` under `root` (the document by default), or null. */
export const $ = (sel, root) => (root || document).querySelector(sel);
/** Every element matching `sel` under `root` (the document by default), as an array. */
export const $$ = (sel, root) => [...(root || document).querySelectorAll(sel)];

/**
 * A new element: attrs "text" sets its text, "on<event>" adds a listener, true is an empty
 * attribute, undefined/null/false leave the attribute out; kids are nodes or strings (text nodes),
 * nested arrays flattened, null/undefined skipped.
 */
export function el(tag, attrs, ...kids) {
  const n = document.createElement(tag);
  Object.entries(attrs || {}).forEach(([k, v]) => {
    if (v === undefined || v === null || v === false) return;
    if (k === "text") n.textContent = v;
    else if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
    else n.setAttribute(k, v === true ? "" : v);
  });
  kids.flat().forEach((k) => { if (k !== null && k !== undefined) n.appendChild(typeof k === "string" ? document.createTextNode(k) : k); });
  return n;
}

/** Leaflet sets a tooltip's innerHTML from a string: user text goes in as a text node. */
export function textTip(text) { return el("span", { text: text }); }
