// Dates as wall-clock strings in the user's zone (never the browser's), and events in words.

import { t } from "./i18n.js";
import { RRULE_DAYS, state } from "./state.js";

// ---- dates: wall-clock strings in the user's zone, never the browser's ----------------------------

export function ymdToDate(ymd) {
  const [y, m, d] = ymd.split("-").map(Number);
  return new Date(Date.UTC(y, m - 1, d));
}

export function dateToYmd(date) {
  return date.toISOString().slice(0, 10);
}

export function addDays(ymd, days) {
  const date = ymdToDate(ymd);
  date.setUTCDate(date.getUTCDate() + days);
  return dateToYmd(date);
}

export function isoWeekday(ymd) {
  return ymdToDate(ymd).getUTCDay() || 7;
}

export function mondayOf(ymd) {
  return addDays(ymd, 1 - isoWeekday(ymd));
}

export function dayLabel(ymd) {
  const options =
    state.lang === "zh"
      ? { month: "numeric", day: "numeric", timeZone: "UTC" }
      : { month: "short", day: "numeric", timeZone: "UTC" };
  return new Intl.DateTimeFormat(state.lang === "zh" ? "zh-CN" : "en", options).format(ymdToDate(ymd));
}

export function businessNow() {
  return new Date(Date.now() + state.skewMs);
}

export function todayYmd() {
  const zone = state.session?.tz ?? document.body.dataset.defaultTz;
  return new Intl.DateTimeFormat("en-CA", { timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit" })
    .format(businessNow());
}

export const wallDate = (iso) => iso.slice(0, 10);
export const wallTime = (iso) => iso.slice(11, 16);

// The days an event covers: an end at midnight belongs to the day before.
export function coveredDays(event) {
  const first = wallDate(event.start);
  let last = wallDate(event.end);
  if (last > first && event.end.slice(11, 19) === "00:00:00") last = addDays(last, -1);
  if (last < first) last = first;
  const days = [];
  for (let day = first; day <= last && days.length < 400; day = addDays(day, 1)) days.push(day);
  return days;
}

export function whenText(event) {
  if (event.all_day) return t("week.all_day");
  return `${wallDate(event.start) === wallDate(event.end) ? "" : `${dayLabel(wallDate(event.start))} `}${wallTime(event.start)}–${
    wallDate(event.start) === wallDate(event.end) ? "" : `${dayLabel(wallDate(event.end))} `
  }${wallTime(event.end)}`;
}

export function eventSummary(event) {
  return `${event.title} · ${dayLabel(wallDate(event.start))} ${whenText(event)}`;
}

// A person as mail clients write one: "Name <address>", or the address alone.
export function personText(person) {
  return person.name ? `${person.name} <${person.email}>` : person.email;
}

// An RRULE of the contract's subset in words; anything else is shown as written.
export function ruleText(rrule) {
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
