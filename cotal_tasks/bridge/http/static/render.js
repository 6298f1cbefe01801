// Rendering for the cotal-tasks dashboard: lanes, columns, cards, badges, evidence.
// Every value from the API is set as text (textContent); only http(s) evidence refs are links.

export const STATUSES = ["open", "claimed", "blocked", "done", "dropped"];
export const LABELS = { open: "Open", claimed: "Claimed", blocked: "Blocked", done: "Done", dropped: "Dropped" };
const EVIDENCE_SHOWN = 5;

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("data-")) node.setAttribute(key, String(value));
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function sentence(text) {
  const trimmed = String(text).trim();
  return /[.!?]$/.test(trimmed) ? trimmed : `${trimmed}.`;
}

export function clock(ms) {
  if (!ms) return "never";
  return new Date(ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

export function seatKey(binding) {
  return `${binding.owner}.${binding.actor}/${binding.lifecycleUid}`;
}

function visible(task, filters) {
  const seat = filters.seat;
  if (!seat) return true;
  if (seat === "-") return !task.binding;
  return Boolean(task.binding) && seatKey(task.binding) === seat;
}

// Draw (or redraw) one endpoint's lane into ``board``; ``onMore(status)`` loads another page.
export function renderLane(lane, filters, board, onMore) {
  const name = lane.endpoint.name;
  if (!lane.el) {
    lane.el = el("section", { class: "lane", "data-endpoint": name });
    board.append(lane.el);
  }
  const section = lane.el;
  section.hidden = Boolean(filters.endpoint) && filters.endpoint !== name;
  const data = lane.data;
  section.dataset.stale = String(Boolean(data && data.stale));
  section.dataset.unavailable = String(Boolean(lane.error));

  const meta = [lane.endpoint.provider];
  if (data) meta.push(`changeSeq ${data.changeSeq}`, `read ${clock(data.observedAt)}`);
  const presence = data ? data.presence : null;
  const head = el(
    "header",
    { class: "lane-head" },
    el("h2", { text: name }),
    el("span", { class: "muted", text: meta.join(" · ") }),
    presence
      ? el("span", {
          class: `pill view-${presence.view}`,
          "data-presence": presence.view,
          title: presence.reason || "",
          text: `presence: ${presence.view}`,
        })
      : null,
  );

  const banners = [];
  if (lane.error) {
    const shown = data ? ` Showing the last good read, from ${clock(lane.readAt)}.` : "";
    banners.push(
      el("div", { class: "banner unavailable", role: "alert" },
        el("b", { text: lane.error.code === "unavailable" ? "Unavailable" : `Error (${lane.error.code})` }),
        `: ${sentence(lane.error.message)}${shown}`),
    );
  }
  if (data && data.stale) {
    banners.push(
      el("div", { class: "banner stale", role: "status" },
        el("b", { text: data.stale.staleAsOf ? `Stale since ${clock(data.stale.staleAsOf)}` : "Stale" }),
        `: ${sentence(data.stale.reason)} The provider labels these reads as not current.`),
    );
  }
  if (data && data.behind) {
    banners.push(el("div", { class: "banner stale", text: "An older answer arrived; refreshing again." }));
  }

  const columns = el("div", { class: `columns${lane.error ? " dimmed" : ""}` });
  for (const status of STATUSES) {
    const column = lane.columns[status];
    const shown = column.tasks.filter((task) => visible(task, filters));
    const more = column.nextCursor ? "+" : "";
    const count = data ? `${shown.length}${more}` : "–";
    const list = el("div", { class: "cards" });
    for (const task of shown) list.append(card(task, data ? data.liveness : {}));
    if (!shown.length) list.append(el("p", { class: "empty muted", text: data ? "No tasks" : "Not read" }));
    const box = el(
      "div",
      { class: `column s-${status}`, "data-status": status },
      el("h3", {}, LABELS[status], el("span", { class: "count", text: count })),
      list,
    );
    if (column.nextCursor) {
      const button = el("button", { type: "button", class: "more", text: "Load more" });
      button.addEventListener("click", () => onMore(status));
      box.append(button);
    }
    box.hidden = !filters.statuses.has(status);
    columns.append(box);
  }
  section.replaceChildren(head, ...banners, columns);
}

function livenessBadge(liveness) {
  const view = liveness ? liveness.view : "unpopulated";
  const seat = liveness ? liveness.seat : "unknown";
  let text;
  if (view === "unpopulated") text = "liveness unknown";
  else if (view === "stale") text = seat === "unknown" ? "not seen" : `was ${seat === "replaced" ? "replaced" : seat}`;
  else if (seat === "replaced") text = "offline · new incarnation";
  else text = seat;
  const title = liveness && liveness.lastSeen ? `last card ${clock(liveness.lastSeen)}` : "";
  return el(
    "span",
    { class: `badge view-${view} seat-${seat}`, "data-view": view, "data-seat": seat, title },
    el("i", { class: "dot" }),
    text,
    el("small", { text: view }),
  );
}

function evidenceItem(entry) {
  let target = null;
  if (/^https?:\/\//i.test(entry.ref)) {
    try {
      const url = new URL(entry.ref);
      if (url.protocol === "http:" || url.protocol === "https:") target = url.href;
    } catch {
      target = null;
    }
  }
  const ref = target
    ? el("a", { href: target, rel: "noopener noreferrer nofollow", target: "_blank", text: entry.ref })
    : el("span", { class: "ref", text: entry.ref });
  return el("li", {}, el("span", { class: "kind", text: entry.kind }), ref);
}

function card(task, liveness) {
  const node = el("article", { class: "card", "data-task-id": task.taskId });
  node.append(el("h4", { text: task.title }));
  const ids = el("div", { class: "ids" }, el("code", { text: task.taskId }));
  if (task.statusSource) ids.append(el("span", { class: "source", title: "the provider's own state", text: task.statusSource }));
  node.append(ids);
  if (task.brief) node.append(el("p", { class: "brief", text: task.brief }));
  const binding = task.binding;
  if (binding) {
    const env = binding.environmentWithheld
      ? el("span", { class: "env withheld", text: "environment withheld" })
      : binding.environment
        ? el("span", { class: "env", title: "environment", text: binding.environment })
        : el("span", { class: "env muted", text: "environment unknown" });
    node.append(
      el("div", { class: "binding", "data-bound": "true" },
        el("div", { class: "who" }, el("b", { text: `${binding.owner}.${binding.actor}` }), livenessBadge(liveness[seatKey(binding)])),
        el("code", { class: "uid", title: "lifecycle uid", text: binding.lifecycleUid }),
        env),
    );
  } else {
    node.append(el("div", { class: "binding unbound", "data-bound": "false", text: "unassigned" }));
  }
  const evidence = task.evidence || [];
  if (evidence.length) {
    const list = el("ul", { class: "evidence" });
    for (const entry of evidence.slice(-EVIDENCE_SHOWN)) list.append(evidenceItem(entry));
    if (evidence.length > EVIDENCE_SHOWN) list.append(el("li", { class: "muted", text: `+${evidence.length - EVIDENCE_SHOWN} earlier` }));
    node.append(list);
  }
  return node;
}
