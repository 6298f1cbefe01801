// Flow from the history: the cumulative flow of the five statuses over a window, and how
// long tasks stay claimed or blocked. Computed here from /v1/endpoints/{name}/history;
// drawn as inline SVG, with the same numbers in a table.

import { icon, svgNode } from "./icons.js";
import { LABELS, STATUSES, el, span } from "./render.js";

export const WINDOWS = {
  "24h": { label: "24 hours", ms: 24 * 3600e3, steps: 24 },
  "7d": { label: "7 days", ms: 7 * 86400e3, steps: 28 },
  "30d": { label: "30 days", ms: 30 * 86400e3, steps: 30 },
};
const STACK = ["done", "dropped", "blocked", "claimed", "open"]; // bottom to top
const H = 220;
const PAD = { left: 36, right: 12, top: 10, bottom: 26 };

// Entries in time order; entries with the same time keep the log's order.
function byTime(entries) {
  return entries.map((entry, i) => [entry, i]).sort((a, b) => a[0].at - b[0].at || a[1] - b[1]).map(([entry]) => entry);
}

// The count of tasks in each status at each of ``steps + 1`` times from ``start`` to ``end``:
// a task's status at t is that of its last entry at or before t.
export function flowCounts(entries, start, end, steps) {
  const times = [];
  for (let i = 0; i <= steps; i += 1) times.push(Math.round(start + ((end - start) * i) / steps));
  const sorted = byTime(entries);
  const current = new Map();
  const counts = Object.fromEntries(STATUSES.map((s) => [s, 0]));
  const out = [];
  let next = 0;
  for (const t of times) {
    while (next < sorted.length && sorted[next].at <= t) {
      const entry = sorted[next];
      const before = current.get(entry.taskId);
      if (before) counts[before] -= 1;
      counts[entry.status] += 1;
      current.set(entry.taskId, entry.status);
      next += 1;
    }
    out.push({ at: t, counts: { ...counts } });
  }
  return out;
}

function rank(sorted, q) {
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)];
}

// Each stint a task spent claimed or blocked (from the entry that entered the status to the
// next entry that left it, or now) that overlaps the window: count, median and p90.
export function stints(entries, start, now) {
  const perTask = new Map();
  for (const entry of byTime(entries)) {
    if (!perTask.has(entry.taskId)) perTask.set(entry.taskId, []);
    perTask.get(entry.taskId).push(entry);
  }
  const found = { claimed: [], blocked: [] };
  const ongoing = { claimed: 0, blocked: 0 };
  for (const list of perTask.values()) {
    let i = 0;
    while (i < list.length) {
      const status = list[i].status;
      let j = i + 1;
      while (j < list.length && list[j].status === status) j += 1;
      if (status in found) {
        const end = j < list.length ? list[j].at : now;
        if (end >= start) {
          found[status].push(end - list[i].at);
          if (j >= list.length) ongoing[status] += 1;
        }
      }
      i = j;
    }
  }
  const out = {};
  for (const status of Object.keys(found)) {
    const sorted = found[status].sort((a, b) => a - b);
    out[status] = sorted.length
      ? { n: sorted.length, ongoing: ongoing[status], median: rank(sorted, 0.5), p90: rank(sorted, 0.9) }
      : { n: 0, ongoing: 0, median: null, p90: null };
  }
  return out;
}

function tick(ms) {
  return new Date(ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

// The local midnights between ``start`` and ``end`` (a day is not always 24 h: the clock
// change), each day's tick on the axis.
export function midnights(start, end) {
  const day = new Date(start);
  day.setHours(24, 0, 0, 0);
  const out = [];
  while (day.getTime() <= end) {
    out.push(day.getTime());
    day.setDate(day.getDate() + 1);
  }
  return out;
}

// The room a day's label takes: "Tue 12", "Tue", or "Dec 12" on every n-th day.
const DAY_FORMATS = [
  { px: 52, every: false, name: (d) => `${d.toLocaleDateString([], { weekday: "short" })} ${d.getDate()}` },
  { px: 30, every: false, name: (d) => d.toLocaleDateString([], { weekday: "short" }) },
  { px: 48, every: true, name: (d) => d.toLocaleDateString([], { month: "short", day: "numeric" }) },
];

// The day axis of a window of days: a tick at each midnight and each day's name centred on
// its part of the window, every day when they fit (7 days at any width), else every n-th
// (30 days on a phone), never a day skipped at random.
function dayAxis(svg, start, end, at) {
  const ticks = midnights(start, end);
  const bounds = [start, ...ticks, end];
  const perDay = at(start + 86400e3) - at(start);
  const style = DAY_FORMATS.find((f) => f.every || perDay >= f.px);
  const every = style.every ? Math.max(1, Math.ceil(style.px / perDay)) : 1;
  for (const t of ticks) {
    svg.append(svgNode("line", { x1: at(t), x2: at(t), y1: H - PAD.bottom, y2: H - PAD.bottom + 4, class: "tick" }));
  }
  for (let i = 0; i + 1 < bounds.length; i += 1) {
    const from = bounds[i];
    const to = bounds[i + 1];
    if (at(to) - at(from) < Math.min(style.px, perDay) * 0.75) continue; // a sliver of a day at an end
    const date = new Date(from);
    const index = Math.round((from - ticks[0]) / 86400e3);
    if (i > 0 && index % every) continue;
    const label = svgNode("text", { x: (at(from) + at(to)) / 2, y: H - 8, class: "axis day", "text-anchor": "middle", "data-day": isoDay(date) });
    label.textContent = style.name(date);
    const full = svgNode("title");
    full.textContent = date.toLocaleDateString([], { weekday: "long", month: "long", day: "numeric" });
    label.append(full);
    svg.append(label);
  }
}

function isoDay(date) {
  const pad = (n) => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
}

function chart(points, windowKey, name, W) {
  const totals = points.map((p) => STATUSES.reduce((sum, s) => sum + p.counts[s], 0));
  const most = Math.max(1, ...totals);
  const step = Math.max(1, Math.ceil(most / 4));
  const rows = Math.ceil(most / step);
  const top = step * rows;
  const x = (i) => PAD.left + ((W - PAD.left - PAD.right) * i) / (points.length - 1);
  const y = (v) => H - PAD.bottom - ((H - PAD.top - PAD.bottom) * v) / top;
  const id = `flow-title-${name}`;
  const svg = svgNode("svg", { viewBox: `0 0 ${W} ${H}`, class: "flow-chart", role: "img", "aria-labelledby": id });
  const title = svgNode("title", { id });
  const last = points[points.length - 1].counts;
  title.textContent = `Cumulative flow of ${name} over the last ${WINDOWS[windowKey].label}: now ${STATUSES.map((s) => `${last[s]} ${s}`).join(", ")}`;
  svg.append(title);
  for (let g = 0; g <= rows; g += 1) {
    const value = step * g;
    svg.append(svgNode("line", { x1: PAD.left, x2: W - PAD.right, y1: y(value), y2: y(value), class: "grid" }));
    const label = svgNode("text", { x: PAD.left - 6, y: y(value) + 4, class: "axis", "text-anchor": "end" });
    label.textContent = String(value);
    svg.append(label);
  }
  const base = points.map(() => 0);
  for (const status of STACK) {
    const upper = points.map((p, i) => base[i] + p.counts[status]);
    const along = points.map((_, i) => `${x(i).toFixed(1)},${y(upper[i]).toFixed(1)}`);
    const back = points.map((_, i) => `${x(i).toFixed(1)},${y(base[i]).toFixed(1)}`).reverse();
    svg.append(svgNode("polygon", { points: [...along, ...back].join(" "), class: `band s-${status}`, "data-status": status }));
    upper.forEach((v, i) => { base[i] = v; });
  }
  if (windowKey !== "24h") {
    const start = points[0].at;
    const end = points[points.length - 1].at;
    dayAxis(svg, start, end, (t) => PAD.left + ((W - PAD.left - PAD.right) * (t - start)) / (end - start));
    return svg;
  }
  const every = Math.ceil(points.length / Math.max(2, Math.floor(W / 110)));
  points.forEach((p, i) => {
    if (i % every && i !== points.length - 1) return;
    const label = svgNode("text", { x: x(i), y: H - 8, class: "axis", "text-anchor": i === 0 ? "start" : i === points.length - 1 ? "end" : "middle" });
    label.textContent = i === points.length - 1 ? "now" : tick(p.at);
    svg.append(label);
  });
  return svg;
}

function table(points) {
  const head = el("tr", {}, el("th", { scope: "col", text: "At" }), ...STATUSES.map((s) => el("th", { scope: "col", text: LABELS[s] })));
  const body = points.map((p) => el(
    "tr",
    { "data-at": p.at },
    el("th", { scope: "row", text: new Date(p.at).toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" }) }),
    ...STATUSES.map((s) => el("td", { "data-status": s, text: String(p.counts[s]) })),
  ));
  return el("table", { class: "flow-table" }, el("thead", {}, head), el("tbody", {}, ...body));
}

function durationTile(status, stat) {
  const body = stat.n
    ? [
      el("div", { class: "figure" }, el("b", { "data-stat": "median", text: span(stat.median) }), el("small", { text: "median" })),
      el("div", { class: "figure" }, el("b", { "data-stat": "p90", text: span(stat.p90) }), el("small", { text: "p90" })),
    ]
    : [el("p", { class: "muted", text: `No task was ${status} in this window.` })];
  const note = stat.n ? `${stat.n} stint${stat.n === 1 ? "" : "s"}${stat.ongoing ? `, ${stat.ongoing} still ${status}` : ""}` : "";
  return el(
    "div",
    { class: `tile time-in s-${status}`, "data-status": status, "data-n": stat.n },
    el("h4", {}, icon("clock"), `Time ${status}`),
    el("div", { class: "figures" }, ...body),
    note ? el("p", { class: "muted small", text: note }) : null,
  );
}

// The flow card of one endpoint: window picker, chart, legend, table, time in status.
export function flowCard(name, history, windowKey, now, onWindow, width) {
  const box = el("div", { class: "tile flow-tile", "data-endpoint": name });
  const picker = el("div", { class: "segmented", role: "group", "aria-label": "Window" });
  for (const [key, spec] of Object.entries(WINDOWS)) {
    const button = el("button", { type: "button", "data-window": key, "aria-pressed": String(key === windowKey), text: spec.label });
    button.addEventListener("click", () => onWindow(key));
    picker.append(button);
  }
  box.append(el("div", { class: "tile-head" }, el("h4", { text: "Cumulative flow" }), picker));
  if (history.error && !history.entries.length) {
    box.append(el("p", { class: "banner unavailable", text: `The history could not be read: ${history.error}` }));
    return box;
  }
  const spec = WINDOWS[windowKey];
  const points = flowCounts(history.entries, now - spec.ms, now, spec.steps);
  const last = points[points.length - 1].counts;
  const legend = el("ul", { class: "legend" });
  for (const status of STATUSES) { // the board's column order
    legend.append(el("li", { "data-status": status }, el("i", { class: `swatch s-${status}`, "aria-hidden": "true" }), LABELS[status], el("b", { text: String(last[status]) })));
  }
  if (history.error) box.append(el("p", { class: "banner stale", role: "status", text: `The history could not be read again (${history.error}); the chart is the read from ${new Date(history.readAt).toLocaleTimeString()}.` }));
  if (history.truncated) box.append(el("p", { class: "banner stale", text: "The history is longer than this page reads at once; the chart covers its first part only." }));
  if (!history.entries.length) {
    box.append(el("div", { class: "chart-empty" }, el("b", { text: "No history yet" }), el("p", { text: "The chart fills in as tasks are created and move between statuses." })));
    return [box];
  }
  box.append(chart(points, windowKey, name, Math.max(280, Math.round(width))), legend);
  box.append(el("details", { class: "as-table" }, el("summary", { text: "The counts as a table" }), el("div", { class: "table-scroll", tabindex: "0", role: "region", "aria-label": `Flow counts of ${name}` }, table(points))));
  const times = stints(history.entries, now - spec.ms, now);
  return [box, el("div", { class: "tiles-row" }, durationTile("claimed", times.claimed), durationTile("blocked", times.blocked))];
}
