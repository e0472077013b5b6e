// Recent changes (GET /v1/changes), each with its own Undo.

import { api } from "./api.js";
import { undoButton } from "./chat.js";
import { dayLabel, whenText } from "./dates.js";
import { el, say, t } from "./i18n.js";
import { $, state } from "./state.js";

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

export async function loadChanges() {
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
