// Where a turn's time went: its timeline as a waterfall.

import { api } from "./api.js";
import { el, say } from "./i18n.js";
import { TIMELINE_TRIES } from "./state.js";

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

export function addTimelineToggle(bubble, turnId) {
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
