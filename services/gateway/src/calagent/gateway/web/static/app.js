// calagent's page: a client of the public HTTP API (contract §4, §10, §12, §16, §18), nothing more.
// No framework and no build step: ES modules of this origin, one per concern. Every string comes
// from /web/i18n.json (zh and en); the token lives in this tab's sessionStorage, or, signed in with
// OpenID Connect, an HttpOnly cookie the page never sees (then every change carries the session's
// CSRF token); any 401 leads back to sign-in.

import { bindViews, bindWeek, loadMonth, loadWeek, renderMonth, renderWeek } from "./calendar.js";
import { loadCommand, loadWaiting, renderCard } from "./cards.js";
import { loadChanges } from "./changes.js";
import { bindComposer, bindHistory } from "./chat.js";
import { bindDetails, renderDetails } from "./details.js";
import { bindSignIn, signInWith, signInWithCookie, signInWithLink } from "./session.js";
import { bindSettings, switchLanguage } from "./settings.js";
import { $, HISTORY_SHOWN, LANG_SET, TOKEN_KEY, TURN_DONE, state } from "./state.js";
import { loadTasks, renderTasks } from "./tasks.js";

// ---- what one room's news means to the others -------------------------------------------------

// After every turn the views read again: a write may have happened (created, updated, deleted,
// confirmed), and an offer waiting beside the conversation may have been answered, or come forward
// as the pending command once the turn left none.
function afterTurn() {
  renderCard();
  if (state.command) loadWaiting();
  else loadCommand();
  loadWeek();
  loadTasks();
  loadChanges();
  if (state.monthLoaded || state.view === "month") loadMonth();
}

function renderViews() {
  renderCard();
  if (state.tasksLoaded) renderTasks();
  if (state.weekLoaded) renderWeek();
  if (state.monthLoaded) renderMonth();
  if (state.opened) renderDetails();
}

function bindNews() {
  document.addEventListener(TURN_DONE, afterTurn);
  // Restored messages bring the receipts the card shows.
  document.addEventListener(HISTORY_SHOWN, renderCard);
  document.addEventListener(LANG_SET, renderViews);
}

// ---- start -------------------------------------------------------------------------------------

async function main() {
  try {
    const response = await fetch("/web/i18n.json", { cache: "no-cache" });
    state.strings = await response.json();
  } catch {
    // The server-rendered strings stay; anything built later shows its key.
  }
  bindNews();
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
