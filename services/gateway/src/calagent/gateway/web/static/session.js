// Signing in (a pasted token, a development token, a one-time link, the OIDC cookie) and out.

import { api } from "./api.js";
import { loadWeek } from "./calendar.js";
import { loadCommand } from "./cards.js";
import { loadChanges } from "./changes.js";
import { loadHistory, setBusy } from "./chat.js";
import { mondayOf, todayYmd } from "./dates.js";
import { closeDetails } from "./details.js";
import { say } from "./i18n.js";
import { loadSavedSettings, resetSettings } from "./settings.js";
import { $, REFUSED, TOKEN_KEY, state } from "./state.js";
import { loadTasks } from "./tasks.js";

// ---- sign-in -----------------------------------------------------------------------------------

function showMessage(key) {
  const message = $("signin-message");
  if (key) {
    say(message, key);
    message.hidden = false;
  } else {
    message.hidden = true;
    message.textContent = "";
  }
}

async function startSession(token) {
  state.token = token;
  const response = await api("/web/session");
  state.session = await response.json();
  state.csrf = token ? null : (state.session.csrf_token ?? null);
  state.skewMs = Date.parse(state.session.now) - Date.now();
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  showMessage(null);
  $("signin").hidden = true;
  $("app").hidden = false;
  $("sign-out").hidden = false;
  $("settings-open").hidden = false;
  say($("who"), "user.signed_in_as", { user: state.session.user_id, tz: state.session.tz }).hidden = false;
  state.weekStart = mondayOf(todayYmd());
  $("composer-input").focus();
  // The saved language and zone are applied as they arrive, alongside the rest.
  await Promise.all([loadSavedSettings(), loadHistory(), loadCommand(), loadTasks(), loadWeek(), loadChanges()]);
}

export function signOut(reasonKey) {
  const wasSignedIn = state.session !== null;
  if (state.csrf) {
    // The cookie is HttpOnly: only the server can clear it.
    fetch("/auth/logout", {
      method: "POST",
      headers: { "X-CSRF-Token": state.csrf },
      cache: "no-store",
      credentials: "same-origin",
    }).catch(() => {});
  }
  sessionStorage.removeItem(TOKEN_KEY);
  state.token = null;
  state.csrf = null;
  state.session = null;
  state.command = null;
  state.waiting = [];
  state.receipts.clear();
  state.attendeeCalls.clear();
  state.events = [];
  state.weekLoaded = false;
  state.monthEvents = [];
  state.monthLoaded = false;
  state.historyBefore = null;
  closeDetails();
  $("history-more").hidden = true;
  $("month-grid").replaceChildren();
  clearInterval(state.countdown);
  setBusy(false);
  $("messages").replaceChildren();
  delete $("messages").dataset.loaded;
  $("messages-empty").hidden = false;
  $("card").replaceChildren();
  $("card").hidden = true;
  $("waiting-list").replaceChildren();
  $("waiting").hidden = true;
  $("week-days").replaceChildren();
  resetSettings();
  $("settings-open").hidden = true;
  $("app").hidden = true;
  $("sign-out").hidden = true;
  $("who").hidden = true;
  $("signin").hidden = false;
  showMessage(reasonKey);
  if (wasSignedIn || reasonKey) ($("dev-user") ?? $("token-input")).focus();
}

export async function signInWith(token) {
  try {
    await startSession(token);
  } catch (error) {
    if (error.status !== 401) {
      state.token = null;
      showMessage("signin.error_network");
    }
  }
}

// Back from the issuer, or a reload: the session cookie, if the browser holds one, signs in.
export async function signInWithCookie() {
  let response;
  try {
    response = await fetch("/web/session", { cache: "no-store", credentials: "same-origin" });
  } catch {
    showMessage("signin.error_network");
    return;
  }
  if (!response.ok) {
    $("oidc-signin").focus();
    return;
  }
  await signInWith(null);
}

export async function signInWithLink(link) {
  let response;
  try {
    response = await fetch("/web/login", {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ token: link }),
      cache: "no-store",
      credentials: "omit",
    });
  } catch {
    showMessage("signin.error_network");
    return;
  }
  if (!response.ok) {
    showMessage(response.status === 401 ? "signin.error_link" : "signin.error_network");
    ($("dev-user") ?? $("token-input")).focus();
    return;
  }
  const { token } = await response.json();
  await signInWith(token);
}

export function bindSignIn() {
  $("token-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const token = $("token-input").value.trim();
    if (!token) {
      showMessage("signin.error_empty");
      $("token-input").focus();
      return;
    }
    $("token-input").value = "";
    await signInWith(token);
  });
  const devForm = $("dev-form");
  if (devForm) {
    devForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      const user = $("dev-user").value.trim();
      if (!user) {
        showMessage("signin.error_empty");
        $("dev-user").focus();
        return;
      }
      try {
        const response = await api("/web/dev-token", { method: "POST", body: { user } });
        await signInWith((await response.json()).token);
      } catch {
        showMessage("signin.error_network");
      }
    });
  }
  $("sign-out").addEventListener("click", () => signOut("signin.signed_out"));
  // Any request the API refused (401): the token or the session cookie is no longer good.
  document.addEventListener(REFUSED, () => signOut("signin.error_refused"));
}
