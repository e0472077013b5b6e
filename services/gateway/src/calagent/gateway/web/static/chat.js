// The conversation: messages, streamed turns, commands without the model, restored history.

import { api, newMessageId } from "./api.js";
import { el, say, t } from "./i18n.js";
import { $, HISTORY_PAGE, HISTORY_SHOWN, TURN_DONE, state } from "./state.js";
import { addTimelineToggle } from "./timeline.js";

// ---- chat --------------------------------------------------------------------------------------

export function setBusy(busy) {
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
  // The call a person's name stopped: picking the person re-issues it with their address.
  const waiting = (answer.tool_calls ?? []).findLast((call) => call.result === "needs_attendee");
  if (answer.command?.status === "needs_attendee" && waiting) state.attendeeCalls.set(answer.command.id, waiting);
  addUndo(bubble, answer.change_ids ?? []);
}

// A receipt of a change can take it back: the same undo_change a "撤销" runs, without the model.
export function undoButton(changeId, labelKey) {
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

function failBubble(bubble, message) {
  bubble.classList.add("failed");
  bubble.removeAttribute("aria-busy");
  say(bubble.querySelector(".text"), "chat.error", { message });
}

function finishTurn(bubble, answer) {
  markAnswer(bubble, answer);
  state.command = answer.command ?? null;
  document.dispatchEvent(new Event(TURN_DONE));
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

export async function loadHistory(before = null) {
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
    if (!before) $("messages").dataset.loaded = "true";
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
  // The newest page is in: what arrives from now on is appended after it, never put before it.
  if (!before) $("messages").dataset.loaded = "true";
  document.dispatchEvent(new Event(HISTORY_SHOWN));
}

export function bindHistory() {
  $("history-more").addEventListener("click", () => loadHistory(state.historyBefore));
}

// ---- commands without the model (POST /v1/commands) ------------------------------------------------

// A button's action as a turn of the conversation: what was done, and the assistant's answer.
export async function runCommand(tool, args, label) {
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

// `answers`: the id of the command a card's button answers (contract §19), so the words answer
// that offer and no other; typed messages name none.
export async function send(message, answers = null) {
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
      body: {
        message: text,
        client_message_id: newMessageId(),
        channel: "web",
        ...(answers ? { active_command_id: answers } : {}),
      },
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

export function bindComposer() {
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
