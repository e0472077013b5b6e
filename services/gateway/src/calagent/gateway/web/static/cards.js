// The pending command's card: what is known, the choices, why it waits, Confirm and Cancel; and a
// card for each offer from outside that waits beside the conversation (contract §19). Every answer
// a card sends names the offer it answers (`active_command_id`), so it never lands on another.

import { api } from "./api.js";
import { runCommand, send } from "./chat.js";
import {
  businessNow,
  dayLabel,
  eventSummary,
  isoWeekday,
  personText,
  ruleText,
  wallDate,
  wallTime,
  whenText,
} from "./dates.js";
import { attendeesList } from "./details.js";
import { el, say, t } from "./i18n.js";
import { $, OFFER_STATUSES, state } from "./state.js";
import { taskChangeView } from "./tasks.js";

// ---- the pending command -----------------------------------------------------------------------

export async function loadCommand() {
  const [command, waiting] = await Promise.all([readActive(), readWaiting()]);
  state.command = command;
  state.waiting = waiting;
  renderCard();
}

// After a turn: the offers waiting beside the conversation may have changed with it.
export async function loadWaiting() {
  state.waiting = await readWaiting();
  renderWaiting();
}

async function readActive() {
  try {
    return await (await api("/v1/commands/active")).json();
  } catch {
    return null;
  }
}

async function readWaiting() {
  try {
    return (await (await api("/v1/commands/waiting")).json()).commands ?? [];
  } catch {
    return [];
  }
}

// What a person would type to pick this day: the weekday when it names one candidate, else the date.
function candidateReply(candidate, candidates) {
  const weekday = isoWeekday(candidate);
  const same = candidates.filter((c) => isoWeekday(c) === weekday).length;
  return same === 1 ? t(`reply.weekday.${weekday}`) : dayLabel(candidate);
}

// A button that sends what a person would type, as the answer to this command and no other.
function answerButton(button, command, words) {
  button.dataset.sends = words;
  button.dataset.answers = command.id;
  button.disabled = state.busy;
  button.addEventListener("click", () => send(button.dataset.sends, button.dataset.answers));
  return button;
}

function actionButton(command, labelKey, words, cls) {
  return answerButton(say(el("button", { cls, attrs: { type: "button" } }), labelKey), command, words);
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
  // A change asking which event proposes a time only once the event is known.
  if (command.proposed_start && !(command.event_candidates ?? []).length) {
    const start = command.proposed_start;
    const end = command.proposed_end ?? start;
    // A series' proposed time is its first occurrence, not a one-off date.
    add(
      command.recurrence ? "card.field.first" : "card.field.date",
      `${dayLabel(wallDate(start))} ${wallTime(start)}–${wallTime(end)}`,
    );
  }
  if (command.recurrence) add("card.field.rule", ruleText(command.recurrence));
  // A held invitation names every recipient before anything is sent.
  const recipients = command.recipients ?? [];
  if (recipients.length) {
    const people = el("ul", { cls: "people" });
    for (const person of recipients) {
      const item = el("li", { text: personText(person) });
      item.dataset.email = person.email;
      people.append(item);
    }
    const dd = el("dd", {}, [people]);
    dd.dataset.fact = "recipients";
    list.append(say(el("dt"), "people.recipients"), dd);
  }
  return list;
}

// Names compare as the server compares them: case and whitespace set aside.
const normalName = (name) => name.toLowerCase().replace(/\s+/g, "");

// The call that stopped at the name, again, with the chosen address in the name's place; a create
// carries the stub's id so it continues the stub instead of starting another.
function attendeeCall(command, person) {
  const waiting = state.attendeeCalls.get(command.id);
  if (!waiting) {
    if (!command.proposed_start) return null;
    const args = { title: command.title, date: wallDate(command.proposed_start), attendees: [person.email] };
    return { tool: "prepare_or_create_schedule", args: { ...args, command_id: command.id } };
  }
  const wanted = normalName(command.attendee_query ?? "");
  const named = waiting.arguments.attendees ?? [];
  const at = named.findIndex((name) => normalName(name) === wanted);
  const attendees = at >= 0 ? named.with(at, person.email) : [...named, person.email];
  const args = { ...waiting.arguments, attendees };
  if (waiting.name === "prepare_or_create_schedule") args.command_id = command.id;
  return { tool: waiting.name, args };
}

function attendeeChoices(command, prefix) {
  const people = command.attendee_candidates ?? [];
  const query = command.attendee_query ?? "";
  const label = `${prefix}-attendees-label`;
  const group = el("div", { cls: "candidates", attrs: { role: "group", "aria-labelledby": label } });
  group.append(
    say(el("p", { cls: "group-label", attrs: { id: label } }), people.length ? "people.which" : "people.nobody", {
      query,
    }),
  );
  if (!people.length) return group;
  const list = el("ul", { cls: "choice-list" });
  for (const person of people) {
    const button = el("button", { cls: "choice", text: personText(person), attrs: { type: "button" } });
    button.dataset.attendee = person.email;
    const call = attendeeCall(command, person);
    // Without the call to re-issue, the address goes as the user's reply.
    if (call) {
      button.dataset.command = call.tool;
      button.disabled = state.busy;
      button.addEventListener("click", () => runCommand(call.tool, call.args, personText(person)));
    } else answerButton(button, command, person.email);
    list.append(el("li", {}, [button]));
  }
  group.append(list);
  return group;
}


// A change found among several events for the same words (contract §20): one button per event,
// sending its number as a person would type it in this language ("第2个"), as the answer to this
// card; code reads it without the model.
function eventChoices(command, events, prefix) {
  const label = `${prefix}-events-label`;
  const group = el("div", { cls: "candidates", attrs: { role: "group", "aria-labelledby": label } });
  group.append(say(el("p", { cls: "group-label", attrs: { id: label } }), "card.which_event"));
  const list = el("ul", { cls: "choice-list" });
  events.forEach((event, index) => {
    const day = wallDate(event.start);
    const when = `${t(`weekday.${isoWeekday(day)}`)} ${dayLabel(day)} ${whenText(event)}`;
    const text = `${index + 1}. ${event.title} · ${when} · ${event.calendar}`;
    const button = el("button", { cls: "choice", text, attrs: { type: "button" } });
    button.dataset.eventId = event.event_id;
    answerButton(button, command, t("reply.ordinal", { n: index + 1 }));
    list.append(el("li", {}, [button]));
  });
  group.append(list);
  return group;
}

// ---- an invitation received by mail -------------------------------------------------------------

// Who asks, what and when (the stub gives times in the user's zone), and who is invited.
function invitationFacts(invitation) {
  const list = el("dl", { cls: "known" });
  const add = (key, value, fact) => {
    const dd = el("dd", { text: value });
    dd.dataset.fact = fact;
    list.append(say(el("dt"), key), dd);
  };
  add("people.organizer", invitation.organizer, "organizer");
  add("card.field.title", invitation.title, "title");
  const day = wallDate(invitation.start);
  add("card.field.date", `${t(`weekday.${isoWeekday(day)}`)} ${dayLabel(day)} ${whenText(invitation)}`, "when");
  const people = invitation.attendees ?? [];
  if (people.length) list.append(say(el("dt"), "people.attendees"), attendeesList(people));
  return list;
}

// The answers a person would type, as buttons: each sends its words in the page's language, so the
// turn is the user's own reply and code answers it without the model.
function invitationAnswers(actions, command) {
  actions.append(actionButton(command, "card.invite.accept", t("reply.accept"), "primary accept"));
  actions.append(actionButton(command, "card.invite.tentative", t("reply.tentative"), "tentative"));
  actions.append(actionButton(command, "card.invite.decline", t("reply.decline"), "decline"));
}

function invitationCard(card, command, prefix) {
  const invitation = command.invitation;
  const cancelled = invitation.method === "CANCEL";
  card.dataset.method = invitation.method;
  const head = el("div", { cls: "card-head" });
  head.append(
    say(el("h2", { attrs: { id: `${prefix}-heading` } }), cancelled ? "card.invite.cancelled_heading" : "card.invite.heading"),
  );
  head.append(say(el("span", { cls: `badge status-${command.status}` }), `card.status.${command.status}`));
  card.append(head);
  // Contract §19: offered all the same (it does nothing without the user), but not as a contact's.
  if (invitation.sender_known === false) {
    const note = say(el("p", { cls: "stranger" }), "card.invite.stranger");
    note.dataset.fact = "stranger";
    card.append(note);
  }
  card.append(say(el("h3", { cls: "sr-label" }), "card.known"));
  card.append(invitationFacts(invitation));
  card.append(say(el("p", { cls: "why" }), cancelled ? "card.invite.why_cancel" : "card.invite.why_request"));

  const actions = el("div", { cls: "actions" });
  // A bare "confirm" to a cancellation that came by mail goes to the model; the button confirms
  // this stub itself.
  if (cancelled) actions.append(commandButton(command, "confirm_command", "card.invite.remove", "primary confirm"));
  else invitationAnswers(actions, command);
  // Dropping the offer keeps the calendar as it is; a request dropped is answered DECLINED.
  actions.append(cancelButton(command, cancelled ? "card.invite.keep" : "card.cancel"));
  card.append(actions);
}

// A button that runs a tool on the stub as a command, without the model (contract §18).
function commandButton(command, tool, labelKey, cls) {
  const button = say(el("button", { cls, attrs: { type: "button" } }), labelKey);
  button.dataset.command = tool;
  button.disabled = state.busy;
  button.addEventListener("click", () => runCommand(tool, { command_id: command.id }, t(labelKey)));
  return button;
}

function cancelButton(command, labelKey) {
  return commandButton(command, "cancel_schedule_command", labelKey, "cancel");
}

// Times proposed to someone outside (a proposal to confirm, or the one they chose, to book), and an
// attendee's counter-proposal: who, and which times, in the user's zone (contract §20).
function slotText(slot) {
  return `${t(`weekday.${isoWeekday(wallDate(slot.start))}`)} ${dayLabel(wallDate(slot.start))} ${wallTime(slot.start)}–${wallTime(slot.end)}`;
}

function proposalView(proposal) {
  const box = el("div", { cls: "proposal" });
  box.append(say(el("h3"), proposal.chosen === null || proposal.chosen === undefined ? "card.proposal" : "card.booking"));
  const facts = el("dl", { cls: "known" });
  const who = el("dd", { text: proposal.attendee.email });
  who.dataset.fact = "attendee";
  facts.append(say(el("dt"), "card.proposal.attendee"), who);
  const zone = el("dd", { text: proposal.attendee_tz ?? t("card.proposal.zone_unknown") });
  zone.dataset.fact = "attendee-zone";
  facts.append(say(el("dt"), "card.proposal.zone"), zone);
  box.append(facts);
  const list = el("ol", { cls: "slot-list" });
  proposal.slots.forEach((slot, index) => {
    const item = el("li", { text: slotText(slot) });
    item.dataset.slot = String(index + 1);
    if (index === proposal.chosen) {
      item.dataset.chosen = "true";
      item.classList.add("chosen");
    }
    list.append(item);
  });
  box.append(list);
  return box;
}

function counterView(counter) {
  const box = el("div", { cls: "counter" });
  box.append(say(el("h3"), "card.counter"));
  const facts = el("dl", { cls: "known" });
  const who = el("dd", { text: counter.proposer });
  who.dataset.fact = "proposer";
  const when = el("dd", { text: slotText(counter) });
  when.dataset.fact = "proposed";
  facts.append(say(el("dt"), "card.counter.proposer"), who, say(el("dt"), "card.counter.time"), when);
  box.append(facts);
  return box;
}

// A re-plan of task blocks (contract §21): each block's old and new time, and what would still be
// missing; nothing moves until the card is confirmed.
function replanView(replan) {
  const box = el("div", { cls: "replan" });
  box.append(say(el("h3"), "card.replan"));
  const list = el("ol", { cls: "move-list" });
  for (const move of replan.moves) {
    const item = el("li");
    item.dataset.blockId = move.block_id ?? "";
    item.dataset.taskId = move.task_id;
    const before = move.old_start ? slotText({ start: move.old_start, end: move.old_end }) : t("card.replan.new");
    const after = move.new_start ? slotText({ start: move.new_start, end: move.new_end }) : t("card.replan.removed");
    const old = el("span", { cls: "before", text: before });
    const now = el("span", { cls: "after", text: after });
    item.append(el("strong", { text: move.title }), " ", old, el("span", { cls: "arrow", text: " → ", attrs: { "aria-hidden": "true" } }), now);
    list.append(item);
  }
  box.append(list);
  const titles = new Map(replan.moves.map((move) => [move.task_id, move.title]));
  for (const [taskId, minutes] of replan.missing ?? []) {
    const note = el("p", { cls: "tag risk", text: t("card.replan.missing", { title: titles.get(taskId) ?? "", n: String(minutes) }) });
    note.dataset.taskId = taskId;
    box.append(note);
  }
  return box;
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

export function renderCard() {
  const card = $("card");
  clearInterval(state.countdown);
  card.replaceChildren();
  delete card.dataset.method;
  const command = state.command;
  renderWaiting();
  if (!command) {
    card.hidden = true;
    delete card.dataset.status;
    delete card.dataset.commandId;
    return;
  }
  card.hidden = false;
  fillCard(card, command, "card");
  startCountdown(card, command);
}

// ---- offers waiting beside the conversation (GET /v1/commands/waiting) ----------------------------

// One card per offer from outside, the one the conversation is on excepted (it has the card above).
export function renderWaiting() {
  const shown = state.command?.id;
  const offers = state.waiting.filter((offer) => offer.id !== shown);
  $("waiting-list").replaceChildren(
    ...offers.map((offer, index) => {
      const prefix = `waiting-${index}`;
      const card = el("section", { cls: "card", attrs: { "aria-labelledby": `${prefix}-heading` } });
      fillCard(card, offer, prefix);
      return card;
    }),
  );
  $("waiting").hidden = offers.length === 0;
}

// A command's card, its element ids under `prefix`: the facts, the choices, why it waits, the answers.
function fillCard(card, command, prefix) {
  card.dataset.status = command.status;
  card.dataset.commandId = command.id;
  if (command.kind === "invitation" && command.invitation) {
    invitationCard(card, command, prefix);
    return;
  }

  const head = el("div", { cls: "card-head" });
  head.append(say(el("h2", { attrs: { id: `${prefix}-heading` } }), "card.heading"));
  head.append(say(el("span", { cls: `badge status-${command.status}` }), `card.status.${command.status}`));
  card.append(head);

  card.append(say(el("h3", { cls: "sr-label" }), "card.known"));
  card.append(knownFields(command));

  // While it asks which event, the change depends on the answer: the events are the question.
  const events = command.event_candidates ?? [];
  if (command.change && !events.length) card.append(changeView(command.change));
  if (command.proposal) card.append(proposalView(command.proposal));
  if (command.counter) card.append(counterView(command.counter));
  if (command.replan) card.append(replanView(command.replan));
  if (command.task_change) card.append(taskChangeView(command.task_change));

  const candidates = command.candidates ?? [];
  if (events.length) {
    card.append(eventChoices(command, events, prefix));
  } else if (candidates.length) {
    const label = `${prefix}-candidates-label`;
    const group = el("div", { cls: "candidates", attrs: { role: "group", "aria-labelledby": label } });
    group.append(say(el("p", { cls: "group-label", attrs: { id: label } }), "card.candidates"));
    const list = el("ul", { cls: "choice-list" });
    for (const candidate of candidates) {
      const button = el("button", {
        cls: "choice",
        text: `${t(`weekday.${isoWeekday(candidate)}`)} ${dayLabel(candidate)}`,
        attrs: { type: "button" },
      });
      button.dataset.candidate = candidate;
      answerButton(button, command, candidateReply(candidate, candidates));
      list.append(el("li", {}, [button]));
    }
    group.append(list);
    card.append(group);
  } else if (command.status === "needs_attendee") {
    card.append(attendeeChoices(command, prefix));
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
  // A change still asking which event has nothing to confirm yet (contract §20).
  if (OFFER_STATUSES.has(command.status) && !events.length) {
    actions.append(actionButton(command, "card.confirm", t("reply.confirm"), "primary confirm"));
  }
  // Every card can be dropped, without the model: the same cancel a "算了" runs.
  actions.append(cancelButton(command, "card.cancel"));
  card.append(actions);
}

function startCountdown(card, command) {
  const timer = el("p", {
    cls: "countdown",
    attrs: { role: "timer", "aria-live": "off", "aria-label": t("card.countdown_label") },
  });
  timer.dataset.i18nAriaLabel = "card.countdown_label";
  card.append(timer);
  tickCountdown(timer, command);
  state.countdown = setInterval(() => tickCountdown(timer, command), 1000);
}
