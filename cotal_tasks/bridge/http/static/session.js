// The dashboard's session with the bridge: the bearer token (this tab only), reads of the
// API, and board-changed read from /v1/events with fetch (so it can carry the token).

const TOKEN_KEY = "cotal-tasks.token";
const EVENT_SILENCE_MS = 45000; // three keep-alives missed: reconnect

let current = sessionStorage.getItem(TOKEN_KEY);

export class AuthNeeded extends Error {}
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function token() {
  return current;
}

export function setToken(value) {
  current = value || null;
  if (current) sessionStorage.setItem(TOKEN_KEY, current);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function headers(accept) {
  const out = { Accept: accept };
  if (current) out.Authorization = `Bearer ${current}`;
  return out;
}

export async function api(path) {
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

function parseBlock(block) {
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
  if (event !== "board-changed" || !data.length) return null;
  try {
    return JSON.parse(data.join("\n"));
  } catch {
    return null; // not JSON: ignore it; the schedule still refreshes
  }
}

// Follow /v1/events for ever: ``onWake(data)`` per board-changed, ``onLive(true | false |
// "auth")`` as the stream comes and goes, ``onAuth(reason)`` when it needs a token.
export async function listen(onWake, onLive, onAuth) {
  let delay = 1000;
  for (;;) {
    const abort = new AbortController();
    let watchdog = null;
    const arm = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => abort.abort(), EVENT_SILENCE_MS);
    };
    try {
      arm();
      const response = await fetch("/v1/events", { headers: headers("text/event-stream"), signal: abort.signal, cache: "no-store" });
      if (response.status === 401) {
        clearTimeout(watchdog);
        onLive("auth");
        onAuth("the event stream needs a token");
        await new Promise((resolve) => document.addEventListener("cotal-token", resolve, { once: true }));
        continue;
      }
      if (!response.ok || !response.body) throw new Error(`events answered ${response.status}`);
      onLive(true);
      delay = 1000;
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        arm();
        buffer = (buffer + value).replace(/\r\n?/g, "\n");
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const wake = parseBlock(buffer.slice(0, cut));
          buffer = buffer.slice(cut + 2);
          if (wake) onWake(wake);
        }
      }
    } catch {
      // fall through to reconnect
    }
    clearTimeout(watchdog);
    onLive(false);
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 15000);
  }
}

const HISTORY_PAGES = 100; // 100 000 entries at most on the first read; then only what is new

// Read what was appended to an endpoint's history since ``have.follow`` into ``have``.
export async function followHistory(name, have) {
  if (have.loading) {
    have.again = true; // read once more when this read ends: something changed meanwhile
    return;
  }
  have.loading = true;
  have.again = false;
  try {
    let cursor = have.follow;
    const fresh = [];
    let pages = 0;
    for (; pages < HISTORY_PAGES; pages += 1) {
      const query = new URLSearchParams();
      if (cursor) query.set("cursor", cursor);
      const page = await api(`/v1/endpoints/${encodeURIComponent(name)}/history?${query}`);
      fresh.push(...page.entries);
      cursor = page.followCursor || cursor;
      if (!page.nextCursor) break;
    }
    have.entries.push(...fresh);
    have.follow = cursor;
    have.truncated = pages >= HISTORY_PAGES;
    have.readAt = Date.now();
    have.error = null;
  } catch (error) {
    have.error = error.message;
    throw error;
  } finally {
    have.loading = false;
  }
  if (have.again) await followHistory(name, have);
}

// /healthz per endpoint (with the token, for a bridge that tells more to a reader).
export async function readHealth() {
  const response = await fetch("/healthz", { headers: headers("application/json"), cache: "no-store" });
  const body = await response.json();
  return body.endpoints || {};
}

const SAMPLE = /^(cotal_tasks_sync_requests_total|cotal_tasks_rate_limit_wait_seconds_total)\{([^}]*)\} ([0-9.eE+-]+)$/;

// What /metrics says of each endpoint's tracker traffic: requests by HTTP status, and the
// seconds spent waiting out rate limits (since the bridge started).
export async function readTraffic() {
  const response = await fetch("/metrics", { headers: headers("text/plain"), cache: "no-store" });
  if (!response.ok) return {};
  const text = await response.text();
  const out = {};
  for (const line of text.split("\n")) {
    const found = SAMPLE.exec(line);
    if (!found) continue;
    const labels = Object.fromEntries([...found[2].matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    const entry = (out[labels.endpoint] ||= { requests: {}, waited: 0 });
    const value = Number(found[3]);
    if (found[1] === "cotal_tasks_rate_limit_wait_seconds_total") entry.waited += value;
    else entry.requests[labels.status] = (entry.requests[labels.status] || 0) + value;
  }
  return out;
}
