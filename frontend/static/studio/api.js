// The one place the studio's scripts talk to the server: the CSRF token Django set in the
// `csrftoken` cookie (decoded: the cookie value is URL-encoded when it holds reserved characters)
// and a same-origin fetch that sends it. Every page script imports these; no other script reads
// document.cookie. Django's CSRF middleware checks the X-CSRFToken header (docs: "How to use
// Django's CSRF protection", AJAX) and the csrfmiddlewaretoken field of a posted HTML form.

/**
 * The CSRF token in a cookie string ("a=1; csrftoken=abc%2Bd; b=2" -> "abc+d").
 * @param {string} cookie  a document.cookie string: "name=value" pairs joined by "; "
 * @returns {string}  the decoded value of the cookie named exactly `csrftoken`, "" when absent
 *   (a value that is not valid percent-encoding is returned as it is)
 */
export function csrfFromCookie(cookie) {
  const m = /(?:^|;\s*)csrftoken=([^;]*)/.exec(String(cookie || ""));
  if (!m) return "";
  try { return decodeURIComponent(m[1]); } catch (e) { return m[1]; }
}

/** The CSRF token of this page's session (document.cookie; "" when none is set). */
export function csrf() {
  return csrfFromCookie(typeof document === "undefined" ? "" : document.cookie);
}

/**
 * A same-origin request with the CSRF token: a JSON body when `body` is given (Content-Type
 * application/json), none otherwise. Resolves to the Response (any status); rejects only when the
 * server cannot be reached, as fetch does.
 * @param {string} method  "GET", "POST", "PUT", "DELETE", …
 * @param {string} url
 * @param {*} [body]  any JSON-serialisable value; undefined sends no body
 * @returns {Promise<Response>}
 */
export function send(method, url, body) {
  const headers = { "X-CSRFToken": csrf() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  return fetch(url, { method, credentials: "same-origin", headers, body: body === undefined ? undefined : JSON.stringify(body) });
}
