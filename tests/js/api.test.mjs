// The one CSRF/fetch helper (frontend/static/studio/api.js), run by `node --test tests/js`.
// The cookie strings are written by hand; their decoded values are worked out from percent-encoding
// (%2B "+", %3D "=", %2F "/"). send() is checked against a real HTTP server on a free local port.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { test } from "node:test";

import { csrf, csrfFromCookie, send } from "../../frontend/static/studio/api.js";

test("csrfFromCookie: the decoded value of the cookie named exactly csrftoken", () => {
  assert.equal(csrfFromCookie("csrftoken=tok123"), "tok123");
  assert.equal(csrfFromCookie("a=1; csrftoken=abc%2Bd%3D; b=2"), "abc+d=");
  assert.equal(csrfFromCookie("xcsrftoken=wrong; csrftoken=right"), "right");
  assert.equal(csrfFromCookie("xcsrftoken=wrong"), "");
  assert.equal(csrfFromCookie("sessionid=s"), "");
  assert.equal(csrfFromCookie(""), "");
  assert.equal(csrfFromCookie(undefined), "");
  assert.equal(csrfFromCookie("csrftoken=100%"), "100%");  // not percent-encoding: as it is
});

test("csrf reads document.cookie, and is empty with no document", () => {
  assert.equal(csrf(), "");
  globalThis.document = { cookie: "csrftoken=a%2Fb" };
  try { assert.equal(csrf(), "a/b"); } finally { delete globalThis.document; }
});

test("send: the method, the decoded token in X-CSRFToken, a JSON body only when given", async () => {
  const seen = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => { body += c; });
    req.on("end", () => {
      seen.push({ method: req.method, token: req.headers["x-csrftoken"], type: req.headers["content-type"], body });
      res.writeHead(204).end();
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${server.address().port}/api/x/`;
  globalThis.document = { cookie: "csrftoken=t%2Bk" };
  try {
    const r1 = await send("POST", url, { a: [1, "b"] });
    const r2 = await send("DELETE", url);
    assert.deepEqual([r1.status, r2.status], [204, 204]);
  } finally {
    delete globalThis.document;
    server.close();
  }
  assert.deepEqual(seen, [
    { method: "POST", token: "t+k", type: "application/json", body: '{"a":[1,"b"]}' },
    { method: "DELETE", token: "t+k", type: undefined, body: "" },
  ]);
});
