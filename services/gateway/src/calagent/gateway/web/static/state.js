// What the page knows: the session, the pending command, the views' data. One object, shared.

export const TOKEN_KEY = "calagent.token";
export const LANG_COOKIE = "calagent_lang";
export const SAFE_METHODS = new Set(["GET", "HEAD"]);
export const OFFER_STATUSES = new Set(["held", "conflict"]);
export const HISTORY_PAGE = 50;
export const RRULE_DAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"];
export const TIMELINE_TRIES = 6;

// What a room tells the rooms that import it, as an event on `document`: it names no room it tells.
export const REFUSED = "calagent:refused"; // the API answered 401: the session is over
export const TURN_DONE = "calagent:turn-done"; // a turn finished (a write may have happened)
export const HISTORY_SHOWN = "calagent:history-shown"; // restored messages, with their receipts, are in
export const LANG_SET = "calagent:lang-set"; // the page's language changed: what was rendered is again

export const $ = (id) => document.getElementById(id);

export const state = {
  lang: document.documentElement.dataset.lang === "zh" ? "zh" : "en",
  strings: { zh: {}, en: {} },
  devMode: document.body.dataset.devMode === "true",
  token: null,
  csrf: null, // signed in by the session cookie: the token every change carries
  session: null, // {user_id, tz, now, csrf_token?}
  skewMs: 0, // the system's "now" minus the browser's clock
  command: null, // the active stub, as /v1/commands/active and turn.done give it
  waiting: [], // the offers from outside waiting beside the conversation (/v1/commands/waiting)
  receipts: new Map(), // stub id -> the reply of the last turn that showed it
  attendeeCalls: new Map(), // stub id -> the tool call that left it waiting for a person
  weekStart: null, // "YYYY-MM-DD", a Monday
  events: [],
  weekLoaded: false,
  view: "week", // or "month"
  monthStart: null, // "YYYY-MM-01"
  monthEvents: [],
  monthLoaded: false,
  tasks: [], // GET /v1/tasks: the user's tasks, open and done (contract §21)
  tasksLoaded: false,
  historyBefore: null, // where the next older page of the conversation ends
  opened: null, // the event whose details are shown
  busy: false,
  countdown: null,
};
