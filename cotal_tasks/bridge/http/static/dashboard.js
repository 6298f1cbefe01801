// The cotal-tasks dashboard: one page over every endpoint the bridge serves.
// No build step and no dependency. Data comes from the read API: the board feed
// (/v1/endpoints/{name}/board, one request per status column), the history, get-task and
// /healthz. /v1/events wakes a refresh on board-changed, and the page also refreshes on its
// own schedule, because a missed event must never mean "no change".
// Drawing is in render.js (board), detail.js (task panel) and health.js/flow.js (flow view).

import { Detail } from "./detail.js";
import { moveFocus, setInert, trapFocus } from "./keys.js";
import { renderFlowView } from "./health.js";
import { LABELS, STATUSES, clock, el, renderLane as draw, seatOptions } from "./render.js";
import { api, AuthNeeded, followHistory, listen, readHealth, readTraffic, setToken, token } from "./session.js";

const REFRESH_MS = 30000;
const COLUMN_LIMIT = 50;
const COUNT_PAGES = 10; // pages of summaries read to count a column past its cards

const state = {
  endpoints: [],
  lanes: new Map(),
  history: new Map(),
  health: null,
  healthError: null,
  healthAt: 0,
  filters: { endpoint: "", source: "", statuses: new Set(STATUSES), seat: "", text: "" },
  view: "board",
  window: "7d",
  task: null,
  pending: new Map(),
  live: false,
  liveSince: 0,
};

const $ = (id) => document.getElementById(id);
const detail = new Detail($("detail"), $("detail-body"), api, (name) => {
  const lane = state.lanes.get(name);
  const data = lane && lane.data;
  return { endpoint: lane ? lane.endpoint : { name }, liveness: data ? data.liveness : {}, stale: data ? data.stale : null };
});
let opener = null; // the card link the detail was opened from, to return focus to

// ---- the address bar's #fragment: filters, view, window and the open task ------------------

function readHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  const f = state.filters;
  f.endpoint = params.get("endpoint") || "";
  f.source = params.get("source") || "";
  f.seat = params.get("seat") || "";
  f.text = (params.get("q") || "").slice(0, 200);
  const statuses = (params.get("status") || "").split(",").filter((s) => STATUSES.includes(s));
  f.statuses = new Set(statuses.length ? statuses : STATUSES);
  state.view = params.get("view") === "flow" ? "flow" : "board";
  state.window = params.get("window") || "7d";
  const task = params.get("task");
  const cut = task ? task.indexOf("/") : -1;
  state.task = cut > 0 ? { endpoint: task.slice(0, cut), taskId: task.slice(cut + 1) } : null;
}

function hashOf(changes = {}) {
  const f = state.filters;
  const params = new URLSearchParams();
  const view = "view" in changes ? changes.view : state.view;
  if (view === "flow") params.set("view", "flow");
  if (f.endpoint) params.set("endpoint", f.endpoint);
  if (f.source) params.set("source", f.source);
  if (f.seat) params.set("seat", f.seat);
  if (f.text) params.set("q", f.text);
  if (f.statuses.size !== STATUSES.length) params.set("status", [...f.statuses].join(","));
  if (state.window !== "7d") params.set("window", state.window);
  const task = "task" in changes ? changes.task : state.task;
  if (task) params.set("task", `${task.endpoint}/${task.taskId}`);
  const hash = params.toString();
  return hash ? `#${hash}` : location.pathname;
}

function writeHash(changes = {}, push = false) {
  const target = hashOf(changes);
  if (push) history.pushState(null, "", target);
  else history.replaceState(null, "", target);
  applyHash();
}

function syncControls() {
  const f = state.filters;
  for (const input of $("f-status").querySelectorAll("input")) input.checked = f.statuses.has(input.value);
  $("f-endpoint").value = f.endpoint;
  $("f-source").value = f.source;
  if ($("f-text").value !== f.text) $("f-text").value = f.text;
  refreshSeatOptions();
  for (const link of document.querySelectorAll(".views a")) {
    const current = link.dataset.view === state.view;
    if (current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
    const target = hashOf({ view: link.dataset.view, task: null });
    link.href = target.startsWith("#") ? target : "#"; // a fragment: never a reload
  }
}

function applyHash() {
  readHash();
  syncControls();
  $("board").hidden = state.view !== "board";
  $("flow").hidden = state.view !== "flow";
  renderAll();
  if (state.view === "flow") loadFlow();
  const want = state.task;
  const open = detail.open;
  if (!want && open) closeDetail(false);
  else if (want && (!open || open.endpoint !== want.endpoint || open.taskId !== want.taskId)) {
    $("scrim").hidden = false;
    document.body.classList.add("has-detail");
    setInert(true);
    detail.show(want.endpoint, want.taskId);
  }
}

function closeDetail(updateHash = true) {
  detail.hide();
  $("scrim").hidden = true;
  document.body.classList.remove("has-detail");
  setInert(false);
  if (updateHash) writeHash({ task: null });
  if (opener && document.contains(opener)) opener.focus();
  else if (opener && opener.dataset) {
    const again = document.querySelector(`article.card[data-task-id="${CSS.escape(opener.dataset.for || "")}"] a.open`);
    if (again) again.focus();
  }
  opener = null;
}

// ---- controls --------------------------------------------------------------------------------

function setUpControls() {
  const box = $("f-status");
  for (const status of STATUSES) {
    const input = el("input", { type: "checkbox", value: status, "data-status": status });
    box.append(el("label", { class: `chip s-${status}` }, input, el("i", { class: "sdot", "aria-hidden": "true" }), LABELS[status]));
  }
  $("filters").addEventListener("change", (event) => {
    if (event.target.id === "f-text") return;
    const f = state.filters;
    f.endpoint = $("f-endpoint").value;
    f.source = $("f-source").value;
    f.seat = $("f-seat").value;
    f.statuses = new Set([...box.querySelectorAll("input:checked")].map((input) => input.value));
    writeHash();
  });
  $("f-text").addEventListener("input", () => {
    state.filters.text = $("f-text").value.trim().slice(0, 200);
    writeHash();
  });
  $("filters").addEventListener("submit", (event) => event.preventDefault());
  document.addEventListener("click", (event) => {
    const link = event.target.closest ? event.target.closest("a.open") : null;
    if (!link || event.ctrlKey || event.metaKey || event.shiftKey || event.button) return;
    const card = link.closest("article.card");
    event.preventDefault();
    opener = link;
    opener.dataset.for = card.dataset.taskId;
    writeHash({ task: { endpoint: card.dataset.endpoint, taskId: card.dataset.taskId } }, true);
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && detail.open) {
      event.preventDefault();
      closeDetail();
    } else if (event.key === "/" && !/INPUT|SELECT|TEXTAREA/.test(document.activeElement.tagName)) {
      event.preventDefault();
      $("f-text").focus();
    } else if (event.key === "Tab" && detail.open) {
      trapFocus(event);
    } else if (event.key.startsWith("Arrow") && document.activeElement.matches("article.card a.open")) {
      moveFocus(event);
    }
  });
  $("scrim").addEventListener("click", () => closeDetail());
  $("detail").addEventListener("close-detail", () => closeDetail());
  window.addEventListener("hashchange", applyHash);
  let resizing = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(renderFlow, 120);
  });
  window.addEventListener("popstate", applyHash);
}

function refreshSeatOptions() {
  seatOptions($("f-seat"), state.lanes, state.filters.seat);
}

// ---- loading ---------------------------------------------------------------------------------

function emptyLane(endpoint) {
  const columns = {};
  for (const status of STATUSES) columns[status] = { tasks: [], nextCursor: null, pages: 1 };
  return { endpoint, columns, data: null, error: null, maxSeq: -1, el: null, readAt: 0 };
}

async function loadEndpoints() {
  try {
    const data = await api("/v1/endpoints");
    hideAuth();
    $("notice").hidden = true;
    $("space").textContent = data.space;
    state.endpoints = data.endpoints;
    const select = $("f-endpoint");
    select.replaceChildren(el("option", { value: "", text: "All" }));
    // The sources (repositories, projects) of the endpoints that read several.
    const sources = $("f-source");
    sources.replaceChildren(el("option", { value: "", text: "All" }));
    for (const endpoint of data.endpoints) {
      if (!state.lanes.has(endpoint.name)) state.lanes.set(endpoint.name, emptyLane(endpoint));
      select.append(el("option", { value: endpoint.name, text: endpoint.name }));
      for (const source of endpoint.sources || []) sources.append(el("option", { value: source, text: source }));
    }
    $("f-source-label").hidden = sources.options.length < 2;
    applyHash();
    await refreshAll();
    return true;
  } catch (error) {
    if (error instanceof AuthNeeded) showAuth(error.message);
    else showNotice(`The bridge could not be read: ${error.message}`);
    return false;
  }
}

async function loadColumn(name, status, pages, ceiling) {
  let cursor = null;
  let last = null;
  const tasks = [];
  for (let i = 0; i < pages; i += 1) {
    const query = new URLSearchParams({ status, limit: String(COLUMN_LIMIT) });
    if (cursor) query.set("cursor", cursor);
    last = await api(`/v1/endpoints/${encodeURIComponent(name)}/board?${query}`);
    tasks.push(...last.tasks);
    cursor = last.nextCursor || null;
    if (!cursor) break;
  }
  const rest = cursor ? await countRest(name, status, cursor, ceiling) : { n: 0, exact: true };
  return { tasks, nextCursor: cursor, pages, page: last, counted: { n: tasks.length + rest.n, exact: rest.exact } };
}

// The tasks of a column past the cards read, counted from list-tasks summaries (a board
// cursor continues there) at the endpoint's page ceiling, at most COUNT_PAGES pages: the
// header says "125 tasks", not the cards read and a "+".
async function countRest(name, status, cursor, ceiling) {
  let n = 0;
  for (let i = 0; cursor && i < COUNT_PAGES; i += 1) {
    const query = new URLSearchParams({ status, limit: String(ceiling || COLUMN_LIMIT), cursor });
    const page = await api(`/v1/endpoints/${encodeURIComponent(name)}/tasks?${query}`);
    n += page.tasks.length;
    cursor = page.nextCursor || null;
  }
  return { n, exact: !cursor };
}

async function refreshEndpoint(name) {
  const lane = state.lanes.get(name);
  if (!lane) return;
  try {
    const ceiling = lane.endpoint.pageCeiling;
    const loaded = await Promise.all(STATUSES.map((s) => loadColumn(name, s, lane.columns[s].pages, ceiling)));
    const pages = loaded.map((column) => column.page);
    const changeSeq = Math.max(...pages.map((page) => page.changeSeq));
    const liveness = Object.assign({}, ...pages.map((page) => page.liveness));
    const stale = pages.map((page) => page.stale).find(Boolean) || null;
    const presence = pages[pages.length - 1].presence;
    const behind = changeSeq < lane.maxSeq; // never a rollback: an older answer, read again
    STATUSES.forEach((status, i) => {
      lane.columns[status] = { tasks: loaded[i].tasks, nextCursor: loaded[i].nextCursor, pages: loaded[i].pages, counted: loaded[i].counted };
    });
    lane.maxSeq = Math.max(lane.maxSeq, changeSeq);
    lane.data = { changeSeq, liveness, stale, presence, behind };
    lane.error = null;
    lane.readAt = Date.now();
    if (behind) scheduleRefresh(name, 1500);
  } catch (error) {
    if (error instanceof AuthNeeded) {
      showAuth(error.message);
      return;
    }
    lane.error = { code: error.code || "unavailable", message: error.message, at: Date.now() };
  }
  renderLane(lane);
  refreshSeatOptions();
  $("refreshed").textContent = `updated ${clock(Date.now())}`;
  if (detail.open && detail.open.endpoint === name) detail.refresh(name);
  if (state.view === "flow") loadFlow(name);
}

async function refreshAll() {
  await Promise.all([...state.lanes.keys()].map(refreshEndpoint));
}

function scheduleRefresh(name, delay = 150) {
  if (state.pending.has(name)) return;
  state.pending.set(name, setTimeout(() => {
    state.pending.delete(name);
    refreshEndpoint(name);
  }, delay));
}

async function loadHistory(name) {
  if (!state.history.has(name)) state.history.set(name, { entries: [], follow: null, readAt: 0, loading: false });
  try {
    await followHistory(name, state.history.get(name));
  } catch (error) {
    if (error instanceof AuthNeeded) showAuth(error.message);
  }
}

async function loadHealth() {
  if (Date.now() - state.healthAt < 2000) return; // one read serves a burst of refreshes
  state.healthAt = Date.now();
  try {
    const [health, traffic] = await Promise.all([readHealth(), readTraffic().catch(() => ({}))]);
    state.health = health;
    state.traffic = traffic;
    state.healthError = null;
  } catch (error) {
    state.healthError = error.message || "the bridge did not answer";
  }
}

async function loadFlow(name = null) {
  const names = name ? [name] : state.endpoints.map((e) => e.name);
  await Promise.all([...names.map(loadHistory), loadHealth()]);
  renderFlow();
}

// ---- live state, auth and notices --------------------------------------------------------------

function onLive(live) {
  state.live = live;
  const pill = $("live");
  pill.dataset.state = live === "auth" ? "auth" : live ? "live" : "down";
  pill.textContent = live === "auth" ? "Token needed" : live ? "Live" : "Reconnecting…";
  const paused = $("paused");
  if (live === true) {
    paused.hidden = true;
    if (state.liveSince) refreshAll(); // catch up on whatever changed while the stream was down
    state.liveSince = Date.now();
  } else if (state.liveSince) {
    paused.textContent = `Live updates are paused while the bridge reconnects; the board shows what was read at ${$("refreshed").textContent.replace("updated ", "") || "the last read"}.`;
    paused.hidden = false;
  }
  document.body.dataset.live = String(live === true);
}

function showAuth(reason) {
  $("auth-reason").textContent = reason;
  $("auth").hidden = false;
  $("content").hidden = true;
  setToken(null);
  $("forget").hidden = true;
}

function hideAuth() {
  $("auth").hidden = true;
  $("content").hidden = false;
  $("forget").hidden = !token();
}

function setUpAuth() {
  $("auth-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    setToken($("auth-token").value.trim());
    $("auth-token").value = "";
    if (await loadEndpoints()) document.dispatchEvent(new Event("cotal-token"));
  });
  $("forget").addEventListener("click", () => {
    setToken(null);
    location.reload();
  });
}

function showNotice(text) {
  $("notice").textContent = text;
  $("notice").hidden = false;
}

// ---- rendering -------------------------------------------------------------------------------

function renderLane(lane) {
  draw(lane, state.filters, $("board"), (status) => {
    lane.columns[status].pages += 1;
    refreshEndpoint(lane.endpoint.name);
  });
}

function renderFlow() {
  if (state.view !== "flow") return;
  renderFlowView($("flow"), {
    endpoints: state.endpoints,
    filter: state.filters.endpoint,
    history: state.history,
    health: state.health,
    traffic: state.traffic || {},
    healthError: state.healthError,
    window: state.window,
    onWindow: (key) => {
      state.window = key;
      writeHash();
    },
  });
}

function renderAll() {
  for (const lane of state.lanes.values()) renderLane(lane);
  renderFlow();
}

// ---- start -----------------------------------------------------------------------------------

async function start() {
  setUpControls();
  setUpAuth();
  readHash();
  syncControls();
  while (!(await loadEndpoints())) {
    if (!$("auth").hidden) {
      await new Promise((resolve) => document.addEventListener("cotal-token", resolve, { once: true }));
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 5000));
  }
  listen((wake) => {
    if (state.lanes.has(wake.endpoint)) scheduleRefresh(wake.endpoint);
  }, onLive, showAuth);
  setInterval(refreshAll, REFRESH_MS);
}

start();
