// An event's details, with Move and Delete through held commands.

import { runCommand } from "./chat.js";
import { dayLabel, isoWeekday, personText, ruleText, wallDate, wallTime, whenText } from "./dates.js";
import { el, say, t } from "./i18n.js";
import { $, state } from "./state.js";

// ---- an event's details, with Move and Delete ------------------------------------------------------

export function closeDetails() {
  state.opened = null;
  $("event-details").hidden = true;
  $("move-form").hidden = true;
  $("event-move").setAttribute("aria-expanded", "false");
  $("event-status").textContent = "";
}

export function renderDetails() {
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
  if (event.organizer) add("people.organizer", event.organizer, "organizer");
  if (event.attendees?.length) facts.append(say(el("dt"), "people.attendees"), attendeesList(event.attendees));
  $("event-scope").hidden = !event.series_id;
}

// Each person with their answer (PARTSTAT: ACCEPTED, DECLINED, TENTATIVE, NEEDS-ACTION, …).
export function attendeesList(attendees) {
  const list = el("ul", { cls: "people" });
  for (const person of attendees) {
    const status = (person.status ?? "NEEDS-ACTION").toLowerCase();
    const item = el("li", { cls: "person" });
    item.dataset.email = person.email;
    item.dataset.status = status;
    item.append(el("span", { cls: "person-name", text: personText(person) }));
    const key = `people.status.${status}`;
    const badge = el("span", { cls: `badge answer-${status}` });
    if (key in state.strings[state.lang]) say(badge, key);
    else badge.textContent = status;
    item.append(" ", badge);
    list.append(item);
  }
  const dd = el("dd", {}, [list]);
  dd.dataset.fact = "attendees";
  return dd;
}

export function openDetails(event, opener) {
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

export function bindDetails() {
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
