// The public API, called with the caller's key from session storage, sent only as an
// Authorization header (never in a URL, never in a cookie).

const KEY = "sift.key";

export const session = {
  key() {
    return sessionStorage.getItem(KEY) || "";
  },
  set(key) {
    sessionStorage.setItem(KEY, key);
  },
  clear() {
    sessionStorage.removeItem(KEY);
  },
};

export class ApiError extends Error {
  constructor(status, code, message, hint) {
    super(message);
    this.status = status;
    this.code = code;
    this.hint = hint;
  }
}

function headersFor(key, extra) {
  const headers = { Accept: "application/json", ...extra };
  if (key) headers.Authorization = `Bearer ${key}`;
  return headers;
}

async function send(method, path, { body, headers, key } = {}) {
  const init = {
    method,
    headers: headersFor(key === undefined ? session.key() : key, headers),
    credentials: "omit",
    cache: "no-store",
    referrerPolicy: "no-referrer",
  };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (exc) {
    throw new ApiError(0, "network_error", `sift did not answer: ${exc.message}`,
      "Check that sift serve is still running.");
  }
  if (!response.ok) throw await errorOf(response);
  return response;
}

async function errorOf(response) {
  const text = await response.text();
  try {
    const e = JSON.parse(text).error;
    if (e && e.code) return new ApiError(response.status, e.code, e.message, e.hint);
  } catch {
    // not the error envelope: a proxy or the HTTP server itself answered
  }
  return new ApiError(response.status, `http_${response.status}`,
    text.slice(0, 300) || response.statusText, "");
}

export async function api(method, path, options) {
  const response = await send(method, path, options);
  return response.json();
}

// The response itself, for downloads (the body read as a Blob).
export async function apiRaw(method, path, options) {
  return send(method, path, options);
}
