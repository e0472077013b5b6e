// The settings panel (contract §18): zone, language, working hours and address (§16), whose
// invitations are offered (§19), connected calendars (§12), the private feed (§10), the private mail
// address (§16) and free/busy sharing (§16). A modal dialog opened from the header: the keyboard
// stays inside it, Escape closes it.

import { api } from "./api.js";
import { loadMonth, loadWeek } from "./calendar.js";
import { el, say, setLang } from "./i18n.js";
import { $, state } from "./state.js";

const DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
const DEFAULT_SPAN = ["09:00", "18:00"]; // what a day gets when it is ticked as a working day

function clear(status) {
  status.textContent = "";
  delete status.dataset.i18n;
}

function failed(status, key, error) {
  if (error.status !== 401) say(status, key, { message: error.message });
}

// ---- the dialog ----------------------------------------------------------------------------------

function openSettings() {
  const dialog = $("settings");
  if (!dialog.open) dialog.showModal();
  for (const id of ["prefs-status", "accounts-status", "mail-status", "sharing-status", "feed-status"]) clear($(id));
  loadPrefs();
  loadAccounts();
  loadSharing();
}

// Signed out: nothing of the last user stays in the panel.
export function resetSettings() {
  const dialog = $("settings");
  if (dialog.open) dialog.close();
  $("prefs-form").reset();
  $("prefs-hours").replaceChildren();
  stopSyncPoll();
  $("accounts-list").replaceChildren();
  $("account-form").reset();
  $("sharing-list").replaceChildren();
  $("sharing-from").replaceChildren();
  $("feed-result").hidden = true;
  $("feed-url").value = "";
  say($("feed-create"), "feed.create");
  $("mail-result").hidden = true;
  $("mail-address").value = "";
  for (const id of ["prefs-status", "accounts-status", "mail-status", "sharing-status", "feed-status"]) clear($(id));
}

// ---- zone, language, working hours, address (GET/PUT /v1/settings) ------------------------------------

function hoursRow(key, index, span) {
  const row = el("div", { cls: "hours-row", attrs: { role: "group", "aria-labelledby": `hours-${key}` } });
  row.dataset.day = key;
  const day = say(el("span", { cls: "hours-day", attrs: { id: `hours-${key}` } }), `weekday.${index + 1}`);
  const works = el("input", { attrs: { type: "checkbox", id: `hours-${key}-on` } });
  works.checked = span !== null;
  const from = el("input", { attrs: { type: "time", id: `hours-${key}-from` } });
  const until = el("input", { attrs: { type: "time", id: `hours-${key}-until` } });
  [from.value, until.value] = span ?? DEFAULT_SPAN;
  const follow = () => {
    from.disabled = !works.checked;
    until.disabled = !works.checked;
  };
  works.addEventListener("change", follow);
  follow();
  const label = (input, key, cls) => say(el("label", { cls, attrs: { for: input.id } }), key);
  row.append(
    day,
    el("span", { cls: "hours-works" }, [works, label(works, "settings.works")]),
    label(from, "settings.from", "sr-label"),
    from,
    el("span", { cls: "hours-dash", text: "–", attrs: { "aria-hidden": "true" } }),
    label(until, "settings.until", "sr-label"),
    until,
  );
  return row;
}

function renderPrefs(settings) {
  $("prefs-tz").value = settings.tz ?? "";
  $("prefs-email").value = settings.email ?? "";
  $("prefs-lang").value = settings.language ?? "";
  $("prefs-invitations").value = settings.invitations_from ?? "everyone";
  const hours = settings.work_hours ?? {};
  $("prefs-hours").replaceChildren(...DAYS.map((key, i) => hoursRow(key, i, hours[key] ?? null)));
}

function readHours() {
  const hours = {};
  for (const key of DAYS) {
    hours[key] = $(`hours-${key}-on`).checked ? [$(`hours-${key}-from`).value, $(`hours-${key}-until`).value] : null;
  }
  return hours;
}

function fillZones() {
  const list = $("prefs-tz-list");
  if (list.childElementCount || !Intl.supportedValuesOf) return;
  list.append(...Intl.supportedValuesOf("timeZone").map((zone) => el("option", { attrs: { value: zone } })));
}

async function loadPrefs() {
  fillZones();
  try {
    renderPrefs(await (await api("/v1/settings")).json());
  } catch (error) {
    failed($("prefs-status"), "settings.load_error", error);
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The gateway learns a saved zone moments after it is stored: the week is read again once the
// session says the zone is taken (a couple of seconds at most), so its times are in that zone.
async function zoneTaken(tz) {
  for (let attempt = 0; attempt < 20; attempt++) {
    try {
      if ((await (await api("/web/session")).json()).tz === tz) return;
    } catch {
      return;
    }
    await sleep(100);
  }
}

// What the saved settings change on the page at once: its language, and the zone the week is in.
async function applySettings(settings, { waitForZone = false } = {}) {
  if (settings.language && settings.language !== state.lang) setLang(settings.language);
  if (settings.tz && state.session && settings.tz !== state.session.tz) {
    if (waitForZone) await zoneTaken(settings.tz);
    state.session.tz = settings.tz;
    say($("who"), "user.signed_in_as", { user: state.session.user_id, tz: settings.tz });
    await loadWeek();
    if (state.monthLoaded) await loadMonth();
  }
}

// The user's saved language wins over the browser's from the moment they sign in.
export async function loadSavedSettings() {
  try {
    await applySettings(await (await api("/v1/settings")).json());
  } catch {
    // No settings to apply: the page keeps the browser's language and the token's zone.
  }
}

// The header's switch: the page's language now, and the user's saved one from now on.
export async function switchLanguage() {
  const lang = state.lang === "zh" ? "en" : "zh";
  setLang(lang);
  if (!state.session) return;
  try {
    await api("/v1/settings", { method: "PUT", body: { language: lang } });
  } catch {
    // The page is switched either way; the next sign-in follows the browser or the saved choice.
  }
}

async function savePrefs(submitted) {
  submitted.preventDefault();
  const status = $("prefs-status");
  clear(status);
  const body = {
    tz: $("prefs-tz").value.trim() || null,
    email: $("prefs-email").value.trim() || null,
    language: $("prefs-lang").value || null,
    invitations_from: $("prefs-invitations").value,
    work_hours: readHours(),
  };
  try {
    await api("/v1/settings", { method: "PUT", body });
    // Read back what was stored: the page shows the server's facts, not its own guess.
    const saved = await (await api("/v1/settings")).json();
    renderPrefs(saved);
    await applySettings(saved, { waitForZone: true });
    say(status, "settings.saved");
  } catch (error) {
    failed(status, "settings.error", error);
  }
}

// ---- connected calendars (contract §12) -----------------------------------------------------------

function hostOf(url) {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

// A moment as the user's calendar shows it: in their zone, never the browser's.
function momentText(iso) {
  const zone = state.session?.tz ?? document.body.dataset.defaultTz;
  return new Intl.DateTimeFormat(state.lang === "zh" ? "zh-CN" : "en", {
    timeZone: zone,
    month: "short",
    day: "numeric",
    hour: "2-digit",
    minute: "2-digit",
    hourCycle: "h23",
  }).format(new Date(iso));
}

function syncing(account) {
  return Boolean(account.sync) && account.sync.state !== "idle";
}

// How far a running sync is (issue 44 item 9): a first sync of many calendars takes a minute.
function syncProgress(sync) {
  const line = say(el("p", { cls: "account-sync", attrs: { role: "status" } }), "accounts.syncing", {
    done: sync.calendars_done,
    total: sync.calendars_total,
    events: new Intl.NumberFormat("en").format(sync.events),
  });
  line.dataset.fact = "sync";
  return line;
}

// The account's health (contract §22): when it last synced, its last error in our words, what
// waits to be sent or was refused, and the events a calendar stopped showing that wait for an answer.
function accountHealth(account) {
  const health = el("div", { cls: "account-health" });
  const synced = el("p", { cls: "account-synced" });
  synced.dataset.fact = "last_synced_at";
  if (account.last_synced_at) say(synced, "accounts.synced", { when: momentText(account.last_synced_at) });
  else say(synced, "accounts.never_synced");
  health.append(synced);
  if (syncing(account)) health.append(syncProgress(account.sync));
  for (const [fact, key] of [
    ["pending_deliveries", "accounts.pending"],
    ["rejected_deliveries", "accounts.rejected"],
  ]) {
    if (!account[fact]) continue;
    const line = say(el("p", { cls: `account-${fact.split("_")[0]}` }), key, { count: account[fact] });
    line.dataset.fact = fact;
    health.append(line);
  }
  if (account.last_error) {
    const error = say(el("p", { cls: "account-error" }), "accounts.last_error", {
      when: momentText(account.last_error.at),
      message: account.last_error.message,
    });
    error.dataset.fact = "last_error";
    health.append(error);
  }
  for (const warning of account.warnings ?? []) {
    const key = warning.had == null ? "accounts.withheld_one" : "accounts.withheld";
    const line = say(el("p", { cls: "account-warning", attrs: { role: "status" } }), key, warning);
    line.dataset.fact = "warning";
    if (warning.command_id) line.dataset.commandId = warning.command_id;
    health.append(line);
  }
  return health;
}

function accountItem(account) {
  const item = el("li", { cls: "account" });
  item.dataset.accountId = account.id;
  const host = hostOf(account.url);
  item.append(say(el("p", { cls: "account-name" }), "accounts.account", { user: account.username, host }));
  item.append(accountHealth(account));
  const choose = el("fieldset", { cls: "account-calendars" });
  choose.append(say(el("legend"), "accounts.default"));
  for (const calendar of account.calendars ?? []) {
    const radio = el("input", { attrs: { type: "radio", name: `default-${account.id}`, value: calendar.url } });
    radio.checked = Boolean(calendar.default);
    radio.dataset.calendarUrl = calendar.url;
    radio.addEventListener("change", () => setDefault(account.id, calendar.url));
    choose.append(el("label", {}, [radio, el("span", { text: ` ${calendar.name}` })]));
  }
  item.append(choose);
  const disconnect = say(el("button", { cls: "cancel disconnect", attrs: { type: "button" } }), "accounts.disconnect", {
    host,
  });
  disconnect.addEventListener("click", () => disconnectAccount(account.id));
  item.append(disconnect);
  return item;
}

// While some account syncs, the list is read again every few seconds (its progress moves); once
// none does, or the dialog is closed, no more.
const SYNC_POLL_MS = 3000;
let syncPoll = null;

function stopSyncPoll() {
  clearTimeout(syncPoll);
  syncPoll = null;
}

async function loadAccounts() {
  stopSyncPoll();
  try {
    const { accounts } = await (await api("/v1/accounts")).json();
    $("accounts-list").replaceChildren(...accounts.map(accountItem));
    $("accounts-empty").hidden = accounts.length > 0;
    if (accounts.some(syncing) && $("settings").open) syncPoll = setTimeout(loadAccounts, SYNC_POLL_MS);
  } catch (error) {
    failed($("accounts-status"), "accounts.error", error);
  }
}

async function accountAction(run, doneKey) {
  const status = $("accounts-status");
  clear(status);
  try {
    await run();
    say(status, doneKey);
  } catch (error) {
    failed(status, "accounts.error", error);
  }
  await loadAccounts();
}

function setDefault(accountId, url) {
  return accountAction(
    () => api(`/v1/accounts/${encodeURIComponent(accountId)}`, { method: "PATCH", body: { default_calendar: url } }),
    "accounts.default_set",
  );
}

function disconnectAccount(accountId) {
  return accountAction(
    () => api(`/v1/accounts/${encodeURIComponent(accountId)}`, { method: "DELETE" }),
    "accounts.disconnected",
  );
}

async function connectAccount(submitted) {
  submitted.preventDefault();
  const form = $("account-form");
  const body = {
    url: $("account-url").value.trim(),
    username: $("account-user").value.trim(),
    password: $("account-password").value,
  };
  const missing = ["account-url", "account-user", "account-password"].find((id) => !$(id).value.trim());
  if (missing) {
    $(missing).focus();
    return;
  }
  say($("accounts-status"), "accounts.connecting");
  const button = form.querySelector("button[type=submit]");
  button.disabled = true;
  try {
    await accountAction(async () => {
      await api("/v1/accounts/caldav", { method: "POST", body });
      form.reset();
    }, "accounts.connected");
  } finally {
    button.disabled = false;
  }
}

// ---- the private mail address (contract §16) -------------------------------------------------------

async function showMailAddress() {
  const status = $("mail-status");
  clear(status);
  try {
    const { address } = await (await api("/v1/mail-address", { method: "POST" })).json();
    $("mail-address").value = address;
    $("mail-result").hidden = false;
    $("mail-address").focus();
    $("mail-address").select();
  } catch (error) {
    failed(status, "mail.error", error);
  }
}

// ---- free/busy sharing (contract §16) -----------------------------------------------------------------

function shareItem(share) {
  const item = el("li", { cls: "share" });
  item.dataset.user = share.user;
  item.append(el("span", { cls: "share-user", text: share.user }));
  const stop = say(el("button", { cls: "cancel", attrs: { type: "button" } }), "sharing.stop", { user: share.user });
  stop.addEventListener("click", () => stopSharing(share.user));
  item.append(stop);
  return item;
}

async function loadSharing() {
  try {
    const body = await (await api("/v1/sharing")).json();
    // Whom I share my free/busy with, and who shares theirs with me: `[{user, level, created_at}]`.
    const mine = body.shared_with ?? [];
    const theirs = body.shared_with_me ?? [];
    $("sharing-list").replaceChildren(...mine.map(shareItem));
    $("sharing-from").replaceChildren(
      ...theirs.map((share) => {
        const item = el("li", { cls: "share", text: share.user });
        item.dataset.user = share.user;
        return item;
      }),
    );
    $("sharing-from").hidden = theirs.length === 0;
    $("sharing-from-label").hidden = theirs.length === 0;
  } catch (error) {
    failed($("sharing-status"), "sharing.error", error);
  }
}

async function sharingAction(run) {
  const status = $("sharing-status");
  clear(status);
  try {
    await run();
  } catch (error) {
    failed(status, "sharing.error", error);
  }
  await loadSharing();
}

function stopSharing(user) {
  return sharingAction(() => api(`/v1/sharing/${encodeURIComponent(user)}`, { method: "DELETE" }));
}

async function share(submitted) {
  submitted.preventDefault();
  const input = $("sharing-with");
  const user = input.value.trim();
  if (!user) {
    input.focus();
    return;
  }
  await sharingAction(async () => {
    await api("/v1/sharing", { method: "POST", body: { with: user, level: "freebusy" } });
    input.value = "";
  });
}

// ---- the private feed --------------------------------------------------------------------------

function bindFeed() {
  $("feed-create").addEventListener("click", async () => {
    const status = $("feed-status");
    status.textContent = "";
    try {
      const response = await api("/v1/feeds", { method: "POST" });
      const { url } = await response.json();
      $("feed-url").value = new URL(url, window.location.origin).href;
      $("feed-result").hidden = false;
      say($("feed-create"), "feed.rotate");
      $("feed-url").focus();
      $("feed-url").select();
    } catch (error) {
      if (error.status !== 401) say(status, "feed.error", { message: error.message });
    }
  });
  $("feed-copy").addEventListener("click", async () => {
    const input = $("feed-url");
    const status = $("feed-status");
    try {
      await navigator.clipboard.writeText(input.value);
      say(status, "feed.copied");
    } catch {
      input.focus();
      input.select();
      say(status, document.execCommand?.("copy") ? "feed.copied" : "feed.copy_failed");
    }
  });
}

export function bindSettings() {
  $("settings-open").addEventListener("click", openSettings);
  $("settings-close").addEventListener("click", () => $("settings").close());
  $("settings").addEventListener("close", () => {
    if (state.session) $("settings-open").focus();
  });
  $("prefs-form").addEventListener("submit", savePrefs);
  $("account-form").addEventListener("submit", connectAccount);
  $("mail-show").addEventListener("click", showMailAddress);
  $("sharing-form").addEventListener("submit", share);
  bindFeed();
}
