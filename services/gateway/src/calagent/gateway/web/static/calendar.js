// The week and the month.

import { api } from "./api.js";
import { addDays, coveredDays, dateToYmd, dayLabel, isoWeekday, mondayOf, todayYmd, wallDate, wallTime, ymdToDate } from "./dates.js";
import { openDetails } from "./details.js";
import { el, say, t } from "./i18n.js";
import { $, state } from "./state.js";

// ---- the week ----------------------------------------------------------------------------------

// The title a block is labelled with: its task's, when the task is listed.
function taskTitle(taskId) {
  return state.tasks?.find((task) => task.id === taskId)?.title ?? null;
}

export async function loadWeek() {
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
  if (event.kind === "task_block") item.classList.add("task-block");
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
  if (event.kind === "task_block") {
    // A block of a task (contract §21): named by its task, which the tasks list shows.
    item.dataset.taskId = event.task_id;
    notes.append(say(el("span", { cls: "tag task" }), "week.task_block", { title: taskTitle(event.task_id) ?? event.title }));
  }
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

export function renderWeek() {
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

export function bindWeek() {
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

export async function loadMonth() {
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

export function renderMonth() {
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
        if (event.kind === "task_block") item.classList.add("task-block");
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

export function bindViews() {
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
