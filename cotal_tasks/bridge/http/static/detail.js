// The task detail panel: the full record and its history, opened from a card (click or
// keyboard) or a deep link (#task=<endpoint>/<taskId>), kept current on board-changed.

import { EVIDENCE_LABEL, icon } from "./icons.js";
import { LABELS, ago, clock, el, httpUrl, lines, livenessOf, providerName, refNode, seatChip, seatKey, sentence, taskHash, trackerRef, when } from "./render.js";

const VERBS = {
  "create-task": "created it",
  "claim-task": "claimed it",
  "update-task": "updated it",
  "release-task": "released it",
  "administer-task": "administered it",
  "add-evidence": "added evidence",
};

function who(actor) {
  const principal = actor.split("/")[0];
  const short = principal.includes(".") ? principal.split(".").slice(1).join(".") : principal;
  return { short: short || actor, long: actor };
}

function fact(label, ...value) {
  return [el("dt", { text: label }), el("dd", {}, ...value)];
}

function historyList(entries) {
  const list = el("ol", { class: "timeline", "aria-label": "History, newest first" });
  let previous = null;
  const items = entries.map((entry) => {
    const actor = who(entry.actor);
    const moved = (previous === null || previous !== entry.status) && entry.command !== "claim-task";
    previous = entry.status;
    const verb = VERBS[entry.command] || entry.command;
    return el(
      "li",
      { class: `event s-${entry.status}`, "data-command": entry.command, "data-status": entry.status },
      el("i", { class: "node", "aria-hidden": "true" }),
      el("div", { class: "event-line" },
        el("b", { class: "actor", title: actor.long, text: actor.short }), ` ${verb}`,
        moved ? el("span", { class: `status-tag s-${entry.status}`, text: LABELS[entry.status] || entry.status }) : null),
      entry.note ? el("p", { class: "note", text: lines(entry.note) }) : null,
      el("time", { datetime: new Date(entry.at).toISOString(), title: when(entry.at), text: ago(entry.at) }),
    );
  });
  list.append(...items.reverse());
  return list;
}

function evidenceList(evidence) {
  if (!evidence.length) return el("p", { class: "muted", text: "No evidence attached yet." });
  const list = el("ul", { class: "evidence" });
  for (const entry of [...evidence].reverse()) {
    const target = httpUrl(entry.ref);
    const ref = target
      ? el("a", { href: target, rel: "noopener noreferrer nofollow", target: "_blank", text: entry.ref })
      : el("code", { class: "ref", text: entry.ref });
    list.append(el("li", { "data-kind": entry.kind }, el("span", { class: `kind ev-${entry.kind}` }, icon(entry.kind), EVIDENCE_LABEL[entry.kind] || entry.kind), ref, el("time", { class: "muted", title: when(entry.addedAt), text: ago(entry.addedAt) })));
  }
  return list;
}

// Why a task shows no seat although its issue may be assigned to a seat's account: a binding
// needs the seat's lifecycle (which run of it), and the tracker knows only the account.
function unboundNote(endpoint) {
  if (!endpoint || !endpoint.seatAccounts) return null;
  const tracker = providerName(endpoint.provider);
  return el("p", { class: "muted small why-unbound" }, `If this issue is assigned on ${tracker} to a seat's account, the account is a seat's, but no lifecycle of that seat is known until the seat claims the task or is bound to it (or its presence is seen in the space), so nobody is shown as working on it yet.`);
}

function bindingFacts(binding, liveness, endpoint) {
  if (!binding) return fact("Seat", el("span", { class: "muted", text: "Unassigned" }), unboundNote(endpoint));
  const live = livenessOf(liveness);
  const env = binding.environmentWithheld
    ? el("span", { class: "muted", text: "withheld by its seat" })
    : binding.environment ? el("code", { text: binding.environment }) : el("span", { class: "muted", text: "not given" });
  return [
    ...fact("Seat", seatChip(binding, liveness), el("span", { class: "principal", text: ` ${binding.owner}.${binding.actor}` })),
    ...fact("Presence", live ? live.text : "not published in this space"),
    ...fact("Seat session", el("span", { class: "uid", title: `lifecycle uid ${binding.lifecycleUid}`, text: `…${binding.lifecycleUid.slice(-6)} (a restarted seat is a new session)` })),
    ...fact("Environment", env),
    ...fact("Bound", `${when(binding.boundAt)} by ${who(binding.boundBy).short}`),
  ];
}

// The tracker's page as a button when there is one, and this detail's own link.
function actions(task, endpoint, name) {
  const ref = trackerRef(task, endpoint);
  const row = el("div", { class: "actions" });
  if (ref.href) {
    row.append(el("a", { class: "button", href: ref.href, target: "_blank", rel: "noopener noreferrer nofollow" }, `Open the ${ref.kind}`, icon("external")));
  }
  const link = el("a", { class: "button quiet permalink", href: taskHash(name, task.taskId), title: "Copy a link that opens this task's detail" }, "Copy link");
  link.addEventListener("click", async (event) => {
    event.preventDefault(); // the page keeps its filters; the link is for elsewhere
    try {
      await navigator.clipboard.writeText(link.href);
      link.textContent = "Link copied";
    } catch {
      link.textContent = "Copy the address of this link";
    }
  });
  row.append(link);
  return row;
}

// The panel's state and drawing; ``api(path)`` reads the API, ``context(name)`` returns the
// endpoint record and its liveness map.
export class Detail {
  constructor(root, body, api, context) {
    this.root = root;
    this.body = body;
    this.api = api;
    this.context = context;
    this.open = null;
  }

  async show(endpoint, taskId) {
    this.open = { endpoint, taskId, task: null, entries: [], follow: null, error: null, readAt: 0 };
    this.root.hidden = false;
    this.draw();
    await this.refresh(endpoint);
    const close = this.body.querySelector(".close");
    if (close && !this.root.contains(document.activeElement)) close.focus();
  }

  hide() {
    this.open = null;
    this.root.hidden = true;
    this.body.replaceChildren();
  }

  refresh(endpoint) {
    // One read at a time, so a burst of board-changed never appends an entry twice.
    this.chain = (this.chain || Promise.resolve()).then(() => this.read(endpoint));
    return this.chain;
  }

  async read(endpoint) {
    const open = this.open;
    if (!open || open.endpoint !== endpoint) return;
    const base = `/v1/endpoints/${encodeURIComponent(endpoint)}`;
    try {
      const task = await this.api(`${base}/tasks/${encodeURIComponent(open.taskId)}`);
      const entries = [];
      let cursor = open.follow;
      for (let i = 0; i < 20; i += 1) {
        const query = new URLSearchParams({ taskId: open.taskId });
        if (cursor) query.set("cursor", cursor);
        const page = await this.api(`${base}/history?${query}`);
        entries.push(...page.entries);
        cursor = page.followCursor || cursor;
        if (!page.nextCursor) break;
      }
      if (this.open !== open) return;
      open.task = task;
      open.entries.push(...entries);
      open.follow = cursor;
      open.error = null;
      open.readAt = Date.now();
    } catch (error) {
      if (this.open !== open) return;
      open.error = { code: error.code || "unavailable", message: error.message };
    }
    this.draw();
  }

  draw() {
    const open = this.open;
    if (!open) return;
    const ctx = this.context(open.endpoint);
    const close = el("button", { type: "button", class: "close", "aria-label": "Close the task detail" }, icon("close"));
    close.addEventListener("click", () => this.root.dispatchEvent(new Event("close-detail")));
    const task = open.task;
    const focusedClose = document.activeElement && document.activeElement.classList.contains("close");
    const parts = [];
    if (open.error) {
      const shown = task ? ` Showing the read from ${clock(open.readAt)}; it may be out of date.` : "";
      const gone = open.error.code === "not-found";
      const said = gone ? `${open.endpoint} has no task ${open.taskId}. It may have been removed, or the link that led here may be mistyped; close this panel to look for it on the board.` : sentence(open.error.message);
      parts.push(el("div", { class: "banner unavailable", role: "alert" }, el("b", { text: gone ? "Not found" : "Could not read" }), `: ${said}${shown}`));
    }
    if (!task) {
      parts.unshift(el("header", { class: "detail-head" }, el("h2", { id: "detail-title", text: open.error ? open.taskId : "Reading the task…" }), close));
      this.body.replaceChildren(...parts);
      this.root.dataset.taskId = open.taskId;
      this.root.dataset.state = open.error ? "error" : "loading";
      if (focusedClose) close.focus();
      return;
    }
    const liveness = task.binding && ctx.liveness ? ctx.liveness[seatKey(task.binding)] : null;
    if (ctx.stale) {
      const since = ctx.stale.staleAsOf ? ` since ${clock(ctx.stale.staleAsOf)}` : "";
      parts.push(el("div", { class: "banner stale", role: "status" }, el("b", { text: `Stale${since}` }), `: ${sentence(ctx.stale.reason)} The tracker may have changed since.`));
    }
    const head = el(
      "header",
      { class: "detail-head" },
      el("div", { class: "detail-ref" }, el("span", { class: `status-tag s-${task.status}`, "data-status": task.status, text: LABELS[task.status] }), refNode(task, ctx.endpoint), el("span", { class: "muted", text: open.endpoint })),
      close,
    );
    const facts = el(
      "dl",
      { class: "facts" },
      ...fact("Status", LABELS[task.status]),
      ...fact("In the tracker", task.statusSource ? el("code", { text: task.statusSource }) : el("span", { class: "muted", text: "no native status" })),
      ...bindingFacts(task.binding, liveness, ctx.endpoint),
      ...fact("Changes", `${open.entries.length} recorded`),
      ...fact("Created", when(task.createdAt)),
      ...fact("Updated", `${when(task.updatedAt)} (${ago(task.updatedAt)})`),
      ...fact("Task id", el("code", { text: task.taskId })),
    );
    // The record's raw identifiers, for whoever needs them, out of the reading's way.
    const raw = el(
      "details",
      { class: "raw" },
      el("summary", { text: "Record details" }),
      el(
        "dl",
        { class: "facts" },
        ...fact("Space", el("code", { text: task.space })),
        ...fact("Record format", el("code", { text: task.version })),
        ...(task.binding ? fact("Lifecycle uid", el("code", { text: task.binding.lifecycleUid })) : []),
        ...(task.binding ? fact("Bound by", el("code", { text: task.binding.boundBy })) : []),
      ),
    );
    this.body.replaceChildren(
      head,
      ...parts,
      el("h2", { id: "detail-title", class: "detail-title", text: task.title }),
      actions(task, ctx.endpoint, open.endpoint),
      task.brief ? el("p", { class: "brief", text: lines(task.brief) }) : el("p", { class: "brief muted", text: "No brief." }),
      facts,
      raw,
      el("h3", { text: `Evidence (${task.evidence.length})` }),
      evidenceList(task.evidence),
      el("h3", { text: "History" }),
      historyList(open.entries),
      el("p", { class: "muted small read-at", text: `Read ${clock(open.readAt)}; kept current as the board changes.` }),
    );
    this.root.dataset.taskId = task.taskId;
    this.root.dataset.state = open.error ? "stale" : "current";
    if (focusedClose) close.focus();
  }
}
