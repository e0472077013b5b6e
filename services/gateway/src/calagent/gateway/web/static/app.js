// calagent's page: a client of the public HTTP API (contract §4, §10, §12, §16, §18), nothing more.
// No framework and no build step: ES modules of this origin, one per concern. Every string comes
// from /web/i18n.json (zh and en); the token lives in this tab's sessionStorage, or, signed in with
// OpenID Connect, an HttpOnly cookie the page never sees (then every change carries the session's
// CSRF token); any 401 leads back to sign-in.

import { bindViews, bindWeek } from "./calendar.js";
import { bindComposer, bindHistory } from "./chat.js";
import { bindDetails } from "./details.js";
import { bindSignIn, signInWith, signInWithCookie, signInWithLink } from "./session.js";
import { bindSettings, switchLanguage } from "./settings.js";
import { $, TOKEN_KEY, state } from "./state.js";

// ---- start -------------------------------------------------------------------------------------

async function main() {
  try {
    const response = await fetch("/web/i18n.json", { cache: "no-cache" });
    state.strings = await response.json();
  } catch {
    // The server-rendered strings stay; anything built later shows its key.
  }
  bindSignIn();
  bindComposer();
  bindWeek();
  bindViews();
  bindDetails();
  bindHistory();
  bindSettings();
  $("lang-switch").addEventListener("click", switchLanguage);
  document.body.dataset.ready = "true";
  // A one-time sign-in link (`calagent login-link USER`): its credential rides in the fragment,
  // which no request carries; it is taken out of the address at once.
  const link = new URLSearchParams(window.location.hash.slice(1)).get("login");
  if (link) {
    history.replaceState(null, "", window.location.pathname + window.location.search);
    await signInWithLink(link);
    return;
  }
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) await signInWith(token);
  else if (document.body.dataset.oidc === "true") await signInWithCookie();
  else ($("dev-user") ?? $("token-input")).focus();
}

main();
