// The user's tasks beside the week (GET /v1/tasks, contract §21): each with its due, whether it is
// at risk and by how many minutes, and a checkbox that completes or reopens it (PATCH).

import { api } from "./api.js";
import { loadWeek, renderWeek } from "./calendar.js";
import { el, say, t } from "./i18n.js";
import { $, state } from "./state.js";

// A due as the user reads it: on their wall clock (the API gives an instant).
function dueText(iso) {
  const zone = state.session?.tz ?? document.body.dataset.defaultTz;
  const locale = state.lang === "zh" ? "zh-CN" : "en";
  return new Intl.DateTimeFormat(locale, {
    timeZone: zone,
    month: state.lang === "zh" ? "numeric" : "short",
    day: "numeric",
    hour: "2-digit",
    minute: "2-digit",
    hourCycle: "h23",
  }).format(new Date(iso));
}

function taskItem(task) {
  const item = el("li", { cls: "task" });
  item.dataset.taskId = task.id;
  item.dataset.status = task.status;
  if (task.at_risk) item.classList.add("at-risk");
  const box = el("input", { attrs: { type: "checkbox", id: `task-done-${task.id}` } });
  box.checked = task.status === "done";
  box.addEventListener("change", () => markDone(task, box));
  item.append(box);
  item.append(el("label", { cls: "task-title", text: task.title, attrs: { for: box.id } }));
  const notes = el("span", { cls: "notes" });
  if (task.due) notes.append(say(el("span", { cls: "due" }), "tasks.due", { when: dueText(task.due) }));
  if (task.at_risk) {
    notes.append(say(el("span", { cls: "tag risk" }), "tasks.at_risk", { n: task.missing_minutes }));
  }
  item.append(notes);
  return item;
}

export function renderTasks() {
  const tasks = state.tasks ?? [];
  $("tasks-list").replaceChildren(...tasks.map(taskItem));
  $("tasks-empty").hidden = tasks.length > 0;
}

export async function loadTasks() {
  try {
    const body = await (await api("/v1/tasks")).json();
    state.tasks = body.tasks ?? [];
    state.tasksLoaded = true;
    $("tasks-status").textContent = "";
    delete $("tasks-status").dataset.i18n;
    renderTasks();
    // The week's blocks are labelled with their tasks' titles.
    if (state.weekLoaded) renderWeek();
  } catch (error) {
    if (error.status !== 401) say($("tasks-status"), "tasks.error", { message: error.message });
  }
}

// Done or open again: what the server then says is what is shown (a refusal puts the box back).
async function markDone(task, box) {
  box.disabled = true;
  try {
    await api(`/v1/tasks/${encodeURIComponent(task.id)}`, { method: "PATCH", body: { done: box.checked } });
  } catch (error) {
    if (error.status !== 401) say($("tasks-status"), "tasks.error", { message: error.message });
  }
  await loadTasks();
  // Completing a task frees its later blocks: the week shows what is left.
  if (state.weekLoaded) loadWeek();
}

// Our change to a task offered again after the calendar changed the task too (contract §22): each
// field it makes, the calendar's value → ours, or our removal of it; nothing changes until the card
// is confirmed.
const TASK_FIELD_KEYS = {
  title: "card.task_change.title",
  duration_minutes: "card.task_change.duration_minutes",
  due: "card.task_change.due",
  priority: "card.task_change.priority",
  percent: "card.task_change.percent",
  done: "card.task_change.done",
};

function taskValue(task, field) {
  if (field === "due") return task.due ? dueText(task.due) : "–";
  if (field === "done") return t(task.status === "done" ? "card.task_change.is_done" : "card.task_change.is_open");
  if (field === "percent") return `${task.percent}%`;
  return String(task[field]);
}

export function taskChangeView(change) {
  const box = el("div", { cls: "task-change" });
  // Our removal of the task, offered again (no `after`): the task as the calendar keeps it.
  if (!change.after) {
    box.append(
      say(el("h3"), "card.task_change.removal"),
      el("p", { cls: "before", text: change.before.title }),
    );
    return box;
  }
  box.append(say(el("h3"), "card.task_change"));
  const list = el("ul", { cls: "move-list" });
  for (const field of change.fields) {
    const item = el("li");
    item.dataset.field = field;
    item.append(
      say(el("strong"), TASK_FIELD_KEYS[field]),
      " ",
      el("span", { cls: "before", text: taskValue(change.before, field) }),
      el("span", { cls: "arrow", text: " → ", attrs: { "aria-hidden": "true" } }),
      el("span", { cls: "after", text: taskValue(change.after, field) }),
    );
    list.append(item);
  }
  box.append(list);
  return box;
}
