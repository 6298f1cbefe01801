// The flow-and-health view: per endpoint, its flow (flow.js) and a sync panel read from
// /healthz (last successful sync, lag, rate-limit budget left, degraded items by reason,
// leader or follower, webhook deliveries refused) and /metrics (tracker requests and rate-limit waits).

import { WINDOWS, flowCard } from "./flow.js";
import { ago, clock, el, providerName, sentence, span, when } from "./render.js";

function row(label, value, attrs = {}) {
  return [el("dt", { text: label }), el("dd", attrs, value)];
}

function hhmm(ms) {
  return new Date(ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
}

// The budget each pool's latest answer reported (/healthz's sync.rateLimits), one line a
// pool; a reset already past says the figure is from before it.
function budgetLines(pools, now) {
  if (!pools || !pools.length) return "not reported by the tracker";
  const lines = pools.map((pool) => {
    let text = `${pool.remaining}${pool.limit != null ? ` of ${pool.limit}` : ""} left`;
    if (pool.resetAt && pool.resetAt > now) text += `, resets at ${hhmm(pool.resetAt)}`;
    else if (pool.resetAt) text += ` as of ${hhmm(pool.readAt)}, before the reset at ${hhmm(pool.resetAt)}`;
    return el("span", { class: "pool", "data-pool": pool.resource || "", text: pool.resource && pools.length > 1 ? `${pool.resource}: ${text}` : text });
  });
  return el("span", { class: "pools" }, ...lines);
}

// The deliveries the webhook route refused as unauthenticated (/healthz's webhooks): a
// wrong secret on the tracker, or a stranger; the latest with its time and reason.
function refusedHooks(hooks, now) {
  if (!hooks.refused) return "none since the bridge started";
  const count = `${hooks.refused} deliver${hooks.refused === 1 ? "y" : "ies"} since the bridge started (no secret verifies them)`;
  if (!hooks.lastRefusedAt) return count;
  return `${count}; the last ${ago(hooks.lastRefusedAt, now)}, at ${clock(hooks.lastRefusedAt)}: ${sentence(hooks.lastRefusal || "refused")}`;
}

function syncPanel(name, provider, health, traffic, now) {
  const box = el("div", { class: "tile sync-tile", "data-endpoint": name });
  box.append(el("div", { class: "tile-head" }, el("h4", { text: "Sync" }), health ? el("span", { class: `pill ready-${Boolean(health.ready)}`, text: health.ready ? "Ready" : "Not ready" }) : null));
  if (!health) {
    box.append(el("p", { class: "muted", text: "Reading the bridge's health…" }));
    return box;
  }
  const facts = el("dl", { class: "facts" });
  if (health.error) {
    box.append(el("p", { class: "banner unavailable", role: "alert", text: sentence(health.error.message) }));
  }
  const synced = provider !== "board" || health.lastSync || health.sync || health.degraded;
  if (!synced) {
    facts.append(...row("Source", "This board is its own source of truth; nothing to sync."));
  } else {
    const last = health.lastSync;
    facts.append(...row("Last successful sync", last ? `${when(last)} (${ago(last, now)})` : "none yet", { "data-fact": "last-sync" }));
    facts.append(...row("Lag", last ? span(now - last) : "unknown until the first sync", { "data-fact": "lag" }));
    const role = health.sync ? `${health.sync.role === "leader" ? "Leader" : "Follower"}${health.sync.since ? ` since ${clock(health.sync.since)}` : ""}` : "not reported";
    facts.append(...row("This instance", role, { "data-fact": "role" }));
    const seen = traffic || { requests: {}, waited: 0 };
    const total = Object.values(seen.requests).reduce((sum, n) => sum + n, 0);
    const limited = (seen.requests["429"] || 0) + (seen.requests["403"] || 0);
    facts.append(...row("Tracker requests", total ? `${total} since the bridge started${limited ? `, ${limited} refused (403/429)` : ""}` : "none since the bridge started", { "data-fact": "requests" }));
    facts.append(...row("Rate-limit budget", budgetLines(health.sync && health.sync.rateLimits, now), { "data-fact": "rate-budget" }));
    facts.append(...row("Rate-limit waits", seen.waited ? `waited ${span(seen.waited * 1000)} in all` : "no wait so far", { "data-fact": "rate-limit" }));
    if (health.webhooks) facts.append(...row("Webhooks refused", refusedHooks(health.webhooks, now), { "data-fact": "webhooks-refused", class: health.webhooks.refused ? "warn" : null }));
    // An endpoint over several repositories or projects: each one's own state.
    for (const source of (health.sync && health.sync.sources) || []) {
      const state = source.refused ? `refused: ${sentence(source.failing || "")}` : source.failing ? `failing: ${sentence(source.failing)}` : source.lastSync ? `synced ${ago(source.lastSync, now)}` : "not synced yet";
      facts.append(...row(source.source, state, { "data-fact": "source", class: source.failing ? "warn" : null }));
    }
  }
  if (health.stale) {
    const since = health.stale.staleAsOf ? ` Since ${clock(health.stale.staleAsOf)}.` : " No read has succeeded yet.";
    facts.append(...row("Stale", `${sentence(health.stale.reason)}${since}`, { class: "warn", "data-fact": "stale" }));
  }
  box.append(facts);
  const degraded = health.degraded;
  const counts = degraded && degraded.counts ? Object.entries(degraded.counts).filter(([, n]) => n > 0) : [];
  if (synced) {
    const list = el("div", { class: "degraded" }, el("h5", { text: "Degraded items" }));
    if (!counts.length) list.append(el("p", { class: "muted", text: "None since the bridge started: every item mapped in full." }));
    const top = Math.max(1, ...counts.map(([, n]) => n));
    for (const [reason, n] of counts.sort((a, b) => b[1] - a[1])) {
      const bar = el("span", { class: "meter" }, el("i"));
      bar.firstChild.style.width = `${Math.max(4, (100 * n) / top)}%`;
      list.append(el("div", { class: "reason", "data-reason": reason }, el("span", { class: "what", text: reason }), bar, el("b", { text: String(n) })));
    }
    box.append(list);
  }
  return box;
}

// Draw the whole view into ``root``: one section per endpoint shown.
export function renderFlowView(root, view) {
  const now = Date.now();
  const sections = [];
  // Drawn at the width it will have, so its text is never scaled: the main column is two
  // thirds of the view on a wide screen, all of it on a narrow one (see dashboard.css).
  const room = root.clientWidth || document.documentElement.clientWidth;
  const width = (room > 1100 ? (room - 13) * (2 / 3) : room) - 34;
  for (const endpoint of view.endpoints) {
    if (view.filter && view.filter !== endpoint.name) continue;
    const history = view.history.get(endpoint.name) || { entries: [], loading: true };
    const health = view.health ? view.health[endpoint.name] : null;
    const section = el(
      "section",
      { class: "lane flow-lane", "data-endpoint": endpoint.name, "aria-labelledby": `flow-${endpoint.name}` },
      el("header", { class: "lane-head" },
        el("h2", { id: `flow-${endpoint.name}`, text: endpoint.name }),
        el("span", { class: `provider p-${endpoint.provider}`, text: providerName(endpoint.provider) }),
        history.readAt ? el("span", { class: "muted read-at", text: `history read ${clock(history.readAt)}` }) : null),
    );
    const grid = el("div", { class: "flow-grid" });
    const main = el("div", { class: "flow-main" });
    if (history.loading && !history.readAt) main.append(el("div", { class: "tile" }, el("p", { class: "muted", text: "Reading the history…" })));
    else main.append(...flowCard(endpoint.name, history, WINDOWS[view.window] ? view.window : "7d", now, view.onWindow, width));
    grid.append(main, syncPanel(endpoint.name, endpoint.provider, health, view.traffic[endpoint.name], now));
    section.append(grid);
    sections.push(section);
  }
  if (view.healthError) sections.unshift(el("div", { class: "banner unavailable", role: "alert", text: `Health could not be read: ${view.healthError}` }));
  // A redraw keeps what the reader opened and where the focus was.
  const opened = new Set([...root.querySelectorAll("details.as-table[open]")].map((d) => d.closest("[data-endpoint]").dataset.endpoint));
  const active = root.contains(document.activeElement) ? document.activeElement : null;
  const focus = active && active.dataset.window ? [active.closest("section").dataset.endpoint, active.dataset.window] : null;
  root.replaceChildren(...sections);
  for (const details of root.querySelectorAll("details.as-table")) {
    if (opened.has(details.closest("[data-endpoint]").dataset.endpoint)) details.open = true;
  }
  if (focus) {
    const again = root.querySelector(`section[data-endpoint="${CSS.escape(focus[0])}"] [data-window="${focus[1]}"]`);
    if (again) again.focus();
  }
}
