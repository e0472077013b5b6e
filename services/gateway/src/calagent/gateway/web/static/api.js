// The HTTP API: the bearer token or the session's CSRF token on every request; a 401 is told to
// the session (REFUSED), which signs out.

import { t } from "./i18n.js";
import { REFUSED, SAFE_METHODS, state } from "./state.js";

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}
// ---- the API -----------------------------------------------------------------------------------

async function errorText(response) {
  try {
    const body = await response.json();
    if (body?.error?.message) return body.error.message;
  } catch {
    // not JSON: the status says enough
  }
  return response.statusText || String(response.status);
}

export async function api(path, { method = "GET", body, accept = "application/json" } = {}) {
  // The language a command without words is answered in, and new calendars are named in.
  const headers = { Accept: accept, "Accept-Language": state.lang === "zh" ? "zh-CN" : "en" };
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  else if (state.csrf && !SAFE_METHODS.has(method)) headers["X-CSRF-Token"] = state.csrf;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      // The session cookie, when there is one; a bearer token wins over it on the server.
      credentials: "same-origin",
    });
  } catch {
    throw new ApiError(0, t("error.network"));
  }
  if (response.status === 401) {
    document.dispatchEvent(new Event(REFUSED));
    throw new ApiError(401, t("signin.error_refused"));
  }
  if (!response.ok) throw new ApiError(response.status, await errorText(response));
  return response;
}

export function newMessageId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
