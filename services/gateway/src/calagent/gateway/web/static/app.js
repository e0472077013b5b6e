// calagent's page: a client of the public HTTP API (contract §4, §10), nothing more.
// No framework and no build step. Every string comes from /web/i18n.json (zh and en); the token
// lives in this tab's sessionStorage, or, signed in with OpenID Connect, an HttpOnly cookie the page
// never sees (then every change carries the session's CSRF token); any 401 leads back to sign-in.

const TOKEN_KEY = "calagent.token";
const LANG_COOKIE = "calagent_lang";
const SAFE_METHODS = new Set(["GET", "HEAD"]);
const OFFER_STATUSES = new Set(["held", "conflict"]);
const HISTORY_PAGE = 50;
const RRULE_DAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"];
const TIMELINE_TRIES = 6;

const $ = (id) => document.getElementById(id);

const state = {
  lang: document.documentElement.dataset.lang === "zh" ? "zh" : "en",
  strings: { zh: {}, en: {} },
  devMode: document.body.dataset.devMode === "true",
  token: null,
  csrf: null, // signed in by the session cookie: the token every change carries
  session: null, // {user_id, tz, now, csrf_token?}
  skewMs: 0, // the system's "now" minus the browser's clock
  command: null, // the active stub, as /v1/commands/active and turn.done give it
  receipts: new Map(), // stub id -> the reply of the last turn that showed it
  weekStart: null, // "YYYY-MM-DD", a Monday
  events: [],
  weekLoaded: false,
  view: "week", // or "month"
  monthStart: null, // "YYYY-MM-01"
  monthEvents: [],
  monthLoaded: false,
  historyBefore: null, // where the next older page of the conversation ends
  opened: null, // the event whose details are shown
  busy: false,
  countdown: null,
};

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// ---- strings -----------------------------------------------------------------------------------

function t(key, vars = {}) {
  const text = state.strings[state.lang][key] ?? key;
  return text.replace(/\{([a-z_]+)\}/g, (whole, name) => (name in vars ? String(vars[name]) : whole));
}

// Text that follows the language switch: the key and its values ride on the element.
function say(element, key, vars = {}) {
  element.dataset.i18n = key;
  if (Object.keys(vars).length) element.dataset.i18nVars = JSON.stringify(vars);
  else delete element.dataset.i18nVars;
  element.textContent = t(key, vars);
  return element;
}

function applyStrings(root = document) {
  for (const element of root.querySelectorAll("[data-i18n]")) {
    const vars = element.dataset.i18nVars ? JSON.parse(element.dataset.i18nVars) : {};
    element.textContent = t(element.dataset.i18n, vars);
  }
  for (const element of root.querySelectorAll("[data-i18n-placeholder]")) {
    element.placeholder = t(element.dataset.i18nPlaceholder);
  }
  for (const element of root.querySelectorAll("[data-i18n-aria-label]")) {
    element.setAttribute("aria-label", t(element.dataset.i18nAriaLabel));
  }
}

function el(tag, { cls, text, attrs } = {}, children = []) {
  const element = document.createElement(tag);
  if (cls) element.className = cls;
  if (text !== undefined) element.textContent = text;
  for (const [name, value] of Object.entries(attrs ?? {})) element.setAttribute(name, value);
  for (const child of children) if (child) element.append(child);
  return element;
}

function setLang(lang) {
  state.lang = lang;
  const root = document.documentElement;
  root.lang = lang === "zh" ? "zh-CN" : "en";
  root.dataset.lang = lang;
  document.cookie = `${LANG_COOKIE}=${lang}; path=/; max-age=31536000; SameSite=Strict`;
  $("lang-switch").lang = lang === "zh" ? "en" : "zh-CN";
  applyStrings();
  renderCard();
  if (state.weekLoaded) renderWeek();
  if (state.monthLoaded) renderMonth();
  if (state.opened) renderDetails();
}

// ---- dates: wall-clock strings in the user's zone, never the browser's ----------------------------

function ymdToDate(ymd) {
  const [y, m, d] = ymd.split("-").map(Number);
  return new Date(Date.UTC(y, m - 1, d));
}

function dateToYmd(date) {
  return date.toISOString().slice(0, 10);
}

function addDays(ymd, days) {
  const date = ymdToDate(ymd);
  date.setUTCDate(date.getUTCDate() + days);
  return dateToYmd(date);
}

function isoWeekday(ymd) {
  return ymdToDate(ymd).getUTCDay() || 7;
}

function mondayOf(ymd) {
  return addDays(ymd, 1 - isoWeekday(ymd));
}

function dayLabel(ymd) {
  const options =
    state.lang === "zh"
      ? { month: "numeric", day: "numeric", timeZone: "UTC" }
      : { month: "short", day: "numeric", timeZone: "UTC" };
  return new Intl.DateTimeFormat(state.lang === "zh" ? "zh-CN" : "en", options).format(ymdToDate(ymd));
}

function businessNow() {
  return new Date(Date.now() + state.skewMs);
}

function todayYmd() {
  const zone = state.session?.tz ?? document.body.dataset.defaultTz;
  return new Intl.DateTimeFormat("en-CA", { timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit" })
    .format(businessNow());
}

const wallDate = (iso) => iso.slice(0, 10);
const wallTime = (iso) => iso.slice(11, 16);

// The days an event covers: an end at midnight belongs to the day before.
function coveredDays(event) {
  const first = wallDate(event.start);
  let last = wallDate(event.end);
  if (last > first && event.end.slice(11, 19) === "00:00:00") last = addDays(last, -1);
  if (last < first) last = first;
  const days = [];
  for (let day = first; day <= last && days.length < 400; day = addDays(day, 1)) days.push(day);
  return days;
}

function whenText(event) {
  if (event.all_day) return t("week.all_day");
  return `${wallDate(event.start) === wallDate(event.end) ? "" : `${dayLabel(wallDate(event.start))} `}${wallTime(event.start)}–${
    wallDate(event.start) === wallDate(event.end) ? "" : `${dayLabel(wallDate(event.end))} `
  }${wallTime(event.end)}`;
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

async function api(path, { method = "GET", body, accept = "application/json" } = {}) {
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
    signOut("signin.error_refused");
    throw new ApiError(401, t("signin.error_refused"));
  }
  if (!response.ok) throw new ApiError(response.status, await errorText(response));
  return response;
}

function newMessageId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

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
  say($("who"), "user.signed_in_as", { user: state.session.user_id, tz: state.session.tz }).hidden = false;
  state.weekStart = mondayOf(todayYmd());
  $("composer-input").focus();
  await Promise.all([loadHistory(), loadCommand(), loadWeek(), loadChanges()]);
}

function signOut(reasonKey) {
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
  state.receipts.clear();
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
  $("messages-empty").hidden = false;
  $("card").replaceChildren();
  $("card").hidden = true;
  $("week-days").replaceChildren();
  $("feed-result").hidden = true;
  $("feed-url").value = "";
  $("feed-status").textContent = "";
  say($("feed-create"), "feed.create");
  $("app").hidden = true;
  $("sign-out").hidden = true;
  $("who").hidden = true;
  $("signin").hidden = false;
  showMessage(reasonKey);
  if (wasSignedIn || reasonKey) ($("dev-user") ?? $("token-input")).focus();
}

async function signInWith(token) {
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
async function signInWithCookie() {
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

async function signInWithLink(link) {
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

function bindSignIn() {
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
}

// ---- chat --------------------------------------------------------------------------------------

function setBusy(busy) {
  state.busy = busy;
  $("send").disabled = busy;
  for (const button of document.querySelectorAll("[data-sends], [data-command]")) button.disabled = busy;
}

function addMessage(role) {
  $("messages-empty").hidden = true;
  const item = el("li", { cls: `message ${role}` });
  item.append(say(el("span", { cls: "speaker" }), role === "user" ? "chat.you" : "chat.assistant"));
  item.append(el("p", { cls: "text" }));
  $("messages").append(item);
  item.scrollIntoView({ block: "end" });
  return item;
}

// Tool names, results, model calls and the timeline are for the curious: folded away under the reply.
function techDetails(bubble) {
  let details = bubble.querySelector("details.tech");
  if (!details) {
    details = el("details", { cls: "tech" });
    details.append(say(el("summary"), "chat.details"));
    bubble.append(details);
  }
  return details;
}

function addToolCall(bubble, call) {
  const details = techDetails(bubble);
  let list = details.querySelector(".tools");
  if (!list) {
    list = el("ul", { cls: "tools" });
    list.dataset.i18nAriaLabel = "chat.tools_label";
    list.setAttribute("aria-label", t("chat.tools_label"));
    details.querySelector("summary").after(list);
  }
  const item = say(el("li"), "chat.tool", { name: call.name, result: call.result });
  item.dataset.tool = call.name;
  list.append(item);
}

// The facts of a finished turn on its message: what the tests and the card read.
function markAnswer(bubble, answer) {
  bubble.removeAttribute("aria-busy");
  bubble.dataset.turnId = answer.turn_id;
  if (answer.outcome) bubble.dataset.outcome = answer.outcome;
  if (answer.model_calls !== undefined && answer.model_calls !== null) {
    bubble.dataset.modelCalls = String(answer.model_calls);
  }
  const text = bubble.querySelector(".text");
  delete text.dataset.i18n;
  text.textContent = answer.reply;
  bubble.querySelector("details.tech")?.remove();
  for (const call of answer.tool_calls ?? []) addToolCall(bubble, call);
  if (answer.model_calls !== undefined && answer.model_calls !== null) {
    techDetails(bubble).append(say(el("p", { cls: "meta" }), "chat.model_calls", { n: answer.model_calls }));
  }
  if (answer.turn_id) addTimelineToggle(techDetails(bubble), answer.turn_id);
  if (answer.command) state.receipts.set(answer.command.id, answer.reply);
  addUndo(bubble, answer.change_ids ?? []);
}

// A receipt of a change can take it back: the same undo_change a "撤销" runs, without the model.
function undoButton(changeId, labelKey) {
  const button = say(el("button", { cls: "undo", attrs: { type: "button" } }), labelKey);
  button.dataset.changeId = changeId;
  button.dataset.command = "undo_change";
  button.disabled = state.busy;
  button.addEventListener("click", async () => {
    button.disabled = true;
    await runCommand("undo_change", { change_id: changeId }, t("chat.undo"));
  });
  return button;
}

function addUndo(bubble, changeIds) {
  bubble.querySelector("button.undo")?.remove();
  if (!changeIds.length) return;
  const button = undoButton(changeIds[changeIds.length - 1], "chat.undo");
  bubble.querySelector(".text").after(button);
}

// ---- recent changes (GET /v1/changes) ------------------------------------------------------------

function changeItem(change) {
  const item = el("li", { cls: "change" });
  item.dataset.changeId = change.id;
  item.dataset.kind = change.kind;
  const shown = change.after ?? change.before;
  const what = shown ? `${shown.title} · ${dayLabel(shown.start.slice(0, 10))} ${whenText(shown)}` : change.event_id;
  item.append(el("span", { cls: "change-kind", text: `${t(`changes.kind.${change.kind}`)} (${t(`changes.source.${change.source}`)})` }));
  item.append(el("span", { cls: "change-what", text: what }));
  if (change.undone_by) {
    item.dataset.undone = "true";
    item.append(say(el("span", { cls: "change-undone" }), "changes.undone"));
  } else {
    item.append(undoButton(change.id, "changes.undo"));
  }
  return item;
}

async function loadChanges() {
  if (!state.token) return;
  try {
    const response = await api("/v1/changes?limit=10");
    const { changes } = await response.json();
    $("changes-list").replaceChildren(...changes.map(changeItem));
    $("changes-empty").hidden = changes.length > 0;
    $("changes-status").textContent = "";
  } catch (error) {
    if (error.status !== 401) say($("changes-status"), "changes.error", { message: error.message });
  }
}

function failBubble(bubble, message) {
  bubble.classList.add("failed");
  bubble.removeAttribute("aria-busy");
  say(bubble.querySelector(".text"), "chat.error", { message });
}

function finishTurn(bubble, answer) {
  markAnswer(bubble, answer);
  state.command = answer.command ?? null;
  renderCard();
  // Refresh after every turn: a write may have happened (created, updated, deleted, confirmed).
  loadWeek();
  loadChanges();
  if (state.monthLoaded || state.view === "month") loadMonth();
}

// ---- the conversation as it was (GET /v1/messages) ------------------------------------------------

function historyItem(message) {
  const item = el("li", { cls: `message ${message.role}` });
  item.append(say(el("span", { cls: "speaker" }), message.role === "user" ? "chat.you" : "chat.assistant"));
  item.append(el("p", { cls: "text", text: message.text }));
  item.dataset.messageId = String(message.id);
  item.dataset.restored = "true";
  if (message.role === "assistant") {
    markAnswer(item, {
      turn_id: message.turn_id,
      outcome: message.outcome,
      reply: message.text,
      tool_calls: message.tool_calls,
      model_calls: message.model_calls,
      command: message.command,
    });
  }
  return item;
}

async function loadHistory(before = null) {
  const query = new URLSearchParams({ limit: String(HISTORY_PAGE) });
  if (before) query.set("before", String(before));
  let page;
  try {
    page = await (await api(`/v1/messages?${query}`)).json();
  } catch (error) {
    if (error.status !== 401) {
      const item = el("li", { cls: "message assistant failed" });
      item.append(say(el("p", { cls: "text" }), "chat.history_error", { message: error.message }));
      $("messages").prepend(item);
    }
    return;
  }
  const items = (page.messages ?? []).map(historyItem);
  if (items.length) {
    $("messages-empty").hidden = true;
    $("messages").prepend(...items);
  }
  state.historyBefore = page.before ?? null;
  $("history-more").hidden = state.historyBefore === null;
  if (!before) items.at(-1)?.scrollIntoView({ block: "end" });
  renderCard();
}

function bindHistory() {
  $("history-more").addEventListener("click", () => loadHistory(state.historyBefore));
}

// ---- commands without the model (POST /v1/commands) ------------------------------------------------

// A button's action as a turn of the conversation: what was done, and the assistant's answer.
async function runCommand(tool, args, label) {
  if (state.busy || !state.session) return null;
  setBusy(true);
  const mine = addMessage("user");
  mine.classList.add("action");
  mine.querySelector(".text").textContent = label;
  const bubble = addMessage("assistant");
  bubble.setAttribute("aria-busy", "true");
  say(bubble.querySelector(".text"), "chat.working");
  let answer = null;
  try {
    const response = await api("/v1/commands", {
      method: "POST",
      body: { tool, arguments: args, client_message_id: newMessageId() },
    });
    answer = await response.json();
    finishTurn(bubble, answer);
  } catch (error) {
    if (error.status !== 401) failBubble(bubble, error.message);
  } finally {
    setBusy(false);
    bubble.scrollIntoView({ block: "nearest" });
  }
  return answer;
}

function parseEvent(raw) {
  let type = "message";
  const data = [];
  for (const line of raw.split("\n")) {
    if (line.startsWith("event:")) type = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
  }
  if (!data.length) return null;
  try {
    return { type, data: JSON.parse(data.join("\n")) };
  } catch {
    return null;
  }
}

function handleEvent(bubble, { type, data }) {
  switch (type) {
    case "turn.started":
      bubble.dataset.turnId = data.turn_id;
      return false;
    case "tool.called":
      if (data.tool) addToolCall(bubble, data.tool);
      return false;
    case "reply.delta": {
      const text = bubble.querySelector(".text");
      if (text.dataset.i18n) {
        delete text.dataset.i18n;
        text.textContent = "";
      }
      text.textContent += data.delta ?? "";
      return false;
    }
    case "turn.done":
      finishTurn(bubble, data);
      return true;
    case "error":
      failBubble(bubble, data?.error?.message ?? "");
      return true;
    default:
      return false;
  }
}

async function readStream(response, bubble) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let finished = false;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer = (buffer + decoder.decode(value, { stream: true })).replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = parseEvent(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      if (event) finished = handleEvent(bubble, event) || finished;
    }
  }
  if (!finished) failBubble(bubble, t("chat.stream_cut"));
}

async function send(message) {
  const text = message.trim();
  if (!text || state.busy || !state.session) return;
  setBusy(true);
  const mine = addMessage("user");
  mine.querySelector(".text").textContent = text;
  const bubble = addMessage("assistant");
  bubble.setAttribute("aria-busy", "true");
  say(bubble.querySelector(".text"), "chat.working");
  try {
    const response = await api("/v1/chat", {
      method: "POST",
      body: { message: text, client_message_id: newMessageId(), channel: "web" },
      accept: "text/event-stream",
    });
    if ((response.headers.get("content-type") ?? "").includes("text/event-stream")) {
      await readStream(response, bubble);
    } else {
      finishTurn(bubble, await response.json());
    }
  } catch (error) {
    if (error.status !== 401) failBubble(bubble, error.message);
  } finally {
    setBusy(false);
    bubble.scrollIntoView({ block: "nearest" });
    if (state.session && (document.activeElement === document.body || !document.activeElement)) {
      $("composer-input").focus();
    }
  }
}

function bindComposer() {
  const input = $("composer-input");
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = input.value;
    if (!text.trim() || state.busy) return;
    input.value = "";
    send(text);
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
}

// ---- the pending command -----------------------------------------------------------------------

async function loadCommand() {
  try {
    const response = await api("/v1/commands/active");
    state.command = await response.json();
  } catch {
    state.command = null;
  }
  renderCard();
}

// What a person would type to pick this day: the weekday when it names one candidate, else the date.
function candidateReply(candidate, candidates) {
  const weekday = isoWeekday(candidate);
  const same = candidates.filter((c) => isoWeekday(c) === weekday).length;
  return same === 1 ? t(`reply.weekday.${weekday}`) : dayLabel(candidate);
}

function actionButton(labelKey, words, cls) {
  const button = say(el("button", { cls, attrs: { type: "button" } }), labelKey);
  button.dataset.sends = words;
  button.disabled = state.busy;
  button.addEventListener("click", () => send(button.dataset.sends));
  return button;
}

function eventSummary(event) {
  return `${event.title} · ${dayLabel(wallDate(event.start))} ${whenText(event)}`;
}

function knownFields(command) {
  const list = el("dl", { cls: "known" });
  const add = (key, value) => {
    list.append(say(el("dt"), key), el("dd", { text: value }));
  };
  add("card.field.title", command.title);
  // Shown when the stub view carries them (the contract's view today has title and candidates).
  for (const [name, value] of Object.entries(command.slots ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    add(`card.field.${name}`, value === true ? "✓" : String(value));
  }
  if (command.proposed_start) {
    const start = command.proposed_start;
    const end = command.proposed_end ?? start;
    // A series' proposed time is its first occurrence, not a one-off date.
    add(
      command.recurrence ? "card.field.first" : "card.field.date",
      `${dayLabel(wallDate(start))} ${wallTime(start)}–${wallTime(end)}`,
    );
  }
  if (command.recurrence) add("card.field.rule", ruleText(command.recurrence));
  return list;
}

// An RRULE of the contract's subset in words; anything else is shown as written.
function ruleText(rrule) {
  const parts = Object.fromEntries(
    rrule
      .replace(/^RRULE:/, "")
      .split(";")
      .map((part) => part.split("=")),
  );
  if (!["DAILY", "WEEKLY", "MONTHLY", "YEARLY"].includes(parts.FREQ)) return rrule;
  const interval = Number(parts.INTERVAL || 1);
  let text = interval > 1 ? t(`rule.${parts.FREQ}.n`, { n: interval }) : t(`rule.${parts.FREQ}`);
  if (parts.BYDAY) {
    const days = parts.BYDAY.split(",").map((day) => t(`weekday.${RRULE_DAYS.indexOf(day.slice(-2)) + 1}`));
    text += t("rule.on_days", { days: days.join(t("rule.list_sep")) });
  }
  if (parts.BYMONTHDAY) text += t("rule.on_monthday", { n: parts.BYMONTHDAY });
  if (parts.COUNT) text += t("rule.count", { n: parts.COUNT });
  if (parts.UNTIL) {
    const u = parts.UNTIL;
    text += t("rule.until", { date: dayLabel(`${u.slice(0, 4)}-${u.slice(4, 6)}-${u.slice(6, 8)}`) });
  }
  return text;
}

function changeView(change) {
  const box = el("div", { cls: "change" });
  box.append(say(el("h3"), "card.change"));
  const row = el("div", { cls: "change-row" });
  const side = (key, text, cls) =>
    el("div", { cls: `change-side ${cls}` }, [say(el("p", { cls: "change-label" }), key), el("p", { text })]);
  row.append(side("card.before", eventSummary(change.before), "before"));
  row.append(el("span", { cls: "arrow", text: "→", attrs: { "aria-hidden": "true" } }));
  if (change.after) row.append(side("card.after", eventSummary(change.after), "after"));
  else {
    const starts = (change.removed_starts ?? []).map((s) => `${dayLabel(wallDate(s))} ${wallTime(s)}`).join(", ");
    row.append(side("card.removed", starts || eventSummary(change.before), "after"));
  }
  box.append(row);
  return box;
}

function countdownText(command) {
  const left = Date.parse(command.expires_at) - businessNow().getTime();
  if (left <= 0) return null;
  const total = Math.ceil(left / 1000);
  const hours = Math.floor(total / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const seconds = total % 60;
  const mmss = `${String(minutes).padStart(2, "0")}:${String(seconds).padStart(2, "0")}`;
  return hours ? `${hours}:${mmss}` : mmss;
}

function tickCountdown(timer, command) {
  const left = countdownText(command);
  if (left === null) {
    say(timer, "card.expired");
    timer.classList.add("expired");
    clearInterval(state.countdown);
    for (const button of document.querySelectorAll("#card [data-sends], #card [data-command]")) {
      button.disabled = true;
    }
    return;
  }
  say(timer, "card.expires_in", { time: left });
}

function renderCard() {
  const card = $("card");
  clearInterval(state.countdown);
  card.replaceChildren();
  const command = state.command;
  if (!command) {
    card.hidden = true;
    delete card.dataset.status;
    delete card.dataset.commandId;
    return;
  }
  card.hidden = false;
  card.dataset.status = command.status;
  card.dataset.commandId = command.id;

  const head = el("div", { cls: "card-head" });
  head.append(say(el("h2", { attrs: { id: "card-heading" } }), "card.heading"));
  head.append(say(el("span", { cls: `badge status-${command.status}` }), `card.status.${command.status}`));
  card.append(head);

  card.append(say(el("h3", { cls: "sr-label" }), "card.known"));
  card.append(knownFields(command));

  if (command.change) card.append(changeView(command.change));

  const candidates = command.candidates ?? [];
  if (candidates.length) {
    const group = el("div", { cls: "candidates", attrs: { role: "group", "aria-labelledby": "candidates-label" } });
    group.append(say(el("p", { cls: "group-label", attrs: { id: "candidates-label" } }), "card.candidates"));
    const list = el("ul", { cls: "choice-list" });
    for (const candidate of candidates) {
      const button = el("button", {
        cls: "choice",
        text: `${t(`weekday.${isoWeekday(candidate)}`)} ${dayLabel(candidate)}`,
        attrs: { type: "button" },
      });
      button.dataset.candidate = candidate;
      button.dataset.sends = candidateReply(candidate, candidates);
      button.disabled = state.busy;
      button.addEventListener("click", () => send(button.dataset.sends));
      list.append(el("li", {}, [button]));
    }
    group.append(list);
    card.append(group);
  } else if (command.status === "needs_time") {
    card.append(say(el("p", { cls: "help" }), "card.ask_time"));
  }

  const occurrences = command.next_occurrences ?? [];
  if (occurrences.length) {
    const next = el("div", { cls: "next" });
    next.append(say(el("p", { cls: "group-label" }), "card.next"));
    const list = el("ul", { cls: "next-list" });
    for (const start of occurrences) {
      list.append(el("li", { text: `${t(`weekday.${isoWeekday(wallDate(start))}`)} ${dayLabel(wallDate(start))} ${wallTime(start)}` }));
    }
    next.append(list);
    card.append(next);
  }

  // Why it waits, in one sentence; what the assistant said stays in the conversation, once.
  const why = command.hold_reason ? `card.why.${command.hold_reason}` : command.status === "conflict" ? "card.why.conflict" : null;
  if (why) card.append(say(el("p", { cls: "why" }), why));

  const actions = el("div", { cls: "actions" });
  if (OFFER_STATUSES.has(command.status)) {
    actions.append(actionButton("card.confirm", t("reply.confirm"), "primary confirm"));
  }
  // Every card can be dropped, without the model: the same cancel a "算了" runs.
  const cancel = say(el("button", { cls: "cancel", attrs: { type: "button" } }), "card.cancel");
  cancel.dataset.command = "cancel_schedule_command";
  cancel.disabled = state.busy;
  cancel.addEventListener("click", () =>
    runCommand("cancel_schedule_command", { command_id: command.id }, t("card.cancel")),
  );
  actions.append(cancel);
  card.append(actions);

  const timer = el("p", {
    cls: "countdown",
    attrs: { role: "timer", "aria-live": "off", "aria-label": t("card.countdown_label") },
  });
  timer.dataset.i18nAriaLabel = "card.countdown_label";
  card.append(timer);
  tickCountdown(timer, command);
  state.countdown = setInterval(() => tickCountdown(timer, command), 1000);
}

// ---- the week ----------------------------------------------------------------------------------

async function loadWeek() {
  if (!state.weekStart) return;
  const start = state.weekStart;
  const status = $("week-status");
  say(status, "week.loading");
  try {
    const query = new URLSearchParams({ start, end: addDays(start, 7) });
    const response = await api(`/v1/events?${query}`);
    const body = await response.json();
    if (start !== state.weekStart) return; // the user moved on meanwhile
    state.events = body.events ?? [];
    state.weekLoaded = true;
    status.textContent = "";
    delete status.dataset.i18n;
    renderWeek();
  } catch (error) {
    if (error.status !== 401) say(status, "week.error", { message: error.message });
  }
}

function eventItem(event, day, days) {
  const item = el("li", { cls: "event" });
  item.dataset.eventId = event.id;
  item.dataset.start = event.start;
  if (event.all_day) item.classList.add("all-day");
  if (days.length > 1) item.classList.add("multi-day");
  if (event.completed) item.classList.add("completed");
  let when;
  if (event.all_day) when = t("week.all_day");
  else {
    const from = day === days[0] ? wallTime(event.start) : "…";
    const to = day === days[days.length - 1] ? wallTime(event.end) : "…";
    when = `${from}–${to}`;
  }
  item.append(el("span", { cls: "when", text: when }));
  item.append(openButton(event, "title"));
  const notes = el("span", { cls: "notes" });
  notes.append(say(el("span", { cls: "calendar" }), "week.calendar", { name: event.calendar }));
  if (days.length > 1) {
    notes.append(say(el("span", { cls: "tag" }), "week.day_of", { i: days.indexOf(day) + 1, n: days.length }));
  }
  // Shown when the event view carries them (the contract's view today does not).
  if (event.series_id || event.recurrence) notes.append(say(el("span", { cls: "tag series" }), "week.series"));
  if (event.reminder_minutes !== undefined && event.reminder_minutes !== null) {
    notes.append(say(el("span", { cls: "tag" }), "week.reminder", { n: event.reminder_minutes }));
  }
  if (event.completed) notes.append(say(el("span", { cls: "tag" }), "week.completed"));
  item.append(notes);
  return item;
}

function renderWeek() {
  const start = state.weekStart;
  if (!start) return;
  const end = addDays(start, 6);
  say($("week-range"), "week.range", { start: dayLabel(start), end: dayLabel(end) });
  const today = todayYmd();
  const byDay = new Map();
  for (let i = 0; i < 7; i++) byDay.set(addDays(start, i), []);
  for (const event of state.events) {
    const days = coveredDays(event);
    for (const day of days) byDay.get(day)?.push({ event, days });
  }
  const container = $("week-days");
  container.replaceChildren();
  for (const [day, entries] of byDay) {
    const section = el("section", { cls: "day", attrs: { "aria-labelledby": `day-${day}` } });
    section.dataset.date = day;
    const heading = el("h3", { attrs: { id: `day-${day}` } });
    heading.append(el("span", { cls: "weekday", text: t(`weekday.${isoWeekday(day)}`) }));
    heading.append(el("span", { cls: "date", text: ` ${dayLabel(day)}` }));
    if (day === today) {
      section.classList.add("today");
      section.setAttribute("aria-current", "date");
      heading.append(say(el("span", { cls: "today-tag" }), "week.today"));
    }
    section.append(heading);
    if (!entries.length) {
      section.append(say(el("p", { cls: "nothing" }), "week.empty_day"));
    } else {
      entries.sort(
        (a, b) => Number(b.event.all_day) - Number(a.event.all_day) || a.event.start.localeCompare(b.event.start),
      );
      const list = el("ul", { cls: "events" });
      for (const { event, days } of entries) list.append(eventItem(event, day, days));
      section.append(list);
    }
    container.append(section);
  }
}

function bindWeek() {
  $("week-prev").addEventListener("click", () => {
    state.weekStart = addDays(state.weekStart, -7);
    loadWeek();
  });
  $("week-next").addEventListener("click", () => {
    state.weekStart = addDays(state.weekStart, 7);
    loadWeek();
  });
  $("week-this").addEventListener("click", () => {
    state.weekStart = mondayOf(todayYmd());
    loadWeek();
  });
}

// The event's title opens its details: a real button, so the keyboard reaches it too.
function openButton(event, cls) {
  const button = el("button", { cls: `open ${cls}`, text: event.title, attrs: { type: "button" } });
  button.dataset.eventId = event.id;
  button.addEventListener("click", () => openDetails(event, button));
  return button;
}

// ---- the month -----------------------------------------------------------------------------------

const MONTH_CHIPS = 3;

function monthOf(ymd) {
  return `${ymd.slice(0, 7)}-01`;
}

function addMonths(ymd, months) {
  const date = ymdToDate(ymd);
  date.setUTCMonth(date.getUTCMonth() + months, 1);
  return dateToYmd(date);
}

// Six Monday-first weeks that cover the month.
function monthGridStart(first) {
  return mondayOf(first);
}

async function loadMonth() {
  if (!state.monthStart) state.monthStart = monthOf(todayYmd());
  const first = state.monthStart;
  const start = monthGridStart(first);
  const status = $("month-status");
  say(status, "week.loading");
  try {
    const query = new URLSearchParams({ start, end: addDays(start, 42) });
    const body = await (await api(`/v1/events?${query}`)).json();
    if (first !== state.monthStart) return;
    state.monthEvents = body.events ?? [];
    state.monthLoaded = true;
    status.textContent = "";
    delete status.dataset.i18n;
    renderMonth();
  } catch (error) {
    if (error.status !== 401) say(status, "week.error", { message: error.message });
  }
}

function renderMonth() {
  const first = state.monthStart;
  if (!first) return;
  const locale = state.lang === "zh" ? "zh-CN" : "en";
  $("month-heading").textContent = new Intl.DateTimeFormat(locale, {
    year: "numeric",
    month: "long",
    timeZone: "UTC",
  }).format(ymdToDate(first));
  const start = monthGridStart(first);
  const byDay = new Map();
  for (let i = 0; i < 42; i++) byDay.set(addDays(start, i), []);
  for (const event of state.monthEvents) {
    for (const day of coveredDays(event)) byDay.get(day)?.push(event);
  }
  const today = todayYmd();
  const grid = el("table", { cls: "month-table" });
  const head = el("tr");
  for (let d = 1; d <= 7; d++) head.append(el("th", { text: t(`weekday.${d}`), attrs: { scope: "col" } }));
  grid.append(el("thead", {}, [head]));
  const body = el("tbody");
  let row = null;
  for (const [day, events] of byDay) {
    if (isoWeekday(day) === 1) {
      row = el("tr");
      body.append(row);
    }
    const cell = el("td", { cls: "month-day" });
    cell.dataset.date = day;
    if (day.slice(0, 7) !== first.slice(0, 7)) cell.classList.add("other-month");
    if (day === today) {
      cell.classList.add("today");
      cell.setAttribute("aria-current", "date");
    }
    cell.append(el("p", { cls: "month-date", text: String(Number(day.slice(8))) }));
    events.sort((a, b) => Number(b.all_day) - Number(a.all_day) || a.start.localeCompare(b.start));
    if (events.length) {
      const list = el("ul", { cls: "events" });
      for (const event of events.slice(0, MONTH_CHIPS)) {
        const item = el("li", { cls: "event" });
        item.dataset.eventId = event.id;
        if (event.all_day) item.classList.add("all-day");
        if (coveredDays(event).length > 1) item.classList.add("multi-day");
        if (!event.all_day && wallDate(event.start) === day) {
          item.append(el("span", { cls: "when", text: wallTime(event.start) }));
        }
        item.append(openButton(event, "title"));
        list.append(item);
      }
      cell.append(list);
      if (events.length > MONTH_CHIPS) {
        cell.append(say(el("p", { cls: "more" }), "month.more", { n: events.length - MONTH_CHIPS }));
      }
    }
    row.append(cell);
  }
  grid.append(body);
  $("month-grid").replaceChildren(grid);
}

function showView(view) {
  state.view = view;
  $("week-view").hidden = view !== "week";
  $("month-view").hidden = view !== "month";
  $("view-week").setAttribute("aria-pressed", String(view === "week"));
  $("view-month").setAttribute("aria-pressed", String(view === "month"));
  if (view === "month") loadMonth();
  else loadWeek();
}

function bindViews() {
  $("view-week").addEventListener("click", () => showView("week"));
  $("view-month").addEventListener("click", () => showView("month"));
  $("month-prev").addEventListener("click", () => {
    state.monthStart = addMonths(state.monthStart, -1);
    loadMonth();
  });
  $("month-next").addEventListener("click", () => {
    state.monthStart = addMonths(state.monthStart, 1);
    loadMonth();
  });
  $("month-this").addEventListener("click", () => {
    state.monthStart = monthOf(todayYmd());
    loadMonth();
  });
}

// ---- an event's details, with Move and Delete ------------------------------------------------------

function closeDetails() {
  state.opened = null;
  $("event-details").hidden = true;
  $("move-form").hidden = true;
  $("event-move").setAttribute("aria-expanded", "false");
  $("event-status").textContent = "";
}

function renderDetails() {
  const event = state.opened?.event;
  if (!event) return;
  const panel = $("event-details");
  panel.dataset.eventId = event.id;
  $("event-title").textContent = event.title;
  const facts = $("event-facts");
  facts.replaceChildren();
  const add = (key, value, name) => {
    if (value === undefined || value === null || value === "") return;
    const dd = el("dd", { text: String(value) });
    dd.dataset.fact = name;
    facts.append(say(el("dt"), key), dd);
  };
  add("event.when", `${t(`weekday.${isoWeekday(wallDate(event.start))}`)} ${dayLabel(wallDate(event.start))} ${whenText(event)}`, "when");
  add("event.place", event.location, "place");
  add("event.notes", event.notes, "notes");
  add("event.calendar", event.calendar, "calendar");
  if (event.recurrence) add("event.rule", ruleText(event.recurrence), "rule");
  if (event.reminder_minutes !== undefined && event.reminder_minutes !== null) {
    add("event.reminder", t("week.reminder", { n: event.reminder_minutes }), "reminder");
  }
  $("event-scope").hidden = !event.series_id;
}

function openDetails(event, opener) {
  state.opened = { event, opener };
  const panel = $("event-details");
  panel.hidden = false;
  $("move-form").hidden = true;
  $("event-move").setAttribute("aria-expanded", "false");
  $("event-status").textContent = "";
  for (const radio of document.querySelectorAll("#event-scope input")) radio.checked = radio.value === "this";
  renderDetails();
  panel.scrollIntoView({ block: "nearest" });
  panel.focus();
}

function chosenScope(event) {
  if (!event.series_id) return {};
  return { scope: document.querySelector("#event-scope input:checked")?.value ?? "this" };
}

async function afterCommand(answer) {
  if (!answer) return;
  if (answer.outcome === "held" || answer.outcome === "conflict") {
    say($("event-status"), "event.sent");
    $("card").scrollIntoView({ block: "nearest" });
  } else {
    say($("event-status"), "event.error", { message: answer.reply });
  }
}

function bindDetails() {
  $("event-close").addEventListener("click", () => {
    const opener = state.opened?.opener;
    closeDetails();
    if (opener?.isConnected) opener.focus();
  });
  $("event-move").addEventListener("click", () => {
    const event = state.opened?.event;
    if (!event) return;
    const form = $("move-form");
    form.hidden = !form.hidden;
    $("event-move").setAttribute("aria-expanded", String(!form.hidden));
    $("move-date").value = wallDate(event.start);
    $("move-time").value = wallTime(event.start);
    $("move-time").disabled = Boolean(event.all_day);
    if (!form.hidden) $("move-date").focus();
  });
  $("move-form").addEventListener("submit", async (submitted) => {
    submitted.preventDefault();
    const event = state.opened?.event;
    const date = $("move-date").value;
    const time = $("move-time").value;
    if (!event || !date) return;
    const args = { event_id: event.id, date, ...chosenScope(event) };
    if (!event.all_day && time) args.time = time;
    await afterCommand(await runCommand("update_schedule", args, `${t("event.move")} · ${event.title}`));
  });
  $("event-delete").addEventListener("click", async () => {
    const event = state.opened?.event;
    if (!event) return;
    const args = { event_id: event.id, ...chosenScope(event) };
    await afterCommand(await runCommand("delete_schedule", args, `${t("event.delete")} · ${event.title}`));
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

// ---- where the time went -----------------------------------------------------------------------

function segmentKind(name) {
  const head = name.split(".")[0];
  return ["gateway", "bus", "model", "tool", "db", "context"].includes(head) ? head : "other";
}

function renderTimeline(panel, timeline) {
  const total = Math.max(timeline.total_ms, 1);
  const table = el("table", { cls: "waterfall" });
  table.dataset.turnId = timeline.turn_id;
  table.append(el("caption", {}, [say(el("span"), "timeline.caption", { ms: timeline.total_ms.toFixed(1) })]));
  const head = el("tr");
  for (const key of ["timeline.col.segment", "timeline.col.start", "timeline.col.ms", "timeline.col.bar"]) {
    head.append(say(el("th", { attrs: { scope: "col" } }), key));
  }
  table.append(el("thead", {}, [head]));
  const body = el("tbody");
  const segments = [...timeline.segments].sort((a, b) => a.start_ms - b.start_ms);
  for (const segment of segments) {
    const row = el("tr", { cls: `segment kind-${segmentKind(segment.name)}` });
    row.dataset.segment = segment.name;
    row.append(el("th", { text: segment.name, attrs: { scope: "row" } }));
    row.append(el("td", { cls: "num", text: segment.start_ms.toFixed(1) }));
    row.append(el("td", { cls: "num", text: segment.ms.toFixed(1) }));
    const track = el("div", { cls: "track", attrs: { "aria-hidden": "true" } });
    const bar = el("div", { cls: "bar" });
    // CSSOM, not a style attribute: allowed by a policy that allows no inline style.
    bar.style.left = `${Math.min((segment.start_ms / total) * 100, 100)}%`;
    bar.style.width = `${Math.max((segment.ms / total) * 100, 0.4)}%`;
    track.append(bar);
    row.append(el("td", { cls: "bar-cell" }, [track]));
    body.append(row);
  }
  table.append(body);
  panel.replaceChildren(table);
  panel.dataset.loaded = "true";
  table.scrollIntoView({ block: "nearest" });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function loadTimeline(panel, turnId) {
  say(panel, "timeline.loading");
  // The recorder writes a turn's timeline moments after the answer; a 404 may only mean "not yet".
  for (let attempt = 1; attempt <= TIMELINE_TRIES; attempt++) {
    try {
      const response = await api(`/v1/turns/${encodeURIComponent(turnId)}/timeline`);
      renderTimeline(panel, await response.json());
      return;
    } catch (error) {
      if (error.status === 401) return;
      if (error.status !== 404) {
        say(panel, "timeline.error", { message: error.message });
        return;
      }
      await sleep(250 * attempt);
    }
  }
  say(panel, "timeline.missing");
}

function addTimelineToggle(bubble, turnId) {
  const panelId = `timeline-${turnId}`;
  const button = say(
    el("button", {
      cls: "timeline-toggle quiet",
      attrs: { type: "button", "aria-expanded": "false", "aria-controls": panelId },
    }),
    "timeline.show",
  );
  const panel = el("div", { cls: "timeline", attrs: { id: panelId } });
  panel.hidden = true;
  button.addEventListener("click", () => {
    const open = button.getAttribute("aria-expanded") === "true";
    button.setAttribute("aria-expanded", String(!open));
    say(button, open ? "timeline.show" : "timeline.hide");
    panel.hidden = open;
    if (!open && panel.dataset.loaded !== "true") loadTimeline(panel, turnId);
  });
  bubble.append(button, panel);
}

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
  bindFeed();
  $("lang-switch").addEventListener("click", () => setLang(state.lang === "zh" ? "en" : "zh"));
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
