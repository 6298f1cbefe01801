// The cotal-tasks dashboard: one page over every endpoint the bridge serves.
// No build step and no dependency. Data comes from the read API (/v1/endpoints/{name}/board,
// one request per status column); /v1/events wakes a refresh on board-changed, and the page
// also refreshes on its own schedule, because a missed event must never mean "no change".
// Drawing is in render.js.

import { LABELS, STATUSES, clock, el, renderLane as draw, seatKey } from "./render.js";

const TOKEN_KEY = "cotal-tasks.token";
const REFRESH_MS = 30000;
const COLUMN_LIMIT = 50;
const EVENT_SILENCE_MS = 45000; // three keep-alives missed: reconnect

const state = {
  token: sessionStorage.getItem(TOKEN_KEY),
  endpoints: [],
  lanes: new Map(),
  filters: { endpoint: "", statuses: new Set(STATUSES), seat: "" },
  pending: new Map(),
};

class AuthNeeded extends Error {}
class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const $ = (id) => document.getElementById(id);

function headers(accept) {
  const out = { Accept: accept };
  if (state.token) out.Authorization = `Bearer ${state.token}`;
  return out;
}

async function api(path) {
  let response;
  try {
    response = await fetch(path, { headers: headers("application/json"), cache: "no-store" });
  } catch {
    throw new ApiError(0, "unreachable", "the bridge did not answer; is it running?");
  }
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  const error = body && body.error ? body.error : {};
  if (response.status === 401) throw new AuthNeeded(error.message || "a token is needed");
  if (!response.ok) {
    throw new ApiError(response.status, error.code || String(response.status), error.message || response.statusText);
  }
  return body;
}

// ---- filters (kept in the address bar's #fragment, so a reload keeps them) ----------------

function readFilters() {
  const params = new URLSearchParams(location.hash.slice(1));
  state.filters.endpoint = params.get("endpoint") || "";
  state.filters.seat = params.get("seat") || "";
  const statuses = (params.get("status") || "").split(",").filter((s) => STATUSES.includes(s));
  state.filters.statuses = new Set(statuses.length ? statuses : STATUSES);
}

function writeFilters() {
  const params = new URLSearchParams();
  const f = state.filters;
  if (f.endpoint) params.set("endpoint", f.endpoint);
  if (f.seat) params.set("seat", f.seat);
  if (f.statuses.size !== STATUSES.length) params.set("status", [...f.statuses].join(","));
  const hash = params.toString();
  history.replaceState(null, "", hash ? `#${hash}` : location.pathname);
}

function setUpFilters() {
  const box = $("f-status");
  for (const status of STATUSES) {
    const input = el("input", { type: "checkbox", value: status, "data-status": status });
    input.checked = state.filters.statuses.has(status);
    box.append(el("label", { class: `chip s-${status}` }, input, LABELS[status]));
  }
  $("filters").addEventListener("change", () => {
    state.filters.endpoint = $("f-endpoint").value;
    state.filters.seat = $("f-seat").value;
    state.filters.statuses = new Set(
      [...box.querySelectorAll("input:checked")].map((input) => input.value),
    );
    writeFilters();
    renderAll();
  });
  $("filters").addEventListener("submit", (event) => event.preventDefault());
}

function refreshSeatOptions() {
  const select = $("f-seat");
  const seats = new Set();
  for (const lane of state.lanes.values()) {
    for (const column of Object.values(lane.columns)) {
      for (const task of column.tasks) if (task.binding) seats.add(seatKey(task.binding));
    }
  }
  if (state.filters.seat && state.filters.seat !== "-") seats.add(state.filters.seat);
  const wanted = ["", "-", ...[...seats].sort()];
  const have = [...select.options].map((option) => option.value);
  if (wanted.join("\n") === have.join("\n")) return;
  select.replaceChildren(el("option", { value: "", text: "any" }), el("option", { value: "-", text: "unbound" }));
  for (const key of [...seats].sort()) {
    const [principal, uid] = key.split("/");
    select.append(el("option", { value: key, text: `${principal} · ${uid.slice(0, 8)}…` }));
  }
  select.value = state.filters.seat;
}

// ---- loading ------------------------------------------------------------------------------

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
    $("space").textContent = `space ${data.space}`;
    state.endpoints = data.endpoints;
    const select = $("f-endpoint");
    select.replaceChildren(el("option", { value: "", text: "all" }));
    for (const endpoint of data.endpoints) {
      if (!state.lanes.has(endpoint.name)) state.lanes.set(endpoint.name, emptyLane(endpoint));
      select.append(el("option", { value: endpoint.name, text: endpoint.name }));
    }
    select.value = state.filters.endpoint;
    renderAll();
    await refreshAll();
    return true;
  } catch (error) {
    if (error instanceof AuthNeeded) showAuth(error.message);
    else showNotice(`The bridge could not be read: ${error.message}`);
    return false;
  }
}

async function loadColumn(name, status, pages) {
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
  return { tasks, nextCursor: cursor, pages, page: last };
}

async function refreshEndpoint(name) {
  const lane = state.lanes.get(name);
  if (!lane) return;
  try {
    const loaded = await Promise.all(STATUSES.map((s) => loadColumn(name, s, lane.columns[s].pages)));
    const pages = loaded.map((column) => column.page);
    const changeSeq = Math.max(...pages.map((page) => page.changeSeq));
    const liveness = Object.assign({}, ...pages.map((page) => page.liveness));
    const stale = pages.map((page) => page.stale).find(Boolean) || null;
    const presence = pages[pages.length - 1].presence;
    const observedAt = Math.max(...pages.map((page) => page.observedAt));
    const behind = changeSeq < lane.maxSeq; // never a rollback: an older answer, refresh again
    STATUSES.forEach((status, i) => {
      lane.columns[status] = { tasks: loaded[i].tasks, nextCursor: loaded[i].nextCursor, pages: loaded[i].pages };
    });
    lane.maxSeq = Math.max(lane.maxSeq, changeSeq);
    lane.data = { changeSeq, liveness, stale, presence, observedAt, behind };
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
  $("refreshed").textContent = `refreshed ${clock(Date.now())}`;
}

async function refreshAll() {
  await Promise.all([...state.lanes.keys()].map(refreshEndpoint));
}

function scheduleRefresh(name, delay = 150) {
  if (state.pending.has(name)) return;
  state.pending.set(
    name,
    setTimeout(() => {
      state.pending.delete(name);
      refreshEndpoint(name);
    }, delay),
  );
}

// ---- board-changed, read from /v1/events with fetch (so it can carry the bearer token) ----

function setLive(stateName, text) {
  const pill = $("live");
  pill.dataset.state = stateName;
  pill.textContent = text;
}

function handleBlock(block) {
  let event = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  if (event !== "board-changed" || !data.length) return;
  try {
    const wake = JSON.parse(data.join("\n"));
    if (state.lanes.has(wake.endpoint)) scheduleRefresh(wake.endpoint);
  } catch {
    // not JSON: ignore it; the schedule still refreshes
  }
}

async function listen() {
  let delay = 1000;
  let first = true;
  for (;;) {
    const abort = new AbortController();
    let watchdog = null;
    const arm = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => abort.abort(), EVENT_SILENCE_MS);
    };
    try {
      arm();
      const response = await fetch("/v1/events", {
        headers: headers("text/event-stream"),
        signal: abort.signal,
        cache: "no-store",
      });
      if (response.status === 401) {
        setLive("auth", "token needed");
        showAuth("the event stream needs a token");
        clearTimeout(watchdog);
        await new Promise((resolve) => document.addEventListener("cotal-token", resolve, { once: true }));
        continue;
      }
      if (!response.ok || !response.body) throw new Error(`events answered ${response.status}`);
      setLive("live", "live");
      delay = 1000;
      if (!first) refreshAll(); // catch up on whatever changed while the stream was down
      first = false;
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        arm();
        buffer = (buffer + value).replace(/\r\n?/g, "\n");
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          handleBlock(buffer.slice(0, cut));
          buffer = buffer.slice(cut + 2);
        }
      }
    } catch {
      // fall through to reconnect
    }
    clearTimeout(watchdog);
    setLive("down", "reconnecting…");
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 15000);
  }
}

// ---- auth ---------------------------------------------------------------------------------

function showAuth(reason) {
  $("auth-reason").textContent = reason;
  $("auth").hidden = false;
  $("board").hidden = true;
  if (state.token) {
    state.token = null;
    sessionStorage.removeItem(TOKEN_KEY);
  }
  $("forget").hidden = true;
}

function hideAuth() {
  $("auth").hidden = true;
  $("board").hidden = false;
  $("forget").hidden = !state.token;
}

function setUpAuth() {
  $("auth-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    state.token = $("auth-token").value.trim();
    $("auth-token").value = "";
    sessionStorage.setItem(TOKEN_KEY, state.token);
    if (await loadEndpoints()) document.dispatchEvent(new Event("cotal-token"));
  });
  $("forget").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    location.reload();
  });
}

function showNotice(text) {
  const notice = $("notice");
  notice.textContent = text;
  notice.hidden = false;
}

// ---- rendering ----------------------------------------------------------------------------

function renderLane(lane) {
  draw(lane, state.filters, $("board"), (status) => {
    lane.columns[status].pages += 1;
    refreshEndpoint(lane.endpoint.name);
  });
}

function renderAll() {
  for (const lane of state.lanes.values()) renderLane(lane);
}

// ---- start --------------------------------------------------------------------------------

async function start() {
  readFilters();
  setUpFilters();
  setUpAuth();
  window.addEventListener("hashchange", () => {
    readFilters();
    for (const input of $("f-status").querySelectorAll("input")) input.checked = state.filters.statuses.has(input.value);
    $("f-endpoint").value = state.filters.endpoint;
    $("f-seat").value = state.filters.seat;
    renderAll();
  });
  while (!(await loadEndpoints())) {
    if (!$("auth").hidden) {
      await new Promise((resolve) => document.addEventListener("cotal-token", resolve, { once: true }));
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 5000));
  }
  listen();
  setInterval(refreshAll, REFRESH_MS);
}

start();
