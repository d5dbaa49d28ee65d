// The dashboard's calls: every one goes to the node that served the page (same origin).
// A call meant for another node names it in Horologe-Forward-To ("master" or a node id) and
// this node forwards it (node/http/forwarding.py): the other nodes are other origins, and a 307
// to one of them would be followed without the Authorization header, then refused by CORS.

const KEYS = { client: "horologe.clientToken", admin: "horologe.adminToken" };

export function token(kind) {
  return sessionStorage.getItem(KEYS[kind]) || "";
}

export function setTokens(client, admin) {
  for (const [kind, value] of [["client", client], ["admin", admin]]) {
    if (value) sessionStorage.setItem(KEYS[kind], value);
    else sessionStorage.removeItem(KEYS[kind]);
  }
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// These 503s say nothing was done: no master for a moment (an election, a handover, a master
// whose read lease lapsed), no room for the connection, a release whose transfer failed, a
// node that found its store damaged and halted (another serves). They
// are asked again for this long, as the SDK does (horologe/client/calls.py). Other 503s (a
// timeout, a peer that did not answer, a handover not confirmed) may have taken effect, and
// are shown at once.
const RETRY_503_MS = 10000;
const REFUSED_503 = new Set(["no_master", "too_many_connections", "transfer_failed", "store_damaged"]);

// call("/admin/status", {to: "n2"}); the token by the path: /admin/* admin, /v1/* client.
export async function call(path, options = {}) {
  const deadline = Date.now() + RETRY_503_MS;
  for (let wait = 100; ; wait = Math.min(2 * wait, 1000)) {
    try {
      return await callOnce(path, options);
    } catch (e) {
      const refused = e instanceof ApiError && e.status === 503 && REFUSED_503.has(e.code);
      if (!refused || Date.now() + wait > deadline) throw e;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

async function callOnce(path, { method = "GET", body, to } = {}) {
  const headers = {};
  const scope = path.startsWith("/admin/") ? "admin" : path.startsWith("/v1/") ? "client" : null;
  if (scope && token(scope)) headers.Authorization = `Bearer ${token(scope)}`;
  if (to) headers["Horologe-Forward-To"] = to;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    redirect: "manual", // a redirect would leave this origin: never follow one
    cache: "no-store",
  });
  if (res.type === "opaqueredirect") {
    throw new ApiError(307, "redirected", "the master moved; the next refresh asks again");
  }
  const text = await res.text();
  let data = null;
  try {
    data = JSON.parse(text);
  } catch {
    data = null;
  }
  if (!res.ok) {
    const err = (data && data.error) || {};
    throw new ApiError(res.status, err.code || String(res.status), err.message || text.slice(0, 200));
  }
  return data === null ? text : data;
}
