// Rendering for the cotal-tasks board: lanes, columns and cards.
// Every value from the API is set as text (textContent); only http(s) URLs become links.

import { EVIDENCE_LABEL, EVIDENCE_PLURAL, icon } from "./icons.js";

export const STATUSES = ["open", "claimed", "blocked", "done", "dropped"];
export const LABELS = { open: "Open", claimed: "Claimed", blocked: "Blocked", done: "Done", dropped: "Dropped" };
const PROVIDERS = { board: "Board", github: "GitHub", gitlab: "GitLab", "tower-do": "tower-do" };
const EMPTY_COLUMN = {
  open: "Nothing waiting",
  claimed: "Nobody is on anything",
  blocked: "Nothing blocked",
  done: "Nothing finished yet",
  dropped: "Nothing dropped",
};

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// A task text's line structure as line breaks: the contract carries a blank line as U+2029
// and a line break as U+2028 (a line feed is a control character it refuses); shown in an
// element whose white-space keeps line breaks (core/text.py line_breaks reads it alike).
export function lines(text) {
  return String(text).replaceAll("\u2029", "\n\n").replaceAll("\u2028", "\n");
}

export function sentence(text) {
  const trimmed = String(text).trim();
  return /[.!?]$/.test(trimmed) ? trimmed : `${trimmed}.`;
}

export function clock(ms) {
  if (!ms) return "never";
  return new Date(ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

export function when(ms) {
  if (!ms) return "never";
  return new Date(ms).toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
}

export function span(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return m % 60 && h < 10 ? `${h}h ${m % 60}m` : `${h}h`;
  const d = h / 24;
  return d < 10 ? `${Math.round(d * 10) / 10}d` : `${Math.round(d)}d`;
}

export function ago(ms, now = Date.now()) {
  return ms ? `${span(now - ms)} ago` : "never";
}

export function seatKey(binding) {
  return `${binding.owner}.${binding.actor}/${binding.lifecycleUid}`;
}

export function providerName(provider) {
  return PROVIDERS[provider] || provider;
}

export function httpUrl(text) {
  if (!/^https?:\/\//i.test(text)) return null;
  try {
    const url = new URL(text);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch {
    return null;
  }
}

// The task's reference in its own tracker: the issue page when the endpoint names one.
export function trackerRef(task, endpoint) {
  const number = /^(.*)#(\d{1,19})$/.exec(task.taskId);
  const template = endpoint && endpoint.taskLink;
  // {path}: the task id before "#" (an endpoint over several repositories or projects).
  const link = number && template ? template.replace("{path}", number[1]).replace("{number}", number[2]) : null;
  const href = link ? httpUrl(link) : null;
  const kind = { github: "GitHub issue", gitlab: "GitLab issue", "tower-do": "tower-do key" }[endpoint && endpoint.provider];
  return { text: task.taskId, href, kind: kind || "task id" };
}

export function refNode(task, endpoint, withIcon = true) {
  const ref = trackerRef(task, endpoint);
  if (!ref.href) return el("span", { class: "ref", title: ref.kind, text: ref.text });
  return el(
    "a",
    { class: "ref", href: ref.href, target: "_blank", rel: "noopener noreferrer nofollow", title: `Open the ${ref.kind}` },
    ref.text,
    withIcon ? icon("external") : null,
  );
}

export function taskHash(endpoint, taskId) {
  return `#task=${encodeURIComponent(`${endpoint}/${taskId}`)}`;
}

// Liveness as a dot: only when presence is populated; the long form is the tooltip.
export function livenessOf(liveness) {
  if (!liveness || liveness.view === "unpopulated") return null;
  const seat = liveness.seat === "unknown" ? "offline" : liveness.seat;
  const long = {
    online: "online: its presence card is current",
    offline: "offline: no current presence card for this incarnation",
    replaced: "replaced: a newer incarnation of this principal is online; the task stays with this one",
  }[seat];
  const stale = liveness.view === "stale";
  const seen = liveness.lastSeen ? `; last card ${clock(liveness.lastSeen)}` : "";
  return { seat, stale, text: stale ? `${seat} (as last read${seen})` : `${long}${seen}` };
}

function initials(name) {
  const parts = name.split(/[-_.\s]+/).filter(Boolean);
  const text = parts.length > 1 ? parts[0][0] + parts[1][0] : name.slice(0, 2);
  return text.toUpperCase();
}

function hue(text) {
  let h = 0;
  for (const ch of text) h = (h * 31 + ch.codePointAt(0)) % 360;
  return Math.floor(h / 30); // one of twelve palette slots
}

export function seatChip(binding, liveness) {
  const principal = `${binding.owner}.${binding.actor}`;
  const live = livenessOf(liveness);
  const title = live ? `${principal}: ${live.text}` : principal;
  return el(
    "span",
    { class: "seat", "data-bound": "true", title },
    el("span", { class: `avatar h${hue(principal)}`, "aria-hidden": "true", text: initials(binding.actor) }),
    el("span", { class: "name", text: binding.actor }),
    live
      ? el("i", { class: `dot ${live.seat}${live.stale ? " stale" : ""}`, "data-seat": live.seat, role: "img", "aria-label": live.seat })
      : null,
  );
}

export function evidenceCounts(evidence) {
  const counts = {};
  for (const entry of evidence || []) counts[entry.kind] = (counts[entry.kind] || 0) + 1;
  const kinds = Object.keys(counts);
  if (!kinds.length) return null;
  const words = kinds.map((k) => `${counts[k]} ${(counts[k] === 1 ? EVIDENCE_LABEL : EVIDENCE_PLURAL)[k] || k}`);
  const box = el("span", { class: "evidence-counts", role: "img", "aria-label": `Evidence: ${words.join(", ")}` });
  kinds.forEach((kind, i) => {
    box.append(el("span", { class: `ev ev-${kind}`, "data-kind": kind, title: words[i] }, icon(kind), String(counts[kind])));
  });
  return box;
}

// Whether a card passes the filters: its source (the repository or project its id names,
// for an endpoint over several), its seat, and the text in its title or id.
export function matches(task, filters) {
  if (filters.source && !task.taskId.startsWith(`${filters.source}#`)) return false;
  const seat = filters.seat;
  if (seat === "-" && task.binding) return false;
  if (seat && seat !== "-" && !(task.binding && seatKey(task.binding) === seat)) return false;
  if (!filters.text) return true;
  const text = filters.text.toLowerCase();
  return task.title.toLowerCase().includes(text) || task.taskId.toLowerCase().includes(text);
}

function card(task, lane) {
  const name = lane.endpoint.name;
  const node = el("article", { class: `card s-${task.status}`, "data-task-id": task.taskId, "data-endpoint": name });
  const meta = el("div", { class: "card-meta" }, refNode(task, lane.endpoint));
  if (task.statusSource) meta.append(el("span", { class: "source", title: "its status in the tracker", text: task.statusSource }));
  node.append(meta);
  node.append(el("h4", { title: task.title }, el("a", { class: "open", href: taskHash(name, task.taskId), text: task.title })));
  const foot = el("div", { class: "card-foot" });
  foot.append(
    task.binding
      ? seatChip(task.binding, (lane.data && lane.data.liveness[seatKey(task.binding)]) || null)
      : el("span", { class: "seat unbound", "data-bound": "false", text: "Unassigned" }),
  );
  const counts = evidenceCounts(task.evidence);
  if (counts) foot.append(counts);
  foot.append(el("time", { class: "age", datetime: new Date(task.updatedAt).toISOString(), title: `updated ${when(task.updatedAt)}`, text: span(Date.now() - task.updatedAt) }));
  node.append(foot);
  return node;
}

function skeleton() {
  return el("div", { class: "skeleton", "aria-hidden": "true" }, el("i"), el("i"), el("i"));
}

function emptyLane(lane) {
  const provider = lane.endpoint.provider;
  const waiting = provider === "board"
    ? "This board is waiting for its first task: one appears here as soon as a seat or an operator sends create-task."
    : `Waiting for the first tasks from ${providerName(provider)}: they appear here once a sync has read them.`;
  return el("div", { class: "lane-empty" }, el("b", { text: "No tasks yet" }), el("p", { text: waiting }));
}

function banners(lane) {
  const out = [];
  const data = lane.data;
  if (lane.error) {
    const shown = data ? ` The cards below are the last good read, from ${clock(lane.readAt)}, and may be out of date.` : "";
    const label = lane.error.code === "unavailable" ? "Unavailable" : `Error (${lane.error.code})`;
    out.push(el("div", { class: "banner unavailable", role: "alert" }, el("b", { text: label }), `: ${sentence(lane.error.message)}${shown}`));
  }
  if (data && data.stale) {
    const since = data.stale.staleAsOf ? `Stale since ${clock(data.stale.staleAsOf)}` : "Stale";
    out.push(el("div", { class: "banner stale", role: "status" }, el("b", { text: since }), `: ${sentence(data.stale.reason)} The tracker may have changed since.`));
  }
  if (data && data.behind) out.push(el("div", { class: "banner stale", text: "An older answer arrived; reading again." }));
  return out;
}

// How many tasks a column holds: counted to its end when the loader did (``counted``, exact
// unless the count stopped at its bound), else the cards read, more when a page is left.
function countOf(column) {
  return column.counted || { n: column.tasks.length, exact: !column.nextCursor };
}

// A thin bar of the lane's tasks by status, for the shape at a glance.
function mix(columns, total) {
  const words = STATUSES.filter((s) => countOf(columns[s]).n).map((s) => `${countOf(columns[s]).n} ${s}`);
  const bar = el("span", { class: "mix", role: "img", "aria-label": words.join(", "), title: words.join(", ") });
  for (const status of STATUSES) {
    const n = countOf(columns[status]).n;
    if (!n) continue;
    const part = el("i", { class: `s-${status}` });
    part.style.width = `${(100 * n) / total}%`;
    bar.append(part);
  }
  return bar;
}

// Draw (or redraw) one endpoint's lane into ``board``; ``onMore(status)`` loads another page.
export function renderLane(lane, filters, board, onMore) {
  const name = lane.endpoint.name;
  if (!lane.el) {
    lane.el = el("section", { class: "lane", "data-endpoint": name, "aria-labelledby": `lane-${name}` });
    board.append(lane.el);
  }
  const section = lane.el;
  const focused = section.contains(document.activeElement) ? document.activeElement.closest("[data-task-id]") : null;
  section.hidden = Boolean(filters.endpoint) && filters.endpoint !== name;
  const data = lane.data;
  section.dataset.stale = String(Boolean(data && data.stale));
  section.dataset.unavailable = String(Boolean(lane.error));
  section.setAttribute("aria-busy", String(!data && !lane.error));

  let total = 0;
  let more = false;
  for (const status of STATUSES) {
    const counted = countOf(lane.columns[status]);
    total += counted.n;
    more = more || !counted.exact;
  }
  const head = el(
    "header",
    { class: "lane-head" },
    el("h2", { id: `lane-${name}`, text: name }),
    el("span", { class: `provider p-${lane.endpoint.provider}`, text: providerName(lane.endpoint.provider) }),
    data ? el("span", { class: "muted", text: `${total}${more ? "+" : ""} task${total === 1 ? "" : "s"}` }) : null,
    data && total ? mix(lane.columns, total) : null,
    data ? el("span", { class: "muted read-at", title: "when this lane was last read", text: `read ${clock(lane.readAt)}` }) : null,
  );

  const columns = el("div", { class: `columns${lane.error ? " dimmed" : ""}` });
  for (const status of STATUSES) {
    const column = lane.columns[status];
    const shown = column.tasks.filter((task) => matches(task, filters));
    const counted = countOf(column);
    const filtered = filters.text || filters.seat || filters.source;
    const count = !data ? "" : filtered ? `${shown.length}${column.nextCursor ? "+" : ""}` : `${counted.n}${counted.exact ? "" : "+"}`;
    const list = el("div", { class: "cards" });
    for (const task of shown) list.append(card(task, lane));
    if (!data && !lane.error) list.append(skeleton());
    else if (!shown.length) list.append(el("p", { class: "empty", text: filters.text || filters.seat ? "No match" : EMPTY_COLUMN[status] }));
    const box = el(
      "div",
      { class: `column s-${status}`, "data-status": status, role: "group", "aria-label": `${LABELS[status]}, ${name}` },
      el("h3", {}, el("i", { class: "sdot", "aria-hidden": "true" }), LABELS[status], el("span", { class: "count", text: count })),
      list,
    );
    if (column.nextCursor) {
      const button = el("button", { type: "button", class: "more", text: "Show more" });
      button.addEventListener("click", () => onMore(status));
      box.append(button);
    }
    box.hidden = !filters.statuses.has(status);
    columns.append(box);
  }
  const empty = data && !total && !lane.error && !filters.text && !filters.seat ? emptyLane(lane) : null;
  // Unreadable before any good read: nothing is known about its tasks, so no column claims any.
  const body = !data && lane.error ? null : empty || columns;
  section.replaceChildren(head, ...banners(lane), ...(body ? [body] : []));
  if (focused) {
    const again = [...section.querySelectorAll("article.card")].find((node) => node.dataset.taskId === focused.dataset.taskId);
    if (again) again.querySelector("a.open").focus();
  }
}

// The seat filter's options: every seat bound on a loaded card, by its short name.
export function seatOptions(select, lanes, selected) {
  const seats = new Map();
  for (const lane of lanes.values()) {
    for (const column of Object.values(lane.columns)) {
      for (const task of column.tasks) if (task.binding) seats.set(seatKey(task.binding), task.binding);
    }
  }
  const keys = [...seats.keys()].sort();
  if (selected && selected !== "-" && !seats.has(selected)) keys.push(selected);
  const wanted = ["", "-", ...keys];
  const have = [...select.options].map((option) => option.value);
  if (wanted.join("\n") !== have.join("\n")) {
    select.replaceChildren(el("option", { value: "", text: "Anyone" }), el("option", { value: "-", text: "Unassigned" }));
    const counts = {};
    for (const binding of seats.values()) counts[binding.actor] = (counts[binding.actor] || 0) + 1;
    for (const key of keys) {
      const binding = seats.get(key);
      const text = !binding ? key : counts[binding.actor] > 1 ? `${binding.actor} (${binding.lifecycleUid.slice(-6)})` : binding.actor;
      select.append(el("option", { value: key, text }));
    }
  }
  select.value = selected;
}
